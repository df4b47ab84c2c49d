"""DeepWordBug through bertprobe against plain TextAttack, on the same 50 SST-2 dev examples.

Plain TextAttack: ``HuggingFaceModelWrapper`` (it tokenises and runs each query batch as given, padded
to the longest) with ``textattack.Attacker``. bertprobe: the ``textattack`` probe, whose wrapper runs
queries through ``Target.logits`` (length-sorted batches). Also the offline ``embedding-swap`` variant.
Needs the plugin's environment (plugins/bertprobe-textattack/install.sh).

    python benchmarks/textattack.py [--shared ../shared] [--examples 50]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

# this file is named textattack.py: keep its folder off the import path, or it shadows the package
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import torch

from bertprobe.data import Dataset, Example
from bertprobe.model import ModelSpec, load_target
from bertprobe.probe import ProbeContext


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[1].parent / "shared")
    parser.add_argument("--examples", type=int, default=50)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    from bertprobe_textattack.probe import TextAttackParams, TextAttackProbe
    from bertprobe_textattack.shims import prepare

    prepare()
    import transformers
    from textattack import AttackArgs, Attacker
    from textattack.attack_recipes import DeepWordBugGao2018
    from textattack.attack_results import SkippedAttackResult, SuccessfulAttackResult
    from textattack.datasets import Dataset as TaDataset
    from textattack.models.wrappers import HuggingFaceModelWrapper

    lines = (args.shared / "data" / "sst2" / "dev.tsv").read_text(encoding="utf-8").splitlines()[1:]
    rows = [(line.split("\t")[0].strip(), int(line.split("\t")[1])) for line in lines][: args.examples]
    model_dir = str(args.shared / "models" / "minilm-l6-sst2")
    print(f"{len(rows)} SST-2 dev examples (the first {len(rows)}), torch threads {torch.get_num_threads()}")

    model = transformers.AutoModelForSequenceClassification.from_pretrained(model_dir, dtype=torch.float32).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    wrapper = HuggingFaceModelWrapper(model, tokenizer)
    attack = DeepWordBugGao2018.build(wrapper)
    dataset = TaDataset(rows)
    attack_args = AttackArgs(num_examples=len(rows), random_seed=13, silent=True, disable_stdout=True,
                                        query_budget=2000)
    began = time.perf_counter()
    results = Attacker(attack, dataset, attack_args).attack_dataset()
    plain_s = time.perf_counter() - began
    ok = [r for r in results if not isinstance(r, SkippedAttackResult)]
    won = [r for r in ok if isinstance(r, SuccessfulAttackResult)]
    plain_rate = len(won) / max(1, len(ok))

    target = load_target(ModelSpec(path=model_dir, device=args.device))
    data = Dataset([Example(t, label=y) for t, y in rows], name="sst2-dev")
    table = [("plain TextAttack, DeepWordBug", plain_s / len(rows), plain_rate, len(ok))]
    for recipe in ("deepwordbug", "embedding-swap"):
        began = time.perf_counter()
        result = TextAttackProbe().run(target, data, TextAttackParams(recipe=recipe, num_examples=len(rows),
                                                                      query_budget=2000, seed=13), ProbeContext(seed=13))
        seconds = time.perf_counter() - began
        table.append((f"bertprobe, {recipe}", seconds / len(rows), result.value("attack_success_rate"),
                      int(result.value("examples_attacked"))))
    print("| run | s / example | attack success rate | attacked |\n|---|---|---|---|")
    for name, per, rate, attacked in table:
        print(f"| {name} | {per:.2f} | {rate:.2f} | {attacked} |")
    print(f"bertprobe DeepWordBug: {table[0][1] / table[1][1]:.2f}x plain TextAttack's speed")


if __name__ == "__main__":
    main()
