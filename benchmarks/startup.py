"""Benchmark: the fixed cost of a command, what a user pays before and around the probes' own work.

Runs, each in a fresh interpreter (as the console script does) and several times:
  * ``bertprobe run suites/ner.yaml --model <NER fixture> --data <UNER EWT test> --limit 40
    --only accuracy,calibration -q``: its wall time, the probes' own time (the sum of ``duration_s`` in its
    report.json) and the fixed cost (wall - probes), against the target of 6 s;
  * ``bertprobe --help`` and ``bertprobe list``: wall time against the target of 1.5 s.
Then one ``python -X importtime`` run of the NER command: the top-level imports by cumulative time.

With ``--baseline REF`` the same commands also run on a copy of the code at git REF (``git archive``, into a
temporary folder), interleaved with the current code's runs so that both meet the same load, and each
figure gets its ratio to the baseline's. Times are the best of the runs (the least disturbed by other work on
the machine) with the median beside them, and the CPU time (user + system, of the child process) of that run:
on a machine shared with other work the wall time grows with the load, the CPU time much less.

Usage: python benchmarks/startup.py [--repeat N] [--baseline REF] [--top N]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, SHARED, require

NER_MODEL = Path(os.environ.get("BERTPROBE_NER_MODEL", SHARED / "models" / "minilm-l6-uner"))
NER_DATA = Path(os.environ.get("BERTPROBE_NER_DATA", SHARED / "data" / "uner" / "en_ewt-ud-test.iob2"))
RUN_TARGET_S = 6.0  # fixed cost of the NER run beyond its probes
QUICK_TARGET_S = 1.5  # --help and list
CONSOLE = "import sys; from bertprobe.cli import entry_point; sys.argv[0] = 'bertprobe'; entry_point()"


def run_args(out: Path) -> list[str]:
    return ["run", str(REPO / "suites" / "ner.yaml"), "--model", str(NER_MODEL), "--data", str(NER_DATA),
            "--limit", "40", "--only", "accuracy,calibration", "--out", str(out), "-q"]


def command(code: Path, args: list[str], python_flags: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """``bertprobe ARGS`` as the console script runs it, importing bertprobe from ``code``."""
    env = {**os.environ, "PYTHONPATH": str(code), "BERTPROBE_NO_PROGRESS": "1", "COLUMNS": "100"}
    return subprocess.run([sys.executable, *python_flags, "-c", CONSOLE, *args], cwd=code, env=env,
                          capture_output=True, text=True)


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed_command(code: Path, args: list[str]) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """Wall and CPU seconds of one command, and its outcome."""
    cpu, start = _children_cpu(), time.perf_counter()
    done = command(code, args)
    return time.perf_counter() - start, _children_cpu() - cpu, done


def probes_seconds(out: Path) -> float:
    """The probes' own time in the newest run under ``out``: the sum of their ``duration_s``."""
    runs = sorted(p for p in out.iterdir() if p.is_dir() and (p / "report.json").is_file())
    report = json.loads((runs[-1] / "report.json").read_text(encoding="utf-8"))
    return sum(float(p.get("duration_s") or 0.0) for p in report["probes"])


def measure(code: Path, work: Path) -> dict[str, tuple[float, float, float]]:
    """One round: each command once; name -> (wall seconds, probes' seconds, CPU seconds)."""
    out = work / "runs"
    out.mkdir(parents=True, exist_ok=True)
    wall, cpu, done = timed_command(code, run_args(out))
    if done.returncode not in (0, 1):  # 1: an expectation failed (the fixture misses the suite's bars): fine
        raise SystemExit(f"the NER run failed ({done.returncode}) in {code}:\n{done.stderr[-2000:]}")
    rows = {"run": (wall, probes_seconds(out), cpu)}
    for name, args in (("--help", ["--help"]), ("list", ["list"])):
        wall, cpu, done = timed_command(code, args)
        if done.returncode != 0:
            raise SystemExit(f"bertprobe {name} failed in {code}:\n{done.stderr[-2000:]}")
        rows[name] = (wall, 0.0, cpu)
    return rows


def import_profile(code: Path, work: Path, top: int) -> list[tuple[float, str]]:
    """The top-level imports of one NER run by cumulative seconds (``python -X importtime``)."""
    done = command(code, run_args(work / "profile"), ("-X", "importtime"))
    found = []
    for line in done.stderr.splitlines():
        match = re.match(r"import time:\s+\d+ \|\s+(\d+) \|( ?)(\S.*)$", line)
        if match and len(match.group(2)) <= 1:  # depth 0: imported by bertprobe's code or the interpreter
            found.append((int(match.group(1)) / 1e6, match.group(3).strip()))
    return sorted(found, reverse=True)[:top]


def baseline_copy(ref: str, into: Path) -> Path:
    """The code at git ``ref``, unpacked into ``into``."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def summary(samples: list[dict[str, tuple[float, float, float]]], name: str) -> tuple[float, float, float, float, float]:
    """best wall, median wall, probes' seconds of the best run, fixed cost of the best run, its CPU seconds."""
    walls = [s[name][0] for s in samples]
    best = min(samples, key=lambda s: s[name][0])[name]
    return best[0], statistics.median(walls), best[1], best[0] - best[1], best[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="rounds of the three commands (default 5)")
    parser.add_argument("--baseline", metavar="REF", help="also measure the code at this git ref, interleaved")
    parser.add_argument("--top", type=int, default=12, help="imports shown from the profile (default 12)")
    args = parser.parse_args()
    require(NER_MODEL, NER_DATA)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    work = Path(tempfile.mkdtemp(prefix="bertprobe-startup-"))
    try:
        codes = {"current": REPO}
        if args.baseline:
            codes["baseline"] = baseline_copy(args.baseline, work / "baseline-code")
        samples: dict[str, list[dict[str, tuple[float, float, float]]]] = {k: [] for k in codes}
        for round_ in range(args.repeat):
            for key, code in codes.items():  # interleaved: both meet the same load
                samples[key].append(measure(code, work / key))
            print(f"round {round_ + 1}/{args.repeat} done", file=sys.stderr)
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(f"{cores} cores, load average {load:.1f} at the end; best of {args.repeat} runs (median in brackets)\n")
        for key in codes:
            label = f" ({args.baseline})" if key == "baseline" else ""
            print(f"{key}{label}:")
            wall, median, probes, fixed, cpu = summary(samples[key], "run")
            verdict = "ok" if fixed <= RUN_TARGET_S else "over"
            print(f"  run ner --limit 40 --only accuracy,calibration: wall {wall:.2f} s [{median:.2f}], probes "
                  f"{probes:.2f} s, fixed cost {fixed:.2f} s (target <= {RUN_TARGET_S:.0f} s: {verdict}); cpu {cpu:.2f} s")
            for name in ("--help", "list"):
                wall, median, _, _, cpu = summary(samples[key], name)
                verdict = "ok" if wall < QUICK_TARGET_S else "over"
                print(f"  bertprobe {name}: {wall:.2f} s [{median:.2f}] (target < {QUICK_TARGET_S} s: {verdict}); "
                      f"cpu {cpu:.2f} s")
        if "baseline" in codes:
            print("\ncurrent / baseline (best runs):")
            now, then = summary(samples["current"], "run"), summary(samples["baseline"], "run")
            print(f"  run: wall {now[0] / then[0]:.2f}x, fixed cost {now[3] / then[3]:.2f}x "
                  f"({then[3]:.2f} s -> {now[3]:.2f} s), cpu {now[4] / then[4]:.2f}x ({then[4]:.2f} s -> {now[4]:.2f} s)")
            for name in ("--help", "list"):
                now, then = summary(samples["current"], name), summary(samples["baseline"], name)
                print(f"  {name}: {now[0] / then[0]:.2f}x ({then[0]:.2f} s -> {now[0]:.2f} s), cpu {now[4] / then[4]:.2f}x "
                      f"({then[4]:.2f} s -> {now[4]:.2f} s)")
        for key, code in codes.items():
            print(f"\ntop-level imports of one NER run, {key} (python -X importtime, cumulative s; one run, "
                  "inflated by the tracing):")
            for seconds, module in import_profile(code, work / key, args.top):
                print(f"  {seconds:6.2f}  {module}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
