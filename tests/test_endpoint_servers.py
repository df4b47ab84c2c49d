"""bertprobe audits real servers (examples/serving, started on loopback): the SST-2 fixture served by KServe over
v2 and v1 and by the TEI-shaped app audits to the checkpoint's numbers, through 20% transient faults too; a server
that truncates at 32 tokens makes the serving suite say do not ship and name truncation; the QA fixture served as
the pipeline shape gives the checkpoint's EM and F1. Skipped without the [serve] extra or the fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from servers import SQUAD_MODEL, SQUAD_TEST, SST2_DEV, SST2_MODEL, fault_proxy, kserve_server, tei_server

pytestmark = pytest.mark.serve
pytest.importorskip("httpx", reason="httpx is not installed (the [serve] extra): pip install -e '.[serve]'")

from bertprobe.cli import main  # noqa: E402
from bertprobe.harness import run_suite  # noqa: E402
from bertprobe.plugins import build_plugins  # noqa: E402
from bertprobe.suite import load_suite  # noqa: E402

LIMIT = 160  # SST-2 dev sentences: enough to pair, quick on 2 cores


def _write(tmp_path: Path, name: str, models: str, probes: str, data: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"suite: {name}\n{models}\n{data}\nseed: 13\n"
                    f"report: {{dir: '{tmp_path / 'reports'}', formats: [json]}}\nprobes:\n{probes}")
    return path


SST2_DATA = f"data: {{path: '{SST2_DEV}', text: sentence, label: label, limit: {LIMIT}}}"


@pytest.fixture(scope="module")
def sst2_kserve():
    with kserve_server(SST2_MODEL, name="sst2", extra=["--version", "3"]) as server:
        yield server


def test_the_sst2_fixture_served_over_v2_v1_and_tei_audits_to_the_checkpoints_numbers(sst2_kserve, tmp_path):
    with tei_server(SST2_MODEL) as tei:
        models = (f"models:\n  - {{name: checkpoint, path: '{SST2_MODEL}', device: cpu}}\n"
                  f"  - {{name: v2, endpoint: '{sst2_kserve.url}', protocol: v2, served_name: sst2, "
                  "labels: [negative, positive]}\n"  # KServe's metadata names no classes: the suite does (or a twin)
                  f"  - {{name: v1, endpoint: '{sst2_kserve.url}', protocol: v1, served_name: sst2, "
                  "labels: [negative, positive]}\n"
                  f"  - {{name: tei, endpoint: '{tei.url}', protocol: hf}}\n"
                  "compare: {baseline: checkpoint}")
        probes = "  - probe: accuracy\n    params: {single_check: 0}\n  - probe: calibration\n"
        session = run_suite(load_suite(_write(tmp_path, "served", models, probes, SST2_DATA)), build_plugins())
    report = session.report
    base_acc, base_cal = report.result("checkpoint", "accuracy"), report.result("checkpoint", "calibration")
    for name in ("v2", "v1", "tei"):
        acc, cal = report.result(name, "accuracy"), report.result(name, "calibration")
        for metric in ("accuracy", "accuracy_negative", "accuracy_positive"):
            assert acc.value(metric) == base_acc.value(metric), (name, metric)
        for metric in ("ece", "brier", "nll"):
            assert cal.value(metric) == pytest.approx(base_cal.value(metric), abs=1e-6), (name, metric)
    assert {a.model: a.rate for a in report.agreement if a.probe_id == "accuracy"} == {"v2": 1.0, "v1": 1.0, "tei": 1.0}
    v2 = next(m for m in report.models if m.name == "v2")
    assert any("version 3" in n for n in v2.notes) and any(n.startswith("deterministic") for n in v2.notes)


def test_a_fifth_of_requests_failing_transiently_leaves_the_numbers_unchanged(sst2_kserve, tmp_path):
    with fault_proxy(sst2_kserve.url, fail_503=0.1, fail_429=0.05, drop=0.05, seed=5) as proxy:
        models = (f"models:\n  - {{name: checkpoint, path: '{SST2_MODEL}', device: cpu}}\n"
                  f"  - {{name: flaky, endpoint: '{proxy.url}', served_name: sst2, batch_size: 8, retries: 8, "
                  f"timeout_s: 60, twin: '{SST2_MODEL}'}}\n" "compare: {baseline: checkpoint}")
        session = run_suite(load_suite(_write(tmp_path, "flaky", models, "  - probe: accuracy\n    params: "
                                              "{single_check: 0}\n", SST2_DATA)), build_plugins())
        faulted = proxy.requests_received - proxy.requests_forwarded  # answered by the proxy's faults
    report = session.report
    assert report.result("flaky", "accuracy").value("accuracy") == report.result("checkpoint", "accuracy").value("accuracy")
    assert [a.rate for a in report.agreement if a.model == "flaky"] == [1.0]
    assert faulted > 0


def test_a_server_down_for_good_stops_the_run_with_exit_2_and_keeps_what_was_done(sst2_kserve, tmp_path):
    with fault_proxy(sst2_kserve.url, fail_from=3) as proxy:
        model = (f"model: {{endpoint: '{proxy.url}', served_name: sst2, batch_size: 16, concurrency: 1, retries: 2, "
                 "labels: [negative, positive]}")
        suite = _write(tmp_path, "down", model, "  - probe: accuracy\n    params: {single_check: 0}\n", SST2_DATA)
        result = CliRunner().invoke(main, ["run", str(suite)])
        url = proxy.url
    assert result.exit_code == 2, result.output
    last = [line for line in result.output.splitlines() if url in line and line.startswith("error:")]
    assert last and "503" in last[-1] and "Traceback" not in result.output
    run_dir = next((tmp_path / "reports").glob("down-*"))
    assert (run_dir / "endpoint-cache.sqlite").stat().st_size > 0 and (run_dir / "events.jsonl").is_file()


def test_a_server_that_truncates_at_32_tokens_is_do_not_ship_and_truncation_is_named(tmp_path, monkeypatch):
    with kserve_server(SST2_MODEL, name="sst2", extra=["--truncate", "32"]) as server:
        monkeypatch.setenv("BERTPROBE_MODEL", str(SST2_MODEL))
        monkeypatch.setenv("BERTPROBE_ENDPOINT", server.url)
        monkeypatch.setenv("BERTPROBE_SST2_LIMIT", "300")
        out = tmp_path / "out"
        result = CliRunner().invoke(main, ["run", "suites/serving.yaml", "--data", str(SST2_DEV), "--only",
                                           "serving-skew", "--out", str(out)])
    assert result.exit_code == 1, result.output
    assert "do not ship" in result.output
    report = json.loads(next(out.glob("serving-*/report.json")).read_text())
    (skew,) = [p for p in report["probes"] if p["model"] == "endpoint"]
    assert "truncates inputs at 32 tokens" in json.dumps(skew["details"]["diagnosis"])
    assert [f for f in skew["findings"] if f["title"] != "diagnosis"]  # the long examples that differ, named


def test_the_qa_fixture_served_as_the_pipeline_shape_gives_the_checkpoints_em_and_f1(tmp_path):
    with kserve_server(SQUAD_MODEL, name="squad", extra=["--task", "qa"]) as server:
        models = (f"models:\n  - {{name: checkpoint, path: '{SQUAD_MODEL}', device: cpu}}\n"
                  f"  - {{name: reader, endpoint: '{server.url}', protocol: v1, served_name: squad, "
                  "task: question-answering}\ncompare: {baseline: checkpoint}")
        data = f"data: {{path: '{SQUAD_TEST}', limit: 80}}"
        session = run_suite(load_suite(_write(tmp_path, "reader", models, "  - probe: accuracy\n    params: "
                                              "{single_check: 0}\n", data)), build_plugins())
    report = session.report
    mine, theirs = report.result("checkpoint", "accuracy"), report.result("reader", "accuracy")
    (agreement,) = [a for a in report.agreement if a.model == "reader"]
    # the server decodes as the old pipeline did (p(start) x p(end) per window); bertprobe sums logits over windows:
    # the same span wherever one window holds the context, so nearly every answer agrees
    assert agreement.rate >= 0.95, agreement.changed
    assert theirs.value("f1") == pytest.approx(mine.value("f1"), abs=3.0)
    assert theirs.value("exact_match") == pytest.approx(mine.value("exact_match"), abs=3.0)
