"""The documentation site: generated pages in step with the code, every snippet and link in place, and
``mkdocs build --strict`` clean where the [docs] extra is installed."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
sys.path.insert(0, str(ROOT / "tools"))
import docs_pages  # noqa: E402
import docs_snippets  # noqa: E402


def _nav_files(node: object) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [f for item in node for f in _nav_files(item)]
    if isinstance(node, dict):
        return [f for value in node.values() for f in _nav_files(value)]
    return []


def _mkdocs_config() -> dict:
    class Loader(yaml.SafeLoader):  # mkdocs.yml names a Python object for the mermaid fence: read it as text
        pass

    Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: suffix)
    return yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)  # noqa: S506 - a SafeLoader subclass


def test_probe_pages_are_generated_from_the_current_code():
    pages = docs_pages.pages()
    assert {p.stem for p in pages} >= {"accuracy", "universal-trigger", "backdoor-scan", "behaviour", "calibration",
                                       "slices", "spurious-cues", "head-pruning", "attention-audit", "syntax-heads",
                                       "cloze"}
    stale = [p.name for p, text in pages.items() if not p.exists() or p.read_text() != text]
    assert not stale, f"stale probe pages {stale}: run python tools/docs_pages.py"
    page = pages[DOCS / "probes" / "calibration.md"]  # a page holds meanings, not just names
    assert "| `fit_share` | float | `0.5` | the seeded share of the data temperature scaling is fitted on" in page
    assert "| `ece` | lower is better | expected calibration error" in page


def test_every_nav_page_snippet_and_link_exists():
    config = _mkdocs_config()
    nav = _nav_files(config["nav"])
    assert all((DOCS / f).is_file() for f in nav), [f for f in nav if not (DOCS / f).is_file()]
    pages = [p for p in DOCS.rglob("*.md") if "notes" not in p.parts and "snippets" not in p.parts]
    assert {str(p.relative_to(DOCS)) for p in pages} <= set(nav), "a page is missing from mkdocs.yml's nav"
    used = set()
    for page in docs_snippets.snippet_pages():
        text = page.read_text()
        assert "--8<--" not in text, f"{page.name}: an include shows as a literal line on GitHub; use a snippet region"
        for name in re.findall(r"<!-- snippet: ([\w.-]+) -->", text):
            file = name if name.endswith((".md", ".txt")) else f"{name}.txt"
            assert (DOCS / "snippets" / file).is_file(), f"{page.name} shows a missing snippet {name}"
            used.add(Path(file).stem)
        # the text in the page is the snippet's (as GitHub shows it): python tools/docs_snippets.py refills them
        assert docs_snippets.filled_text(text) == text, f"{page.name}: stale snippet regions"
    readme = (ROOT / "README.md").read_text()
    assert set(docs_snippets.SNIPPETS) <= used | {"list", "validate"} , "a snippet nobody shows"
    # a fixture's snippet, once the fixture is in ../shared: recorded (tools/docs_snippets.py NAME) and shown
    assert set(docs_snippets.fixture_snippets()) <= used, "a fixture has landed: record and show its snippet"
    for target in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (ROOT / target).is_file(), f"README links to a missing {target}"
    assert len(readme.splitlines()) < 150, "the README is a front page: details belong in docs/"


def test_snippets_are_real_runs_with_their_exit_codes():
    quick = (DOCS / "snippets" / "quickstart.txt").read_text()
    assert quick.startswith(f"$ {docs_snippets.SNIPPETS['quickstart']}\n")
    assert re.search(r"^decision: ", quick, re.M) and re.search(r"\$ echo \$\?\n\d+\n$", quick)
    assert "/work/" not in quick and "/tmp/" not in quick  # paths as a user's own folder shows them
    readme = (ROOT / "README.md").read_text()
    assert quick in readme  # the README's quick start is the snippet, copied by tools/docs_snippets.py


def test_differences_ignore_durations_and_last_digits_but_not_figures():
    recorded = "accuracy  PASSED  3/3  6.1s   accuracy 0.892 [0.870, 0.911] on 872 examples\nreport: r/sst2-20261126T205020Z/x"
    rerun = "accuracy  PASSED  3/3  12.4s  accuracy 0.893 [0.870, 0.911] on 872 examples\nreport: r/sst2-20261127T101010Z/x"
    assert docs_snippets.differences(recorded, rerun) == []
    drifted = rerun.replace("0.893", "0.871")  # the docs' figure no longer what a run prints
    assert len(docs_snippets.differences(recorded, drifted)) == 1
    assert docs_snippets.differences(recorded, rerun.replace("PASSED", "FAILED"))
    assert docs_snippets.differences(recorded, rerun + "\nextra line")
    assert not docs_snippets.PROGRESS.sub("", "predict: 18/28 (64%), 21 s\n[fp32/behaviour] cases: 3/9 (33%), 2 s\n")
    # bf16's figures follow the CPU's bfloat16 path; its warning shows on a CPU without native instructions only
    native = "fp32  accuracy  PASSED  4/4  1.4s  ORG F1 0.548\nbf16  accuracy  PASSED  4/4  5.3s  ORG F1 0.548"
    avx2 = ("warning: this CPU has no native bfloat16 instructions (torch runs at AVX2): ...\n"
            "fp32  accuracy  PASSED  4/4  1.4s  ORG F1 0.548\nbf16  accuracy  PASSED  4/4  9.3s  ORG F1 0.535")
    assert docs_snippets.differences(native, avx2, "bf16") == []
    said = "decision: bf16: may replace fp32 (no significant regression); like fp32, misses: calibration ece 0.1307"
    listed = said.replace("regression)", "regression; past the tolerance, not significant: accuracy.entity_f1 -0.00549 (p=0.6), accuracy.f1_ORG -0.0127)")
    assert docs_snippets.differences(said, listed.replace("0.1307", "0.1356"), "bf16") == []
    assert docs_snippets.differences(said, listed.replace("may replace", "may not replace"), "bf16")
    assert docs_snippets.differences(said, listed, "ner")  # only bf16's lines follow the CPU
    assert len(docs_snippets.differences(native, avx2, "quickstart")) == 3  # elsewhere a line is a line
    assert docs_snippets.differences(native, avx2.replace("ORG F1 0.535", "ORG F1 0.501"), "bf16")
    assert docs_snippets.differences(native, avx2.replace("fp32  accuracy  PASSED  4/4  1.4s  ORG F1 0.548",
                                                          "fp32  accuracy  PASSED  4/4  1.4s  ORG F1 0.535"), "bf16")
    kept = "slices  PASSED  1/1  0.0s  worst: 3/20 (15%) wrong in 'long'\n"  # a result line is never dropped
    assert docs_snippets.PROGRESS.sub("", kept) == kept


@pytest.mark.reproduction
@pytest.mark.skipif(not docs_snippets.SHARED.is_dir(), reason="the fixtures in ../shared are absent")
def test_the_docs_show_what_a_fresh_run_prints():
    """The quick start, the NER suite, the multi-label example and the bf16 matrix, rerun on the fixtures: the docs'
    recorded output (words, figures, exit code) is what the command prints now. Refresh with
    python tools/docs_snippets.py."""
    with docs_snippets.scratch_folder() as scratch:
        for name in (*docs_snippets.CHECKED, *docs_snippets.fixture_snippets()):
            recorded = (DOCS / "snippets" / f"{name}.txt").read_text()
            fresh, _ = docs_snippets.run_snippet(name, scratch)
            found = docs_snippets.differences(recorded, fresh, name)
            assert not found, f"docs/snippets/{name}.txt is stale:\n" + "\n".join(found[:10])
            if name == "bf16":  # may bf16 replace fp32? yes, naming the miss they share; exit code 4
                assert re.search(r"^decision: bf16: may replace fp32 \(no significant regression(; past the tolerance, "
                                 r"not significant: (?:[^()]|\([^()]*\))*)?\); like fp32, misses: "
                                 r"calibration ece \d\.\d+ \(fp32: \d\.\d+\)\n\S.*\n\$ echo \$\?\n4\n$", fresh, re.M), fresh


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None,
                    reason="the [docs] extra is not installed")
def test_mkdocs_build_strict(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, env={**__import__("os").environ,
                                                                          "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    cli = (tmp_path / "site" / "cli" / "index.html").read_text()
    assert 'id="bertprobe-run"' in cli and "--label-map" in cli  # mkdocs-click rendered the commands
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    assert "ProbeResult" in api and "add_metric" in api  # mkdocstrings rendered the docstrings


def test_the_verdicts_page_lists_every_default_bound_of_the_builtin_probes():
    from bertprobe.plugins import build_plugins

    page = (DOCS / "verdicts.md").read_text()
    probes = build_plugins().probes
    for name in probes.names():
        for d in probes.get(name).catalogue().defaults:  # its own and what the built-in tasks add
            bound = d.min if d.min is not None else d.max
            row = next((line for line in page.splitlines() if line.startswith(f"| {name} |")), "")
            assert f"`{d.metric}`" in row and f"{bound:g}" in row, (name, d.metric, bound)


def test_a_busy_machine_warning_is_no_difference_of_a_snippet():
    """The warning depends on what else ran at the time (environment.busy_note), on either side of the comparison."""
    import sys as _sys

    _sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    import docs_snippets

    busy = ("warning: the machine was busy when the run started (load 2.0 on 2 cores, with 2 threads of this run): "
            "timings and examples/s are slowed; pass --threads 1, or run on a quiet machine")
    recorded = "run\n| threads | 2 |\nok"
    assert docs_snippets.differences(recorded, f"run\n{busy}\n| threads | 2 ({busy}) |\nok") == []
    assert docs_snippets.differences(recorded, "run\n| threads | 2 |\nfailed")
