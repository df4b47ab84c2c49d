"""`bertprobe run -q` stays quiet when interrupted: Ctrl-C (SIGINT) in the middle of a prediction pass prints
the one-line message and nothing else (no progress line), keeps the partial report, and exits 130."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from bertprobe.testing import save_tiny_model, sentiment_examples


def _default_sigint() -> None:
    """The child's Ctrl-C as a shell gives it, whatever disposition an earlier test left this process with (an
    ignored SIGINT is inherited across exec, and Python then installs no KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_under_quiet_prints_only_the_one_line_message(tmp_path):
    model = save_tiny_model(tmp_path / "m", layers=2, heads=4)
    data = tmp_path / "d.tsv"
    rows = sentiment_examples(400, 3) * 60  # 24,000 rows one at a time: a pass far longer than the test waits
    data.write_text("sentence\tlabel\n" + "\n".join(f"{t}\t{y}" for t, y in rows) + "\n")
    suite = tmp_path / "s.yaml"
    suite.write_text(f"suite: quiet\nmodel: {{path: '{model}', device: cpu}}\ndata: {{path: '{data}'}}\n"
                     f"report: {{dir: '{tmp_path / 'r'}', formats: [json]}}\n"
                     "probes:\n  - {probe: accuracy, params: {batch_size: 1}}\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    env.pop("BERTPROBE_NO_PROGRESS", None)  # progress as a user sees it: only --quiet may hold it back
    proc = subprocess.Popen([sys.executable, "-c", "from bertprobe.cli import entry_point; entry_point()", "run",
                             str(suite), "-q", "--threads", "1"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)
    try:
        deadline = time.monotonic() + 60
        events: list[dict] = []
        # a line would be due now, were it not quiet: a report from inside a loop (not an earlier loop's last one)
        while not any(e["event"] == "progress" and e.get("total") and e["done"] < e["total"] for e in events):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.2)
            logs = list((tmp_path / "r").glob("quiet-*/events.jsonl"))
            events = [json.loads(line) for line in logs[0].read_text().splitlines() if line.endswith("}")] if logs else []
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    (run_dir,) = (tmp_path / "r").glob("quiet-*")
    assert proc.returncode == 130, (stderr, stdout, signal.getsignal(signal.SIGINT))
    assert stderr.splitlines() == [f"interrupted: partial report in {run_dir}"], stderr
    assert stdout == ""
    report = json.loads((run_dir / "report.json").read_text())
    assert report["status"] == "interrupted"
    assert [p["status"] for p in report["probes"]] == ["interrupted"]
