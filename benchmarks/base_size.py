"""Benchmark: the heavy suites' probes at MiniLM size and at BERT-base size, fp32 and bf16, on a CPU or a GPU.

For each probe of ``suites/sst2.yaml``, ``internals.yaml``, ``backdoor.yaml``, ``behaviour.yaml`` and ``syntax.yaml``
(syntax-heads on UD English EWT: the first ``--examples`` dev sentences, the parser scored on as many test
sentences; its bare pass is timed on those dev sentences), on the
MiniLM-L6 SST-2 fixture and on seeded random-weight classifiers with the configurations of
``bert-base-uncased`` (12 x 768) and ``distilbert-base-uncased`` (6 x 768) (``common.base_size_model``; no
download), each dtype, the first ``--examples`` SST-2 dev sentences, ``--threads`` torch threads, on ``--device``, it prints:

* the probe's wall time (its own ``duration_s`` in the report);
* the passes it used, in full-pass equivalents: rows run through encoder layers, counted by a forward
  hook on every layer, divided by layers x examples (a gradient pass counts as its forward; the layer
  cache's partial passes count the layers they run);
* the model-only bound: that many bare full passes over the same examples, timed in the same run, and
  the ratio of the wall time to it (1.0 = the probe does nothing but forward passes).

Then it prints head-pruning's passes on the SST-2 fixture at 872, 3,000 and 8,000 sentences, sequential against
exact (``heads_sequential.py``'s table, replayed from its cached outcomes; ``--sequential-table``).

Usage: python benchmarks/base_size.py [--models minilm,bert-base] [--dtypes float32,bfloat16]
       [--examples 872] [--suites sst2,internals,backdoor,behaviour,syntax] [--threads 2] [--only head-pruning,...]
       [--device cpu|cuda] [--sdpa bertprobe|pytorch] [--sequential-table auto|yes|no]

``--sdpa pytorch`` gives PyTorch back its own choice of attention kernel, cuDNN's included, as before the harness
left cuDNN out on CUDA (``bertprobe.model.kernels``): on an H200 in bf16, probes that call attention on many batch
shapes then paid a fixed cost per process that fp32 runs did not, with ``aten::_cudnn_attention_forward`` in the
profile (docs/benchmarks.md). The default, ``bertprobe``, is the harness's own choice; both apply to the bare
passes of the bound too.

Random weights are right for timing fixed work; what adaptive algorithms save is measured on the real
fixtures (``heads_sequential.py``). A random model flips no backdoor and fails behaviour tests at random,
so those probes do the work of a real model that needs every stage.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import torch
from common import (
    REPO,
    SDPA_CHOICES,
    SHARED,
    SST2_DEV,
    SST2_MODEL,
    attention_kernels,
    base_size_model,
    require,
    sync,
    timed,
)

from bertprobe.model import ModelSpec, load_target
from bertprobe.plugins import build_plugins
from bertprobe.run.control import RunControl
from bertprobe.suite import load_suite
from bertprobe.suite.overrides import SuiteOverrides

LAYER_CLASSES = ("BertLayer", "TransformerBlock")  # BERT / MiniLM, DistilBERT
UD = SHARED / "data" / "ud"


def first_sentences(conllu: Path, count: int, out: Path) -> Path:
    """The first ``count`` sentences of a CoNLL-U file, written to ``out`` (blocks end at a blank line)."""
    blocks = conllu.read_text(encoding="utf-8").split("\n\n")
    out.write_text("\n\n".join(b for b in blocks[:count] if b.strip()) + "\n\n", encoding="utf-8")
    return out


def suite_inputs(name: str, examples: int, tmp: Path) -> tuple[Path, dict[str, str]]:
    """The data a suite runs on in this benchmark, and the environment its YAML reads."""
    if name != "syntax":
        return SST2_DEV, {"BERTPROBE_SST2_DATA": str(SST2_DEV)}
    require(UD / "en_ewt-ud-dev.conllu", UD / "en_ewt-ud-test.conllu")
    dev = first_sentences(UD / "en_ewt-ud-dev.conllu", examples, tmp / "ud-dev.conllu")
    test = first_sentences(UD / "en_ewt-ud-test.conllu", examples, tmp / "ud-test.conllu")
    return dev, {"BERTPROBE_UD_DEV": str(dev), "BERTPROBE_UD_TEST": str(test)}


def read_examples(data: Path) -> list:
    """Sentences of an SST-2 table or of a CoNLL-U treebank."""
    if data.suffix == ".conllu":
        from bertprobe.data.treebank import read_conllu

        return read_conllu(data).examples
    from bertprobe.data import DataSpec, load_table

    return load_table(DataSpec(path=str(data), text="sentence")).examples


class LayerRows:
    """Rows through encoder layers, from a global forward pre-hook (this process only)."""

    def __init__(self) -> None:
        self.rows = 0

    def __enter__(self) -> LayerRows:
        def hook(module: torch.nn.Module, args: tuple) -> None:
            if type(module).__name__ in LAYER_CLASSES and args and isinstance(args[0], torch.Tensor):
                self.rows += int(args[0].shape[0])

        self._handle = torch.nn.modules.module.register_module_forward_pre_hook(hook)
        return self

    def __exit__(self, *exc: object) -> None:
        self._handle.remove()


def bare_pass_seconds(path: Path, dtype: str, examples: int, data: Path = SST2_DEV,
                      device: str = "cpu") -> tuple[float, int]:
    """Best of three plain forward passes over the first ``examples`` sentences of ``data`` (the harness's
    batches), after one to warm up."""
    target = load_target(ModelSpec(path=str(path), device=device, max_length=128, dtype=dtype))
    encoded = target.encode(read_examples(data)[:examples])

    def once() -> None:
        with torch.inference_mode():
            for _, batch in target.batches(encoded, None):
                target.forward(batch)
        sync(target.device)

    once()
    best = timed(once, 3)[0]
    return best, target.model.config.num_hidden_layers if hasattr(target.model.config, "num_hidden_layers") \
        else target.model.config.n_layers


def run_probe(suite_file: Path, probe_id: str, path: Path, dtype: str, examples: int, threads: int,
              out: Path, data: Path = SST2_DEV, env: dict[str, str] | None = None,
              device: str = "cpu") -> tuple[float, int, str]:
    """The probe alone (``--only``) through the harness: its duration_s, the layer rows, its status."""
    from bertprobe.harness import run_suite

    suite = load_suite(suite_file, env=env or {"BERTPROBE_SST2_DATA": str(SST2_DEV)})
    overrides = SuiteOverrides(models=(str(path),), data=str(data), dtype=dtype, limit=examples,
                               only=(probe_id,), device=device)
    with LayerRows() as counter:
        session = run_suite(suite, build_plugins(), overrides, RunControl(out=str(out), threads=threads))
    report = json.loads((Path(session.run_dir) / "report.json").read_text())
    probe = report["probes"][0]
    return float(probe["duration_s"]), counter.rows, probe["status"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="minilm,bert-base",
                        help="comma-separated: minilm (the SST-2 fixture), bert-base, distilbert-base (seeded random "
                             "weights with that configuration, no download) (default: %(default)s)")
    parser.add_argument("--dtypes", default="float32,bfloat16",
                        help="comma-separated compute dtypes; bfloat16 runs 7-15x slower than float32 on a CPU "
                             "without native bf16 (default: %(default)s)")
    parser.add_argument("--examples", type=int, default=872,
                        help="the first N SST-2 dev sentences (UD EWT sentences for syntax) (default: %(default)s)")
    parser.add_argument("--suites", default="sst2,internals,backdoor,behaviour",
                        help="comma-separated shipped suites, of sst2, internals, backdoor, behaviour, syntax; at "
                             "bert-base size in float32 on 2 cores internals takes 64 minutes on 872 "
                             "sentences, 24 s on an H200 (default: %(default)s)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default: %(default)s)")
    parser.add_argument("--only", default="", help="comma-separated probe ids to measure (default: every probe)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default: %(default)s)")
    parser.add_argument("--sdpa", default="bertprobe", choices=SDPA_CHOICES,
                        help="attention kernels: the harness's (no cuDNN on CUDA), or PyTorch's own order, cuDNN "
                             "included (default: %(default)s)")
    parser.add_argument("--sequential-table", default="auto", choices=("auto", "yes", "no"),
                        help="then head-pruning's passes at 872, 3,000 and 8,000 SST-2 sentences, sequential against "
                             "exact (heads_sequential.py): auto prints it when its exact outcomes are cached, yes "
                             "computes them if not (about 25 minutes on 2 cores) (default: %(default)s)")
    args = parser.parse_args()
    require(SST2_MODEL, SST2_DEV)
    torch.set_num_threads(args.threads)
    measure(args)
    if args.sequential_table != "no":
        from heads_sequential import cached, print_table

        print("\nhead-pruning on the SST-2 fixture, sequential against exact (heads_sequential.py):")
        if args.sequential_table == "yes" or cached(8000):
            print_table([872, 3000, 8000])
        else:
            print("  not cached: run python benchmarks/heads_sequential.py, or this with --sequential-table yes")


def measure(args: argparse.Namespace) -> None:
    """The probes' table (the module docstring)."""
    paths = {m: SST2_MODEL if m == "minilm" else base_size_model(m) for m in args.models.split(",")}
    where = torch.cuda.get_device_name(torch.device(args.device)) if args.device.startswith("cuda") else "CPU"
    print(f"{args.examples} sentences (SST-2 dev; UD EWT dev and test for syntax), {args.threads} threads, {where}, "
          f"attention kernels: {args.sdpa}")
    print(f"{'suite/probe':34} {'model':16} {'dtype':8} {'wall s':>8} {'passes':>8} {'bare pass s':>11} "
          f"{'bound s':>8} {'x bound':>7}  status")
    with tempfile.TemporaryDirectory() as tmp, attention_kernels(args.sdpa, args.device):
        for model, path in paths.items():
            for dtype in args.dtypes.split(","):
                bare: dict[Path, tuple[float, int]] = {}
                for name in args.suites.split(","):
                    suite_file = REPO / "suites" / f"{name}.yaml"
                    data, env = suite_inputs(name, args.examples, Path(tmp))
                    suite = load_suite(suite_file, env=env)
                    probes = [s for s in suite.probes if not args.only or s.id in args.only.split(",")]
                    if probes and data not in bare:
                        bare[data] = bare_pass_seconds(path, dtype, args.examples, data, args.device)
                    for spec in probes:
                        one, layers = bare[data]
                        seconds, rows, status = run_probe(suite_file, spec.id, path, dtype, args.examples,
                                                          args.threads, Path(tmp), data, env, args.device)
                        passes = rows / (layers * args.examples)
                        bound = passes * one
                        print(f"{name + '/' + spec.id:34} {model:16} {dtype:8} {seconds:8.1f} {passes:8.1f} "
                              f"{one:11.2f} {bound:8.1f} {seconds / max(bound, 1e-9):7.2f}  {status}", flush=True)


if __name__ == "__main__":
    main()
