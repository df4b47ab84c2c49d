"""The fixed cost of a command: nothing heavy imported unless the command needs it (behaviour, not timing; the
times are measured by benchmarks/startup.py), `python -m bertprobe`, and `bertprobe list` at 80 columns."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "torchao", "transformers", "datasets", "matplotlib", "scipy", "sklearn", "pandas")


def python(code: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter that imports this checkout's bertprobe."""
    environ = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""), **(env or {})}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=environ, timeout=300)


LOADED = """
import contextlib, io, json, sys
from bertprobe.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        main.main(sys.argv[1:], standalone_mode=False)
    except SystemExit:
        pass
print(json.dumps({"output": out.getvalue(), "loaded": sorted({m.split('.')[0] for m in sys.modules})}))
"""


def loaded_after(*command: str) -> tuple[str, set[str]]:
    """The output of a bertprobe command run in a fresh interpreter, and the top-level modules it imported."""
    done = python(LOADED, *command)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return result["output"], set(result["loaded"])


@pytest.mark.parametrize("command", [["--help"], ["list"], ["run", "--help"], ["describe", "head-pruning"]])
def test_help_and_list_import_nothing_heavy(command):
    output, loaded = loaded_after(*command)
    assert output.strip()
    assert loaded.isdisjoint(HEAVY), sorted(loaded & set(HEAVY))


def test_list_from_the_catalog_shows_what_the_imported_plugins_show():
    """`list` reads the built-ins from bertprobe/catalog.json: it must say exactly what importing them says."""
    sys.path.insert(0, str(REPO / "tools"))
    try:
        import plugin_catalog
    finally:
        sys.path.remove(str(REPO / "tools"))
    from bertprobe.catalog import CATALOG
    from bertprobe.cli import _listing
    from bertprobe.plugins import build_plugins

    assert CATALOG.read_text(encoding="utf-8") == plugin_catalog.current(), \
        "bertprobe/catalog.json is out of date: run python tools/plugin_catalog.py"
    for width in (80, 200):
        assert _listing(build_plugins(listing=True), width) == _listing(build_plugins(), width)


def test_a_disabled_builtin_is_not_listed():
    output, _ = loaded_after("list")
    assert "bertprobe.probes.cloze.probe" in output
    done = python(LOADED, "list", env={"BERTPROBE_DISABLE_PLUGINS": "bertprobe.probes.cloze.probe"})
    listing = json.loads(done.stdout.strip().splitlines()[-1])["output"]
    assert "bertprobe.probes.cloze.probe" not in listing and not re.search(r"^cloze ", listing, re.M)
    assert re.search(r"^accuracy ", listing, re.M)


def test_a_plain_model_load_imports_no_quantization_backend_and_quantizing_stays_quiet(tiny_clf_dir):
    code = f"""
import sys
from bertprobe.model import ModelSpec, load_target
target = load_target(ModelSpec(path={str(tiny_clf_dir)!r}, device="cpu"))
print("after load:", "torchao" in sys.modules, flush=True)
load_target(ModelSpec(path={str(tiny_clf_dir)!r}, device="cpu"))  # a matrix's second model
print("after a second load:", "torchao" in sys.modules, flush=True)
from bertprobe.model.quantize import quantize_model
quantize_model(target.model, "int8-dynamic")
print("after quantize:", "torchao" in sys.modules, flush=True)
"""
    done = python(code)
    assert done.returncode == 0, done.stderr
    assert "after load: False" in done.stdout and "after a second load: False" in done.stdout
    assert "after quantize: True" in done.stdout  # quantizing imports it ...
    assert "Failed to load" not in done.stderr and "_pytree" not in done.stderr  # ... without its load warnings
    assert done.stderr.strip() == "", done.stderr


def test_a_run_imports_only_what_its_formats_and_models_need(suite_factory):
    suite = suite_factory("  - probe: accuracy\n  - probe: calibration\n")
    output, loaded = loaded_after("run", str(suite), "-q", "--allow-skips", "--set=report.formats=[json, markdown]")
    assert "report:" in output
    assert {"torch", "transformers"} <= loaded  # the model needs them (and datasets reads the tsv) ...
    assert loaded.isdisjoint({"torchao", "matplotlib"}), sorted(loaded)  # ... no quantizer, no figures for json/md


def test_the_recorded_versions_import_no_library():
    done = python("import sys; from bertprobe.environment import versions; v = versions(); "
                  "print('datasets' in sys.modules, 'transformers' in sys.modules); "
                  "import datasets, transformers; "
                  "print(v['datasets'] == datasets.__version__, v['transformers'] == transformers.__version__)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False", "True", "True"]


def test_python_dash_m_bertprobe_is_the_command():
    done = python("import runpy; runpy.run_module('bertprobe', run_name='__main__')", "--help")
    assert done.returncode == 0, done.stderr
    assert "Usage:" in done.stdout and "list" in done.stdout and "run" in done.stdout
    environ = {**os.environ, "PYTHONPATH": str(REPO)}
    listing = subprocess.run([sys.executable, "-m", "bertprobe", "list"], capture_output=True, text=True, env=environ,
                             timeout=300)
    assert listing.returncode == 0 and "accuracy" in listing.stdout, listing.stderr


def test_python_dash_m_bertprobe_cli_run_logs_its_progress(suite_factory):
    """Without --quiet a run logs to stderr; through ``python -m bertprobe.cli`` that once died with a NameError."""
    suite = suite_factory("  - probe: accuracy\n    expect: {accuracy: {min: 0}}\n")
    environ = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "bertprobe.cli", "run", str(suite), "--set=report.formats=[json]"],
                          capture_output=True, text=True, env=environ, timeout=300)
    assert "NameError" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr
    assert "loading" in done.stderr and "report:" in done.stdout


def test_list_fits_80_columns_without_cutting_a_word(monkeypatch):
    from click.testing import CliRunner

    from bertprobe.cli import _listing, main
    from bertprobe.plugins import build_plugins

    monkeypatch.setenv("COLUMNS", "80")
    output = CliRunner().invoke(main, ["list"]).output
    lines = output.splitlines()
    assert max(len(line) for line in lines) <= 80, max(lines, key=len)
    note = "(column plugin left out to fit 80 columns; 'bertprobe describe PROBE' names a probe's plugin)"
    assert " ".join(output.split()).count(note) == 1  # the probes' plugin column, said so
    unwrapped = _listing(build_plugins(listing=True), width=10_000)  # no cell wraps: every word whole
    whole = set(unwrapped.split()) | set(note.split())
    cut = sorted({w for w in output.split() if w not in whole and w.strip("-")})
    assert cut == [], cut  # e.g. 'token-' and 'classification;' from a token-classification cut in two
    for word in ("token-classification;", "masked-lm,", "data:layer:deprel,", "risk-coverage", "Benjamini-Hochberg)"):
        assert word in output.split(), word
    wide = CliRunner().invoke(main, ["list"], env={"COLUMNS": "200"}).output
    assert max(len(line) for line in wide.splitlines()) <= 200 and "left out" not in wide
    assert [line.split()[-1] for line in wide.splitlines() if line.startswith("accuracy ")] == ["bertprobe.probes.accuracy.probe"]


def test_describe_from_the_catalog_is_the_page_importing_the_probe_prints(monkeypatch):
    """`describe` reads a built-in probe's page from the catalog: the same text as built from the imported probe,
    nothing heavy imported."""
    from bertprobe.catalog import describe_text
    from bertprobe.plugins import build_plugins

    stored, loaded = loaded_after("describe", "behaviour")
    plugins = build_plugins(env={}, entry_points=False)
    assert stored == describe_text(plugins.probes.get("behaviour"), plugins)
    assert "Params" in stored and "Metrics" in stored and "torch" not in loaded
