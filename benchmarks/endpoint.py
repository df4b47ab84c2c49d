"""Benchmark: bertprobe against a served model (issue #64 item 7), on KServe's model server serving the SST-2 fixture.

Starts ``examples/serving/kserve_server.py`` on the fixture (v2, one worker, ``--threads`` torch threads) on
127.0.0.1, then, with the server already up (its start is not timed):

1. **Prediction throughput.** The server's own saturated throughput, measured by a plain concurrent load loop (one
   keep-alive ``httpx.Client``, ``--concurrency`` threads, batches of 32 SST-2 dev sentences sent as the Open
   Inference Protocol's BYTES input, the same bodies bertprobe sends), against bertprobe's: a fresh
   ``load_target(ModelSpec(endpoint=URL, protocol="v2", ...))`` per repetition (an in-memory response cache, so
   nothing is answered twice) and ``target.predict_proba(examples)``, which includes reading the metadata, the
   determinism check's second request for 8 inputs, decoding, caching and the softmax. Rounds alternate which goes
   first; each side's best of ``--repeats`` (and the median of each round's own ratio, the two passes back to back:
   steadier where other work comes and goes), with this process's CPU seconds (all threads) in that pass: the client's
   own cost, which a loaded machine does not inflate as it does wall time. Target: bertprobe >= 0.90x the load loop.
2. **A whole audit.** ``bertprobe run suites/sst2.yaml --model CHECKPOINT --data DEV`` against ``bertprobe run
   suites/sst2.yaml --model URL --data DEV`` (``--model http://...`` makes the entry an endpoint) with
   ``--set model.served_name=sst2 --set model.labels=[negative,positive] --set model.twin=CHECKPOINT``: the suite's
   universal-trigger needs gradients, which an endpoint has not, so it searches its trigger on the twin (the
   checkpoint) and every other probe runs on the endpoint. Each a fresh ``python -m bertprobe`` process, the
   suite's own report formats, ``-q``; best wall time of ``--repeats``, and the probes' own seconds (report.json's
   ``duration_s``). Target: the endpoint's audit <= 1.5x the checkpoint's.

Client and server share this machine's cores: the load loop and bertprobe's client compete with the server alike,
and an audit of the endpoint runs the server and the harness side by side where the checkpoint's runs alone.

Usage: python benchmarks/endpoint.py [--threads 2] [--concurrency 4] [--limit N] [--repeats 3] [--no-audit] [--quick]
       (needs the [serve] extra; --limit N keeps the first N dev sentences; --quick: 96 sentences, one repeat, the
       audits on 48 sentences with a short trigger search: a smoke test of the script, not figures)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from common import REPO, SST2_DEV, SST2_MODEL, require

sys.path.insert(0, str(REPO / "examples" / "serving"))
from launch import start_server

NAME = "sst2"
LABELS = ("negative", "positive")
BATCH = 32


def sentences(limit: int | None) -> list[Any]:
    from bertprobe.data import DataSpec, load_table

    return list(load_table(DataSpec(path=str(SST2_DEV), text="sentence")).examples)[:limit]


def load_loop(url: str, texts: list[str], concurrency: int) -> float:
    """Seconds for a plain client to have every text answered: batches of 32, ``concurrency`` requests in flight."""
    import httpx

    bodies = [{"inputs": [{"name": "text", "shape": [len(b)], "datatype": "BYTES", "data": b}]}
              for b in (texts[i : i + BATCH] for i in range(0, len(texts), BATCH))]
    path = f"{url}/v2/models/{NAME}/infer"
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    with httpx.Client(timeout=60.0, limits=limits) as client:
        def send(body: dict) -> int:
            r = client.post(path, json=body)
            r.raise_for_status()
            return len(r.json()["outputs"][0]["data"])

        start = time.perf_counter()
        with ThreadPoolExecutor(concurrency) as pool:
            answered = sum(pool.map(send, bodies))
        seconds = time.perf_counter() - start
    assert answered == 2 * len(texts), f"{answered} scores for {len(texts)} texts"
    return seconds


def bertprobe_pass(url: str, examples: list[Any], concurrency: int) -> tuple[float, Any, int]:
    """Seconds for a fresh endpoint target to predict every example, its probabilities, and the requests it sent."""
    from bertprobe.model.loading import load_target
    from bertprobe.model.spec import ModelSpec

    start = time.perf_counter()
    target = load_target(ModelSpec(path=url, endpoint=url, protocol="v2", served_name=NAME, labels=LABELS,
                                   batch_size=BATCH, concurrency=concurrency))
    try:
        probs = target.predict_proba(examples)
        seconds = time.perf_counter() - start
        return seconds, probs, target.requests_sent
    finally:
        target.close()


def audit(argv: list[str], threads: int, sets: list[str]) -> tuple[float, float, int, dict[str, float], float]:
    """One ``bertprobe run`` in a fresh process: wall seconds, the probes' seconds, its exit code, each probe's,
    and the accuracy it measured."""
    env = dict(os.environ, BERTPROBE_DEVICE="cpu", BERTPROBE_NO_PROGRESS="1", HF_HUB_OFFLINE="1",
               OMP_NUM_THREADS=str(threads), PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, "-m", "bertprobe", "run", str(REPO / "suites" / "sst2.yaml"), *argv,
               "--data", str(SST2_DEV), "--threads", str(threads), "--out", out, "-q"]
        for s in sets:
            cmd += ["--set", s]
        start = time.perf_counter()
        done = subprocess.run(cmd, check=False, env=env, cwd=str(REPO), capture_output=True, text=True)
        seconds = time.perf_counter() - start
        runs = list(Path(out).glob("sst2-*/report.json"))
        if not runs:
            raise SystemExit(f"the audit left no report (exit {done.returncode}): {' '.join(cmd)}\n"
                             f"{(done.stdout + done.stderr)[-3000:]}")
        report = json.loads(runs[0].read_text())
    probes = {p["probe"]: float(p.get("duration_s") or 0.0) for p in report["probes"]}
    accuracy = next((p["metrics"].get("accuracy") for p in report["probes"] if p["probe"] == "accuracy"), None)
    return seconds, sum(probes.values()), done.returncode, probes, float("nan") if accuracy is None else accuracy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="torch threads of the server and of each audit")
    parser.add_argument("--concurrency", type=int, default=4, help="requests in flight (load loop and bertprobe)")
    parser.add_argument("--limit", type=int, default=None, help="the first N dev sentences (default: all 872)")
    parser.add_argument("--repeats", type=int, default=3, help="best of R, each side")
    parser.add_argument("--no-audit", action="store_true", help="measure the throughput only")
    parser.add_argument("--quick", action="store_true", help="a small setting for a smoke test (not figures)")
    args = parser.parse_args()
    require(SST2_MODEL, SST2_DEV)
    if args.quick:
        args.limit, args.repeats = args.limit or 96, 1
    from importlib.metadata import version

    import torch

    examples = sentences(args.limit)
    texts = [ex.text for ex in examples]
    load = os.getloadavg()
    print(f"torch {torch.__version__}; kserve {version('kserve')}; httpx {version('httpx')}; {args.threads} threads "
          f"(server and audits), concurrency {args.concurrency}, batch {BATCH}; {len(texts)} SST-2 dev sentences; "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs")
    with start_server("kserve_server.py", ["--model", str(SST2_MODEL), "--name", NAME], health="/v2/health/ready",
                      threads=args.threads) as server:
        print(f"KServe v2 server at {server.url}, ready in {server.startup_s:.1f} s")
        load_loop(server.url, texts[: BATCH * args.concurrency], args.concurrency)  # warm-up, not timed
        loop_s: list[float] = []
        ours_s: list[float] = []
        cpu: dict[str, list[float]] = {"loop": [], "ours": []}
        probs = None
        requests = 0
        for r in range(args.repeats):
            sides = ["loop", "ours"] if r % 2 == 0 else ["ours", "loop"]
            for side in sides:
                before = time.process_time()
                if side == "loop":
                    loop_s.append(load_loop(server.url, texts, args.concurrency))
                else:
                    seconds, probs, requests = bertprobe_pass(server.url, examples, args.concurrency)
                    ours_s.append(seconds)
                cpu[side].append(time.process_time() - before)
            print(f"round {r + 1} of {args.repeats}: load loop {loop_s[-1]:.2f} s, bertprobe {ours_s[-1]:.2f} s")
        loop_best, ours_best = min(loop_s), min(ours_s)
        n = len(texts)
        gold = [ex.label for ex in examples]
        accuracy = sum(int(p) == int(g) for p, g in zip(probs.argmax(-1).tolist(), gold)) / n
        print(f"\n{'client (best of ' + str(args.repeats) + ')':46} {'seconds':>8} {'sentences/s':>12} {'vs load loop':>13}"
              f" {'client CPU s':>13}")
        print(f"{'plain load loop (httpx, ' + str(args.concurrency) + ' threads)':46} {loop_best:8.2f} "
              f"{n / loop_best:12.1f} {1.0:12.3f}x {min(cpu['loop']):13.2f}")
        print(f"{'bertprobe EndpointTarget.predict_proba':46} {ours_best:8.2f} {n / ours_best:12.1f} "
              f"{loop_best / ours_best:12.3f}x {min(cpu['ours']):13.2f}")
        print(f"bertprobe sent {requests} requests for {n} sentences (readiness, metadata, batches of {BATCH}, the "
              f"determinism check's); accuracy {accuracy:.4f}")
        paired = statistics.median(a / b for a, b in zip(loop_s, ours_s))
        print(f"throughput ratio (bertprobe / load loop): {loop_best / ours_best:.3f}x (target >= 0.90); "
              f"median of the rounds' own ratios {paired:.3f}x")
        if args.no_audit:
            return

        quick = ["probes.universal-trigger.params.candidates=8", "probes.universal-trigger.params.iterations=2"]
        limit = ["--limit", str(min(args.limit, 48) if args.quick else args.limit)] if args.limit else []
        served = ["--model", server.url, *limit]
        served_sets = [f"model.served_name={NAME}", f"model.labels=[{', '.join(LABELS)}]", f"model.twin={SST2_MODEL}",
                       f"model.batch_size={BATCH}", f"model.concurrency={args.concurrency}"]
        sides = {"checkpoint": (["--model", str(SST2_MODEL), *limit], quick if args.quick else []),
                 "endpoint": (served, served_sets + (quick if args.quick else []))}
        timings: dict[str, list[tuple[float, float, int, dict[str, float], float]]] = {s: [] for s in sides}
        for r in range(args.repeats):
            order = list(sides) if r % 2 == 0 else list(sides)[::-1]
            for side in order:
                argv, sets = sides[side]
                timings[side].append(audit(argv, args.threads, sets))
            print(f"audit round {r + 1} of {args.repeats}: " + ", ".join(
                f"{s} {timings[s][-1][0]:.1f} s (exit {timings[s][-1][2]})" for s in sides))
    best = {s: min(t, key=lambda x: x[0]) for s, t in timings.items()}
    print(f"\nsuites/sst2.yaml, {len(texts) if args.limit else 872} sentences; the endpoint's universal-trigger "
          f"searched on its twin (the checkpoint), every other probe on the endpoint")
    names = list(best["checkpoint"][3])
    print(f"{'audit (best of ' + str(args.repeats) + ')':28} {'wall s':>8} {'probes s':>9} {'exit':>5} {'accuracy':>9}  "
          + " ".join(f"{p:>17}" for p in names))
    for side, (wall, probes, code, each, acc) in best.items():
        print(f"{side:28} {wall:8.1f} {probes:9.1f} {code:5d} {acc:9.4f}  " + " ".join(f"{each.get(p, 0.0):17.1f}" for p in names))
    wall_ratio = best["endpoint"][0] / best["checkpoint"][0]
    probe_ratio = best["endpoint"][1] / max(best["checkpoint"][1], 1e-9)
    print(f"audit ratio (endpoint / checkpoint): {wall_ratio:.3f}x wall (target <= 1.5); probes alone {probe_ratio:.3f}x")
    load = os.getloadavg()
    print(f"load average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
