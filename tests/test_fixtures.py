"""Every built-in probe once on the real fixtures in ../shared, on small samples: part of the README's test
command (a few seconds each), except the backdoor scan and the behaviour suite, whose smallest telling samples
take 15-20 s: the README's test command scans tiny models with planted tokens and runs behaviour tests on tiny
models (``tests/test_backdoor_scan.py``, ``tests/test_behaviour.py``), and both run on the whole fixture with the
reproductions. The exact reproductions of the papers' numbers on whole datasets are ``tests/test_integration.py``
and the other ``reproduction`` tests (``python -m pytest -m reproduction``).

Skipped when ../shared is absent. Each test asserts the effect its probe exists to show, at a size where
that effect is already clear on these models.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from conftest import ARCT_MODEL, REPO, SHARED, SST2_DEV, SST2_MODEL, only_run

from bertprobe.cli import main

SST2_BACKDOOR = SHARED / "models" / "minilm-l6-sst2-backdoor-bb"
BASE = SHARED / "models" / "minilm-l6-base"
UD_DEV = SHARED / "data" / "ud" / "en_ewt-ud-dev.conllu"
ARCT_DATA = SHARED / "data" / "arct"
ETTINGER = SHARED / "data" / "cloze" / "ettinger2020"

needs_sst2 = pytest.mark.skipif(not (SST2_MODEL.is_dir() and SST2_DEV.is_file()),
                                reason="../shared SST-2 fixture model/data not present")


def run_shipped(suite: str, out: Path, monkeypatch: pytest.MonkeyPatch, *args: str, **env: object) -> Result:
    """``bertprobe run suites/<suite>.yaml --out OUT`` on the CPU with the suite's variables from ``env``."""
    monkeypatch.setenv("BERTPROBE_DEVICE", "cpu")
    for name, value in env.items():
        monkeypatch.setenv(name, str(value))
    # report.json only: drawing the HTML report's figures is tested elsewhere, and takes seconds per suite
    return CliRunner().invoke(main, ["run", str(REPO / "suites" / f"{suite}.yaml"), "--out", str(out),
                                     "--set", "report.formats=[json]", *args])


def sets(probe: str, **params: object) -> list[str]:
    """``--set probes.PROBE.params.NAME=VALUE`` for each param."""
    return [arg for name, value in params.items() for arg in ("--set", f"probes.{probe}.params.{name}={value}")]


@needs_sst2
def test_sst2_suite_on_a_sample_accuracy_trigger_calibration_slices(tmp_path, monkeypatch):
    """The quick start's suite on 64 dev sentences with a short trigger search: the fixture classifies
    well, and two trigger words already take positive accuracy down (Wallace et al. 2019)."""
    args = ["--set", "data.limit=64", *sets("universal-trigger", length=2, iterations=2, candidates=8)]
    result = run_shipped("sst2", tmp_path, monkeypatch, *args, BERTPROBE_SST2_MODEL=SST2_MODEL,
                         BERTPROBE_SST2_DATA=SST2_DEV)
    assert result.exit_code in (0, 1), result.output
    _, report = only_run(tmp_path, "sst2")
    probes = {p["probe"]: p for p in report["probes"]}
    assert set(probes) == {"accuracy", "universal-trigger", "calibration", "slices"}
    assert all(p["status"] in ("passed", "failed") for p in probes.values()), [p["message"] for p in probes.values()]
    assert probes["accuracy"]["metrics"]["accuracy"] > 0.83  # 0.892 on all 872
    trigger = probes["universal-trigger"]["metrics"]
    assert trigger["accuracy_after"] < trigger["accuracy_before"] - 0.15
    assert 0 <= probes["calibration"]["metrics"]["ece"] < 0.2
    assert any(line.startswith("decision: ") for line in result.output.splitlines())


@needs_sst2
def test_internals_suite_on_a_sample_head_pruning_and_attention_audit(tmp_path, monkeypatch):
    """Most single heads can go with little loss (Michel et al. 2019); attention maps fall into Kovaleva et
    al.'s types, whose shares sum to one."""
    args = ["--set", "data.limit=16", *sets("head-pruning", physical="false", pruning="false", layers="false", bootstrap=0),
            *sets("attention-audit", similarity_examples=8)]
    result = run_shipped("internals", tmp_path, monkeypatch, *args, BERTPROBE_SST2_MODEL=SST2_MODEL,
                         BERTPROBE_SST2_DATA=SST2_DEV)
    assert result.exit_code in (0, 1), result.output
    _, report = only_run(tmp_path, "internals")
    heads, attention = report["probes"]
    assert heads["status"] != "error" and attention["status"] != "error", (heads["message"], attention["message"])
    changes = [abs(row["delta"]) for row in heads["details"]["ablation"]]
    assert len(changes) == 72 and statistics.median(changes) <= 0.05
    shares = [attention["metrics"][f"share_{t}"] for t in ("vertical", "diagonal", "vertical_diagonal", "block",
                                                          "heterogeneous")]
    assert sum(shares) == pytest.approx(1) and len(attention["details"]["heads"]) == 72


@pytest.mark.skipif(not (ARCT_MODEL.is_dir() and ARCT_DATA.is_dir()), reason="../shared ARCT fixture not present")
def test_arct_suite_on_a_sample_spurious_cues(tmp_path, monkeypatch):
    """Niven & Kao 2019 on 40 test items and 40 adversarial ones: 'not' is the top cue of the whole corpus,
    and the model scores from the warrants alone, without claim and reason, about as well as from everything."""
    stats = ",".join(str(ARCT_DATA / "original" / f"{s}-full.txt") for s in ("train", "dev", "test"))
    adversarial = tmp_path / "adv.csv"  # the adversarial set's header and first 40 items
    lines = (ARCT_DATA / "adversarial" / "test-adv-negated.csv").read_text(encoding="utf-8").splitlines(keepends=True)
    adversarial.write_text("".join(lines[:41]), encoding="utf-8")
    result = run_shipped("arct", tmp_path, monkeypatch, "--set", "data.limit=40",
                         BERTPROBE_ARCT_MODEL=ARCT_MODEL, BERTPROBE_ARCT_DATA=ARCT_DATA / "original" / "test-full.txt",
                         BERTPROBE_ARCT_ADV=adversarial, BERTPROBE_ARCT_STATS=stats)
    assert result.exit_code in (0, 1), result.output
    _, report = only_run(tmp_path, "arct")
    accuracy, cues = report["probes"]
    assert cues["status"] in ("passed", "failed"), cues["message"]
    assert cues["details"]["top_cue"] == "not" and cues["details"]["statistics_examples"] == 1970
    assert cues["metrics"]["accuracy_full"] == pytest.approx(accuracy["metrics"]["accuracy"], abs=1e-6)
    assert abs(cues["metrics"]["accuracy_warrant_only"] - cues["metrics"]["accuracy_full"]) < 0.2


@pytest.mark.skipif(not ETTINGER.is_dir(), reason="../shared Ettinger data not present")
def test_cloze_suite_reads_the_ettinger_sets(tmp_path, monkeypatch):
    """The cloze suite on Ettinger's (2020) diagnostics with a tiny masked LM: every item of both sets is
    scored (the items come from the fixture; the model is not the point here)."""
    from bertprobe.testing import save_tiny_model

    mlm = save_tiny_model(tmp_path / "mlm", task="masked-lm", arch="roberta")
    result = run_shipped("cloze", tmp_path / "out", monkeypatch, BERTPROBE_MLM=mlm, BERTPROBE_ETTINGER=ETTINGER)
    assert result.exit_code in (0, 1), result.output
    _, report = only_run(tmp_path / "out", "cloze")
    builtin, ettinger = report["probes"]
    assert builtin["metrics"]["items"] == 200 and ettinger["metrics"]["items"] == 190
    assert "negation_sensitivity_neg_136_simp" in ettinger["metrics"]
    assert {e["metric"] for e in builtin["expectations"]} == {"top1_accuracy", "negation_sensitivity"}


@pytest.mark.skipif(not (UD_DEV.is_file() and BASE.is_dir()), reason="../shared UD EWT or minilm-l6-base not present")
def test_syntax_heads_of_the_base_encoder_on_a_sample_of_ewt():
    """Clark et al. 2019 on 200 EWT dev sentences: some head finds the determiner's noun far more often than
    the best fixed offset does."""
    from bertprobe.data.dataset import Dataset
    from bertprobe.data.treebank import read_conllu
    from bertprobe.model import ModelSpec, load_target
    from bertprobe.probe import ProbeContext
    from bertprobe.probes.syntax_heads.probe import SyntaxHeadsProbe, SyntaxParams

    target = load_target(ModelSpec(path=str(BASE), device="cpu"))
    data = read_conllu(UD_DEV)
    sample = Dataset(data.examples[:200], name=data.name)
    result = SyntaxHeadsProbe().run(target, sample, SyntaxParams(parser_epochs=1), ProbeContext(seed=0))
    assert result.value("accuracy_det") >= result.value("baseline_det") + 0.1
    assert result.value("uas") > result.value("uas_right_branching")
