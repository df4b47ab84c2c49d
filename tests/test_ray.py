"""The ``ray`` executor on a private local cluster (2 CPUs, loopback): same reports as ``local``, sharded
sweeps with identical numbers, retries after a killed worker, and a failing job kept to its model.

Skipped when Ray is not installed (the core install has no Ray; ``.ci/run`` installs the extra).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray")

from conftest import sentiment_tsv  # noqa: E402

from bertprobe.harness import run_suite
from bertprobe.plugins import build_plugins  # noqa: E402
from bertprobe.run.control import RunControl  # noqa: E402
from bertprobe.suite import load_suite  # noqa: E402
from bertprobe.suite.overrides import SuiteOverrides  # noqa: E402
from bertprobe.testing import FaultProbes, save_tiny_model  # noqa: E402

pytestmark = pytest.mark.ray  # private clusters take minutes: run with -m ray


@pytest.fixture(scope="module")
def cluster():
    """One private cluster for the module: 2 CPUs, bound to 127.0.0.1, no dashboard, no usage stats."""
    from bertprobe.executors import ExecutorSpec
    from bertprobe.executors.ray import RayExecutor

    executor = RayExecutor(ExecutorSpec(name="ray", workers=2))  # as bertprobe starts one: loopback, token
    executor.start()
    assert executor.owned
    yield
    executor.close()


@pytest.fixture(scope="module")
def models(tmp_path_factory, trained_model) -> tuple[Path, Path]:
    good = trained_model("good", layers=3, heads=4, steps=80)
    bad = save_tiny_model(tmp_path_factory.mktemp("bad"), seed=5, layers=3, heads=4)
    return good, bad


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return sentiment_tsv(tmp_path_factory.mktemp("data") / "senti.tsv", 60)


def suite_file(tmp_path: Path, models: tuple[Path, ...], data: Path, probes: str, extra: str = "") -> Path:
    listed = "".join(f"  - {{name: m{i}, path: '{p}', device: cpu}}\n" for i, p in enumerate(models))
    text = (f"suite: rx\nmodels:\n{listed}data: {{path: '{data}'}}\nseed: 3\n{extra}"
            f"report: {{dir: '{tmp_path / 'reports'}', formats: [json]}}\nprobes:\n{probes}")
    path = tmp_path / "rx.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def run(path: Path, out: Path, executor: str = "local", plugins: Any = None, log: Any = None,
        **overrides: Any) -> dict[str, Any]:
    session = run_suite(load_suite(path), plugins or build_plugins(),
                        SuiteOverrides(executor=executor, **overrides), RunControl(out=str(out), threads=1, log=log))
    return json.loads((session.run_dir / "report.json").read_text())


TIMING = ("seconds", "duration", "speed", "per_s")


def untimed(value: Any) -> Any:
    """``value`` without the keys that hold timings, at any depth."""
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if not any(t in k for t in TIMING)}
    if isinstance(value, list):
        return [untimed(v) for v in value]
    return value


def comparable(report: dict[str, Any]) -> list[tuple[str, str, str, dict[str, Any], Any]]:
    """What must not depend on the executor: every result's status, metrics and details (timings aside)."""
    out = []
    for r in report["probes"]:
        metrics = {k: v for k, v in r["metrics"].items()
                   if r["metric_info"][k]["kind"] != "cost" and not any(t in k for t in TIMING)}
        details = untimed({k: v for k, v in r["details"].items() if k not in ("figures", "summary")})
        out.append((r["model"], r["id"], r["status"], metrics, json.dumps(details, sort_keys=True, default=str)))
    return sorted(out)


HEADS = ("  - probe: head-pruning\n    params: {pruning: false, bootstrap: 0, stack: 3}\n"
         "    expect: {baseline: {min: 0.0}}\n")


def test_matrix_of_two_models_gives_the_same_report_as_local(cluster, tmp_path, models, data):
    probes = ("  - probe: accuracy\n    expect: {accuracy: {min: 0.5}}\n"
              "  - {probe: universal-trigger, params: {target_label: positive, length: 1, iterations: 2, candidates: 4, batch_size: 8, restarts: 2}}\n" + HEADS)
    path = suite_file(tmp_path, models, data, probes,
                      extra="compare: {baseline: m0, tolerance: 0.05}\n")
    local = run(path, tmp_path / "local")
    remote = run(path, tmp_path / "ray", executor="ray")
    assert comparable(local) == comparable(remote)
    assert [m["name"] for m in remote["models"]] == ["m0", "m1"]
    assert remote["status"] == "completed"
    # the gate saw the same per-example outcomes: the random model regresses in both
    assert [r["metric"] for r in local["regressions"]] == [r["metric"] for r in remote["regressions"]]
    assert remote["regressions"]
    # every event landed in the one events.jsonl, the ray run's units included
    (run_dir,) = (tmp_path / "ray").glob("rx-*")
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    units = [e for e in events if e["event"] == "unit_result" and e["id"] == "head-pruning"]
    assert len(units) == 2 * (12 + 3)  # per model: 12 single heads + 3 layers
    assert (run_dir / "outcomes.jsonl").is_file()


def test_sharded_head_ablation_gives_identical_numbers(cluster, tmp_path, models, data, monkeypatch):
    monkeypatch.delenv("BERTPROBE_NO_PROGRESS", raising=False)  # progress as on a user's terminal
    path = suite_file(tmp_path, models[:1], data, HEADS)
    local = run(path, tmp_path / "local")
    lines: list[str] = []
    remote = run(path, tmp_path / "ray", executor="ray", workers=2, log=lines.append)
    assert comparable(local) == comparable(remote)
    (probe,) = remote["probes"]
    assert len(probe["details"]["ablation"]) == 12
    # workers draw no progress bars; the driver gets progress lines instead, the last one complete
    assert any(line.startswith("[m0/head-pruning] head ablation (mask): 12/12 units (100%), ") for line in lines), lines
    assert any(line.startswith("[m0/head-pruning] layer ablation: 3/3 units (100%), ") for line in lines), lines


def test_the_driver_draws_a_bar_per_remote_sweep_on_a_terminal(cluster, tmp_path, models, data, monkeypatch):
    monkeypatch.delenv("BERTPROBE_NO_PROGRESS", raising=False)  # progress as on a user's terminal
    import bertprobe.progress as progress_module

    bars: list[Any] = []

    class RecordingBar:
        def __init__(self, iterable: Any = None, total: int | None = None, desc: str = "", **_: Any) -> None:
            self.iterable, self.total, self.desc, self.n, self.closed = iterable, total, desc, 0, False
            bars.append(self)

        def __iter__(self) -> Any:
            for item in self.iterable:
                self.n += 1
                yield item

        def refresh(self) -> None:
            pass

        def close(self) -> None:
            self.closed = True

    monkeypatch.setattr(progress_module, "tqdm", RecordingBar)
    monkeypatch.setattr(progress_module, "progress_enabled", lambda: True)  # as on a terminal
    lines: list[str] = []
    run(suite_file(tmp_path, models[:1], data, HEADS), tmp_path / "ray", executor="ray", workers=2, log=lines.append)
    remote = {b.desc: b for b in bars if b.desc.startswith("m0/head-pruning")}
    assert set(remote) == {"m0/head-pruning head ablation (mask)", "m0/head-pruning layer ablation"}
    assert [(b.n, b.total, b.closed) for b in remote.values()] == [(12, 12, True), (3, 3, True)]
    assert not [line for line in lines if "units" in line]  # bars instead of lines


def test_backdoor_pairs_sharded_over_workers_give_the_same_scan(cluster, tmp_path, models, data, monkeypatch):
    monkeypatch.delenv("BERTPROBE_NO_PROGRESS", raising=False)  # progress as on a user's terminal
    params = ("{candidates: 20, finalists: 8, inits: 2, relax_steps: 5, search_examples: 8, held_out: 16, "
              "screen_examples: 8, extend: 1, extend_candidates: 3, reference_model: '%s'}" % models[1])
    path = suite_file(tmp_path, models[:1], data, f"  - {{probe: backdoor-scan, params: {params}}}\n")
    local = run(path, tmp_path / "local")
    lines: list[str] = []
    remote = run(path, tmp_path / "ray", executor="ray", workers=2, log=lines.append)
    assert comparable(local) == comparable(remote)
    (probe,) = remote["probes"]
    assert probe["status"] != "error", probe.get("message")
    assert [(p["source"], p["target"]) for p in probe["details"]["pairs"]] == [("negative", "positive"),
                                                                               ("positive", "negative")]
    assert any(line.startswith("[m0/backdoor-scan] backdoor scan: 2/2 units (100%), ") for line in lines), lines


def test_cloze_chunks_sharded_over_workers_give_the_same_scores(cluster, tmp_path, data, monkeypatch):
    monkeypatch.delenv("BERTPROBE_NO_PROGRESS", raising=False)  # progress as on a user's terminal
    from bertprobe.testing import WORDS

    mlm = save_tiny_model(tmp_path / "mlm", task="masked-lm")
    items = tmp_path / "items.jsonl"  # 300 items in the tiny model's vocabulary: two chunks of up to 256
    items.write_text("".join(json.dumps({"id": f"i{i}", "category": f"c{i % 3}", "answers": [WORDS[i % 60]],
                                         "text": f"{WORDS[i % 89]} {{mask}} {WORDS[(7 * i) % 91]}",
                                         "distractors": [WORDS[60 + i % 30]]}) + "\n" for i in range(300)))
    probes = f"  - {{probe: cloze, params: {{sets: ['{items}']}}}}\n"
    path = suite_file(tmp_path, (mlm,), data, probes)
    local = run(path, tmp_path / "local")
    lines: list[str] = []
    remote = run(path, tmp_path / "ray", executor="ray", workers=2, log=lines.append)
    assert comparable(local) == comparable(remote)
    assert any(line.startswith("[m0/cloze] cloze chunks: 2/2 units (100%), ") for line in lines), lines
    (probe,) = remote["probes"]
    assert probe["metrics"]["items"] == 300 and probe["details"]["forward_passes"] > 0


def test_sweep_shards_run_on_two_workers(cluster, models, data):
    """The sweep's chunks really leave the model job's process: two actors, each loading the model once."""
    from bertprobe.data import DataSpec
    from bertprobe.executors import ExecutorSpec
    from bertprobe.executors.ray import RayExecutor
    from bertprobe.executors.worker import WorkerContext
    from bertprobe.model import ModelSpec
    from bertprobe.execution import Sweep
    from bertprobe.suite import Suite

    class Pid(Sweep):
        def run(self, state: Any, units: list[Any]) -> list[Any]:
            time.sleep(0.2)
            return [os.getpid() for _ in units]

    executor = RayExecutor(ExecutorSpec(name="ray", workers=2))
    executor.start()
    suite = Suite(name="s", model=None, data=None, probes=())
    executor.context = WorkerContext(suite, "/tmp", [], 1, executor.spec)
    where = (ModelSpec(path=str(models[0]), device="cpu"), DataSpec(path=str(data)))
    try:
        got = dict(executor.map_sweep(None, Pid(), [[1, 2], [3], [4], [5]], where, grouped=True))  # type: ignore[arg-type]
    finally:
        executor.close()
    assert sorted(got) == [0, 1, 2, 3]
    pids = {p for values in got.values() for p in values}
    assert len(pids) == 2 and os.getpid() not in pids


def test_killed_worker_is_retried_and_the_run_completes(cluster, tmp_path, models, data):
    marker = tmp_path / "pid"
    probes = ("  - probe: accuracy\n    expect: {accuracy: {min: 0.0}}\n"
              f"  - {{probe: die-once, params: {{marker: '{marker}', wait: 120}}}}\n")
    path = suite_file(tmp_path, models[:1], data, probes)
    killed: list[int] = []

    def killer() -> None:
        deadline = time.time() + 120
        while time.time() < deadline:
            if marker.exists() and marker.read_text().strip():
                pid = int(marker.read_text())
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
            time.sleep(0.05)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    report = run(path, tmp_path / "out", executor="ray", plugins=build_plugins(extra=[FaultProbes()]))
    thread.join(5)
    assert killed and killed[0] != os.getpid()
    assert report["status"] == "completed"
    statuses = {r["id"]: r["status"] for r in report["probes"]}
    assert statuses == {"accuracy": "passed", "die-once": "measured"}
    die_once = next(r for r in report["probes"] if r["id"] == "die-once")
    assert die_once["metrics"]["attempts"] == 2.0
    # the retry resumed: accuracy, finished before the kill, ran once
    (run_dir,) = (tmp_path / "out").glob("rx-*")
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert sum(1 for e in events if e["event"] == "probe_result" and e["result"]["id"] == "accuracy") == 1


def test_a_job_that_always_fails_is_an_error_and_the_other_model_passes(cluster, tmp_path, models, data):
    # the random m1 gets one class all wrong, which the per-class default fails: turned off, so that its
    # finished accuracy reads "passed" and the kept-or-lost question is the only one asked
    loose = "{accuracy: {min: 0.0}, 'accuracy_*': off}"
    probes = (f"  - probe: accuracy\n    expect: {loose}\n"
              f"  - {{probe: die, params: {{victim: m1}}}}\n  - {{probe: accuracy, id: after, expect: {loose}}}\n")
    path = suite_file(tmp_path, models, data, probes)
    report = run(path, tmp_path / "out", executor="ray", plugins=build_plugins(extra=[FaultProbes()]))
    got = {(r["model"], r["id"]): (r["status"], r["message"]) for r in report["probes"]}
    assert report["status"] == "completed"
    assert got[("m0", "accuracy")][0] == got[("m0", "after")][0] == "passed"
    assert got[("m0", "die")][0] == "measured"
    # m1's job died on every attempt: what it finished is kept, what it never finished is an error
    assert got[("m1", "accuracy")][0] == "passed"
    for probe in ("die", "after"):
        status, message = got[("m1", probe)]
        assert status == "error" and "failed 3 time(s)" in message and "worker died" in message, message


def test_unknown_executor_and_missing_address_are_one_line_errors(tmp_path, models, data):
    from bertprobe.errors import SuiteError

    path = suite_file(tmp_path, models[:1], data, "  - probe: accuracy\n")
    with pytest.raises(SuiteError, match="no executor named 'rey'.*did you mean 'ray'"):
        run(path, tmp_path / "out", executor="rey")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_cancel_stops_the_jobs_and_reports_the_running_probe_interrupted(cluster, tmp_path, models, data):
    """What Ctrl-C does under ray: the tasks are cancelled (their worker killed) and the report kept."""
    marker = tmp_path / "pid"
    probes = ("  - probe: accuracy\n    expect: {accuracy: {min: 0.0}}\n"
              f"  - {{probe: die-once, params: {{marker: '{marker}', wait: 300}}}}\n")
    path = suite_file(tmp_path, models[:1], data, probes)
    cancel = threading.Event()

    def stopper() -> None:
        deadline = time.time() + 120
        while time.time() < deadline and not marker.exists():
            time.sleep(0.05)
        time.sleep(0.2)
        cancel.set()

    threading.Thread(target=stopper, daemon=True).start()
    start = time.time()
    with pytest.raises(KeyboardInterrupt):
        run_suite(load_suite(path), build_plugins(extra=[FaultProbes()]),
                  SuiteOverrides(executor="ray"), RunControl(out=str(tmp_path / "out"), threads=1, cancel=cancel))
    assert time.time() - start < 120
    pid = int(marker.read_text())
    for _ in range(100):  # the cancelled task's worker is killed
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"worker {pid} still runs after the cancel")
    (run_dir,) = (tmp_path / "out").glob("rx-*")
    report = json.loads((run_dir / "report.json").read_text())
    assert report["status"] == "interrupted"
    assert {r["id"]: r["status"] for r in report["probes"]} == {"accuracy": "passed", "die-once": "interrupted"}


def test_several_suites_run_side_by_side_with_one_report_each(cluster, tmp_path, models, data):
    from click.testing import CliRunner

    from bertprobe.cli import main

    paths = []
    for name, model in (("first", models[0]), ("second", models[1])):
        folder = tmp_path / name
        folder.mkdir()
        path = suite_file(folder, (model,), data, "  - probe: accuracy\n    expect: {accuracy: {min: 0.9}}\n")
        paths.append(path.rename(folder / f"{name}.yaml"))
    result = CliRunner().invoke(main, ["run", *map(str, paths), "--executor", "ray", "--out", str(tmp_path / "out"),
                                       "--threads", "1", "-q"])
    # the trained model passes, the random one fails its expectation: exit 1, two run folders
    assert result.exit_code == 1, result.output
    assert len(list((tmp_path / "out").glob("rx-*"))) == 2
    assert result.output.count("== ") == 2 and "PASSED" in result.output.upper() and "FAILED" in result.output.upper()
    assert ray.is_initialized()  # the test's cluster was joined, not shut down

