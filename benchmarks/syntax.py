"""syntax-heads on UD English EWT: one sentence per forward pass against length-sorted batches.

Both runs compute the same analysis (relation accuracies, baselines, roles, the attention-only parser
trained on dev and scored on test) with identical metrics; the ratio is the batched run's speed-up.

    python benchmarks/syntax.py [--shared ../shared] [--model minilm-l6-base] [--device cpu]
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

import torch

from bertprobe.data.treebank import read_conllu
from bertprobe.model import ModelSpec, load_target
from bertprobe.probe import ProbeContext
from bertprobe.probes.syntax_heads.probe import SyntaxHeadsProbe, SyntaxParams


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[1].parent / "shared")
    parser.add_argument("--model", default="minilm-l6-base")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 32])
    args = parser.parse_args()
    ud = args.shared / "data" / "ud"
    target = load_target(ModelSpec(path=str(args.shared / "models" / args.model), device=args.device))
    began = time.perf_counter()
    dev = read_conllu(ud / "en_ewt-ud-dev.conllu")
    test = str(ud / "en_ewt-ud-test.conllu")
    print(f"read EWT dev: {len(dev)} sentences in {time.perf_counter() - began:.2f} s; torch threads {torch.get_num_threads()}")
    runs = {}
    for size in args.batch_sizes:
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        began = time.perf_counter()
        result = SyntaxHeadsProbe().run(target, dev, SyntaxParams(batch_size=size, eval_data=test), ProbeContext(seed=13))
        seconds = time.perf_counter() - began
        grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss) / 1024
        runs[size] = (seconds, result)
        print(f"batch {size:>3}: {seconds:6.1f} s for dev ({len(dev)}) + test ({result.details['eval_sentences']}) "
              f"= {(len(dev) + result.details['eval_sentences']) / seconds:.0f} sentences/s; peak RSS grew {grew:.0f} MB")
    first, *rest = runs
    for size in rest:
        a, b = runs[first][1], runs[size][1]
        same = all(abs((a.value(k) or 0) - (b.value(k) or 0)) < 1e-6 for k in a.metrics if k.startswith(("accuracy_", "baseline_")))
        print(f"batch {size} vs {first}: {runs[first][0] / runs[size][0]:.2f}x faster; relation metrics identical: {same}; "
              f"uas {b.value('uas'):.4f} vs {a.value('uas'):.4f}")
    result = runs[args.batch_sizes[-1]][1]
    print(result.details["summary"])
    for row in result.details["relations"]:
        if row["relation"] in ("det", "obj", "nsubj", "case", "amod", "aux", "mark", "cop"):
            print(f"  {row['relation']:>6}: dep->head {row['dep_to_head']:.3f} (head {row['dep_to_head_head']}), "
                  f"head->dep {row['head_to_dep']:.3f} (head {row['head_to_dep_head']}), baseline {row['baseline']:.3f} "
                  f"(offset {row['offset']:+d}), n={row['count']}")


if __name__ == "__main__":
    main()
