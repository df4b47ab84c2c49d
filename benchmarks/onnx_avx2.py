"""ONNX Runtime int8 on the AVX2-only path, reached on an AVX-512 machine by emulation: the predictions of MLAS's
AVX2 kernels on the SST-2 fixture's dev set, against torch fp32 and against this machine's own (AVX-512 VNNI) run.

ONNX Runtime has no switch like torch's ``ATEN_CPU_CAPABILITY``: MLAS picks its kernels once, by cpuid and xgetbv
(``onnxruntime/core/mlas/lib/platform.cpp``). So the int8 graphs are run under ``qemu-x86_64 -cpu Haswell``
(qemu-user, 7.2 or later: TCG emulates AVX2 but no AVX-512), whose cpuid reports AVX2 and FMA3 without AVX-512:
MLAS then takes ``MlasGemmU8S8KernelAvx2`` (``vpmaddubsw``, whose int16 pair sums saturate: what ``reduce_range``
guards against) where this machine runs ``MlasGemmU8S8KernelAvx512Vnni`` (``vpdpbusds``, no int16 step).

What it does, in order:
1. Runs two instructions natively and under the emulator: AVX2's ``vpmaddubsw`` and AVX-512 VNNI's ``vpdpbusd``.
   The emulated VNNI one must die of SIGILL: anything that ran to the end under the emulator used no AVX-512.
2. Exports and quantizes natively, with bertprobe's own cached builds (``bertprobe.model.onnx``): ORT fp32, and
   int8 with ``reduce_range`` off and on (``--per-channel``: the per-channel pair too). The emulated run reads the
   same graph files: only the kernels differ.
3. Batches the dev set as the harness does (``Target.plan_batches``, ``collate``: int8's activation scale is per
   batch, so both paths see the same batches) and runs every graph natively (checked equal to ``Target.logits``)
   and under the emulator (a child process importing only numpy and onnxruntime). ORT fp32 runs on a few batches
   only (``--fp32-batches``): it shows the fp32 kernels agree across paths up to rounding.
4. Torch fp32, the reference, runs natively, and once more natively with torch held to AVX2
   (``ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2``): fp32 predictions do not
   depend on the kernel path beyond rounding, and the script checks that they are equal.

Emulated wall times are printed only to size a run: they are NOT hardware speed (TCG runs AVX2 code ~100x slower
than a CPU would); the AVX2 kernels' hardware speed is ``benchmarks/onnx_avx2_speed.sh``'s (native, cpuid patched).

Usage: python benchmarks/onnx_avx2.py [--limit 872] [--batch-size 32] [--threads 1] [--per-channel] [--cpu Haswell]
       [--fp32-batches 2] [--save logits.npz]    (needs the [onnx] extra and qemu-user: apt-get install qemu-user)
On the fixture (872 sentences), 1 thread: 4-8 minutes per int8 graph under the emulator (about 25 in all with
--per-channel); time --limit 64 first (about 3 minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

# (name, machine code ending in vzeroupper; ret): the multiply of each u8s8 kernel, on register 0
PROBES = {
    "AVX2 vpmaddubsw ymm": "c4e27d04c0" "c5f877c3",
    "AVX-512 VNNI vpdpbusd zmm": "62f27d4850c0" "c5f877c3",
}
FEATURES = ("AVX2", "FMA3", "AVX512F", "AVX512BW", "AVX512VNNI")  # numpy's names for what cpuid reports
TORCH_AVX2 = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
NOT_SPEED = ("emulated wall time, NOT hardware speed (TCG emulation is ~100x slower than a CPU); the AVX2-only "
             "kernels' hardware speed: benchmarks/onnx_avx2_speed.sh")


# ---- helpers (no torch, no onnxruntime: unit-tested) ---------------------------------------------
def scatter(plans: Sequence[Sequence[int]], outputs: Sequence[np.ndarray], n: int) -> np.ndarray:
    """Rows of each batch's output put back in input order (as ``Target.logits`` does)."""
    if len(plans) != len(outputs):
        raise ValueError(f"{len(plans)} batches planned, {len(outputs)} outputs")
    width = outputs[0].shape[-1] if outputs else 0
    out = np.full((n, width), np.nan, dtype=np.float32)
    for idx, rows in zip(plans, outputs):
        if len(idx) != len(rows):
            raise ValueError(f"a batch of {len(idx)} examples gave {len(rows)} rows")
        out[list(idx)] = rows
    return out


def agreement(preds: np.ndarray, reference: np.ndarray, gold: np.ndarray) -> dict[str, Any]:
    """Accuracy of ``preds`` and how many equal ``reference`` (over the rows both have)."""
    preds, reference, gold = np.asarray(preds), np.asarray(reference), np.asarray(gold)
    return {"n": int(len(preds)), "accuracy": float((preds == gold).mean()) if len(preds) else float("nan"),
            "equal": int((preds == reference).sum()), "share": float((preds == reference).mean()) if len(preds) else 0.0}


def emulator(qemu: str | None) -> str:
    """The qemu-user binary to run x86-64 code under, or the one-line reason it is missing (SystemExit, code 2)."""
    found = shutil.which(qemu or "qemu-x86_64")
    if found is None:
        print(f"error: {qemu or 'qemu-x86_64'} not found: the AVX2 path is reached under qemu-user; install it "
              "(apt-get install qemu-user) or pass --qemu PATH", file=sys.stderr)
        raise SystemExit(2)
    return found


def emulated(qemu: str, cpu: str, *command: str) -> list[str]:
    """``command`` run under ``qemu -cpu cpu`` (an interpreter given by its real path: a pyenv shim is a script)."""
    return [qemu, "-cpu", cpu, *command]


def probe_status(returncode: int) -> str:
    """How a probe process ended, in words."""
    if returncode == 0:
        return "ran"
    if returncode == -signal.SIGILL:
        return "SIGILL (illegal instruction)"
    return f"failed (exit {returncode})"


# ---- children ------------------------------------------------------------------------------------
def _run_probe(code: str) -> None:
    """Execute the machine code ``code`` (hex) once: SIGILL where the CPU (or emulator) lacks it."""
    import ctypes
    import mmap

    raw = bytes.fromhex(code)
    page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(raw)
    address = ctypes.addressof(ctypes.c_char.from_buffer(page))
    ctypes.CFUNCTYPE(None)(address)()


def _features() -> str:
    """What cpuid reports to this process (numpy's run-time dispatch reads cpuid as MLAS does)."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as seen
    except ImportError:  # numpy < 2
        from numpy.core._multiarray_umath import __cpu_features__ as seen
    return ", ".join(f"{f} {'yes' if seen.get(f) else 'no'}" for f in FEATURES)


def native_path() -> str:
    """This CPU's u8s8 kernel family as MLAS picks it (AVX-512 VNNI, AVX-512, AVX2), from what cpuid reports."""
    seen = _features()
    for feature, path in (("AVX512VNNI", "AVX-512 VNNI"), ("AVX512BW", "AVX-512"), ("AVX2", "AVX2")):
        if f"{feature} yes" in seen:
            return path
    return "this CPU"


def _child_ort(work: Path) -> None:
    """Run the job's graphs on its batches with ONNX Runtime (this process may be emulated); no torch here."""
    import onnxruntime as ort

    job = json.loads((work / "job.json").read_text())
    feeds = np.load(work / "feeds.npz")
    print(f"  child: cpuid as seen: {_features()}; onnxruntime {ort.__version__}", flush=True)
    for k, graph in enumerate(job["graphs"]):
        options = ort.SessionOptions()  # as bertprobe.model.onnx.OnnxModel builds it
        options.intra_op_num_threads = job["threads"]
        options.log_severity_level = 3
        session = ort.InferenceSession(graph["file"], options, providers=["CPUExecutionProvider"])
        names = [i.name for i in session.get_inputs()]
        start = time.perf_counter()
        out = {}
        for b in graph["batches"]:
            out[str(b)] = session.run(None, {n: feeds[f"{b}/{n}"] for n in names})[0]
        np.savez(work / f"out-{k}.npz", **out)
        print(f"  child: {graph['name']}: {len(graph['batches'])} batches in {time.perf_counter() - start:.0f} s "
              f"({NOT_SPEED.split(' (')[0]})", flush=True)


def _child_torch(out: Path, limit: int, batch_size: int, threads: int) -> None:
    """Torch fp32 logits on the dev set (run natively with torch's AVX2 switches set by the parent)."""
    import torch
    from common import sst2_dev, sst2_target

    torch.set_num_threads(threads)
    base = sst2_target()
    examples = sst2_dev(base).examples[:limit]
    np.save(out, base.logits(base.encode(examples), batch_size).numpy())
    print(f"  torch child: kernels {torch.backends.cpu.get_cpu_capability()}", flush=True)


# ---- the parent ----------------------------------------------------------------------------------
def _probes(qemu: str, cpu: str, python: str) -> None:
    print(f"instructions, natively and under {Path(qemu).name} -cpu {cpu}:")
    script = str(Path(__file__).resolve())
    for name, code in PROBES.items():
        native = subprocess.run([python, script, "--probe", code], capture_output=True)
        emul = subprocess.run(emulated(qemu, cpu, python, script, "--probe", code), capture_output=True)
        print(f"  {name:28} native: {probe_status(native.returncode):30} emulated: {probe_status(emul.returncode)}")
    seen = subprocess.run(emulated(qemu, cpu, python, script, "--features"), capture_output=True, text=True)
    print(f"  cpuid natively: {_features()}\n  cpuid emulated: {seen.stdout.strip() or seen.stderr.strip()[-200:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=872)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1, help="threads for torch and ONNX Runtime, both paths")
    parser.add_argument("--per-channel", action="store_true", help="also the per_channel int8 builds")
    parser.add_argument("--cpu", default="Haswell", help="qemu's CPU model (AVX2, no AVX-512)")
    parser.add_argument("--qemu", default=None, help="qemu-user binary (default: qemu-x86_64 on PATH)")
    parser.add_argument("--fp32-batches", type=int, default=2, help="ORT fp32 batches run emulated (evenly spread)")
    parser.add_argument("--save", type=Path, default=None, help="write every build's logits, both paths (.npz)")
    parser.add_argument("--report", type=Path, default=None, help="print the comparison again from a --save file")
    parser.add_argument("--probe", help=argparse.SUPPRESS)
    parser.add_argument("--features", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child-ort", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--child-torch", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        return _run_probe(args.probe)
    if args.features:
        return print(_features())
    if args.child_ort:
        return _child_ort(args.child_ort)
    if args.child_torch:
        return _child_torch(args.child_torch, args.limit, args.batch_size, args.threads)
    if args.report:
        if not args.report.is_file():
            print(f"error: --report {args.report}: no such file (write one with --save)", file=sys.stderr)
            raise SystemExit(2)
        with np.load(args.report) as saved:
            arrays = {k: saved[k] for k in saved.files if k not in ("cpu", "native_path")}
            return print(report(arrays, str(saved["cpu"]), str(saved["native_path"])))
    qemu = emulator(args.qemu)
    run(args, qemu)


def run(args: argparse.Namespace, qemu: str) -> None:
    from dataclasses import replace

    import onnxruntime
    import torch
    from common import SST2_DEV, SST2_MODEL, require, sst2_dev, sst2_target

    from bertprobe.model.variants import derive_variant

    require(SST2_MODEL, SST2_DEV)
    torch.set_num_threads(args.threads)  # before the ONNX sessions: they take torch's thread count
    python = os.path.realpath(sys.executable)
    script = str(Path(__file__).resolve())
    print(f"torch {torch.__version__}; onnxruntime {onnxruntime.__version__}; {qemu}; threads {args.threads}; "
          f"batch size {args.batch_size}")
    _probes(qemu, args.cpu, python)

    base = sst2_target()
    examples = sst2_dev(base).examples[: args.limit]
    n = len(examples)
    gold = np.array([ex.label for ex in examples])
    encoded = base.encode(examples)
    torch_logits = base.logits(encoded, args.batch_size).numpy()
    with tempfile.TemporaryDirectory(prefix="bertprobe-avx2-") as tmp:
        work = Path(tmp)
        env = {**os.environ, **TORCH_AVX2}
        subprocess.run([python, script, "--child-torch", str(work / "torch.npy"), "--limit", str(n), "--batch-size",
                        str(args.batch_size), "--threads", str(args.threads)], env=env, check=True)
        torch_avx2 = np.load(work / "torch.npy")

        onnx = replace(base.spec, runtime="onnx")
        settings = [(False, False), (False, True)] + ([(True, False), (True, True)] if args.per_channel else [])
        made = [("ORT fp32", derive_variant(base, onnx)[0])]
        for pc, rr in settings:
            name = f"ORT int8{' per_channel' if pc else ''}{' reduce_range' if rr else ''}"
            made.append((name, derive_variant(base, replace(onnx, quantize="int8-dynamic", per_channel=pc,
                                                            reduce_range=rr))[0]))
        target = made[0][1]
        order = sorted(range(n), key=encoded.lengths.__getitem__)
        plans = target.plan_batches(encoded, order, args.batch_size)
        names = [i.name for i in target.model.session.get_inputs()]
        feeds: dict[str, np.ndarray] = {}
        for b, idx in enumerate(plans):
            batch = target.collate([encoded.rows[i] for i in idx])
            feeds.update({f"{b}/{k}": v.numpy() for k, v in batch.items() if k in names})
        np.savez(work / "feeds.npz", **feeds)

        native: dict[str, np.ndarray] = {}
        for name, build in made:  # this machine's kernels, on the very feeds the emulator gets
            outs = [build.model.session.run(None, {k: feeds[f"{b}/{k}"] for k in names})[0] for b in range(len(plans))]
            native[name] = scatter(plans, outs, n)
            harness = build.logits(encoded, args.batch_size).numpy()
            if not np.array_equal(native[name], harness):
                raise SystemExit(f"{name}: the script's native batches differ from Target.logits' "
                                 f"(max {np.abs(native[name] - harness).max():.3g}); the comparison would be unfair")
        spread = sorted({round(i * (len(plans) - 1) / max(1, args.fp32_batches - 1)) for i in range(args.fp32_batches)})
        graphs = [{"name": name, "file": str(build.model.file), "batches": spread if name == "ORT fp32" else
                   list(range(len(plans)))} for name, build in made]
        (work / "job.json").write_text(json.dumps({"threads": args.threads, "graphs": graphs}))
        print(f"\nrunning {len(graphs)} graphs under {Path(qemu).name} -cpu {args.cpu} ({NOT_SPEED}):", flush=True)
        start = time.perf_counter()
        child = subprocess.run(emulated(qemu, args.cpu, python, script, "--child-ort", str(work)),
                               stderr=subprocess.PIPE, text=True)
        if child.returncode != 0:
            tail = [line for line in child.stderr.splitlines() if "TCG doesn't support" not in line][-5:]
            raise SystemExit(f"the emulated run failed ({probe_status(child.returncode)}): {' | '.join(tail)}")
        print(f"  all graphs: {time.perf_counter() - start:.0f} s emulated wall time (not hardware speed)")
        emul: dict[str, np.ndarray] = {}
        for k, graph in enumerate(graphs):
            with np.load(work / f"out-{k}.npz") as got:
                rows = [got[str(b)] for b in graph["batches"]]
            emul[graph["name"]] = scatter([plans[b] for b in graph["batches"]], rows, n)

    arrays = {"gold": gold, "torch fp32": torch_logits, "torch fp32 avx2": torch_avx2,
              **{f"{k} native": v for k, v in native.items()}, **{f"{k} emulated": v for k, v in emul.items()}}
    print(report(arrays, args.cpu, native_path()))
    if args.save:
        np.savez(args.save, cpu=np.array(args.cpu), native_path=np.array(native_path()), **arrays)
        print(f"logits saved to {args.save} (python benchmarks/onnx_avx2.py --report {args.save} prints this again)")


def report(arrays: dict[str, np.ndarray], cpu: str, native: str) -> str:
    """The comparison, from every build's logits on both paths (``{build} native``, ``{build} emulated``; rows
    an emulated build did not run are NaN) with ``gold``, ``torch fp32`` and ``torch fp32 avx2``."""
    gold, torch_logits, torch_avx2 = arrays["gold"], arrays["torch fp32"], arrays["torch fp32 avx2"]
    reference, n = torch_logits.argmax(-1), len(gold)
    diff = float(np.abs(torch_avx2 - torch_logits).max())
    same = int((torch_avx2.argmax(-1) == reference).sum())
    lines = ["", f"torch fp32 with its AVX2 switches against its native run: max |logit difference| {diff:.2g}, "
             f"{same} of {n} predictions equal (fp32 depends on the kernel path by rounding only)", "",
             f"{'build':34} {'path':25} {'examples':>8} {'max |dlogit|':>12} {'rows equal':>10} {'accuracy':>9} "
             f"{'equal to torch fp32':>20} {'equal to native':>16}",
             f"{'':34} {'':25} {'':>8} {'vs native':>12} {'bitwise':>10}"]
    builds = [k[: -len(" native")] for k in arrays if k.endswith(" native")]
    for name in builds:
        mine = arrays[f"{name} native"]
        for path, logits in ((f"{native} (native)", mine), (f"AVX2 ({cpu}, emulated)", arrays[f"{name} emulated"])):
            rows = ~np.isnan(logits).any(-1)
            preds = logits[rows].argmax(-1)
            score = agreement(preds, reference[rows], gold[rows])
            delta = np.abs(logits[rows] - mine[rows]).max(-1)
            same_native = int((preds == mine[rows].argmax(-1)).sum())
            lines.append(f"{name:34} {path:25} {score['n']:>8} {delta.max(initial=0.0):>12.3g} "
                         f"{int((delta == 0).sum()):>10} {score['accuracy']:9.4f} {score['equal']:>6} "
                         f"({score['share']:6.1%}) {same_native:>9} of {score['n']}")
    lines += ["", f"every timing under emulation above is {NOT_SPEED}."]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
