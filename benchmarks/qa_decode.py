"""Benchmark: extractive QA on the SQuAD fixture's held-out split (12 articles, 2,777 questions), CPU.

Loads ``../shared/models/minilm-l6-squad`` as a Target (fp32 from the stored fp16 weights), splits every
(question, context) pair into windows (max_length 384, stride 128), predicts the windows in length-sorted
batches and decodes one answer per question over its windows (``bertprobe.tasks.spans``). Prints the time
of each stage, how many windows were predicted (and how many questions' windows had to be rebuilt because
the installed ``tokenizers`` fell short), and EM/F1 against the model card (58.44 / 71.20).

``--alternative`` also decodes the same logits the way Hugging Face's ``postprocess_qa_predictions`` picks
candidates (the top 20 over all positions, [CLS] and the question included, then those outside the context
dropped), to show how much that choice moves the figures.

Usage: python benchmarks/qa_decode.py [--limit N] [--batch-size 32] [--alternative]
"""

from __future__ import annotations

import argparse
import math
import time

from common import SHARED, require

MODEL = SHARED / "models" / "minilm-l6-squad"
DATA = SHARED / "data" / "squad" / "test-split.json"


def unmasked(start, end, qw, context, n_best=20, max_tokens=30):
    """Hugging Face's candidate choice: top ``n_best`` over every position, then the pairs inside the context."""
    best = (-math.inf, "")
    for w, (s, e) in enumerate(zip(start, end)):
        index = qw.context_index[w]
        for i in s.topk(min(n_best, len(s))).indices.tolist():
            for j in e.topk(min(n_best, len(e))).indices.tolist():
                if index[i] >= 0 and index[j] >= 0 and i <= j < i + max_tokens and float(s[i] + e[j]) > best[0]:
                    best = (float(s[i] + e[j]), context[qw.offsets[index[i]][0] : qw.offsets[index[j]][1]])
    return best[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="the first N questions only")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--alternative", action="store_true", help="also decode with Hugging Face's candidate choice")
    args = parser.parse_args()
    require(MODEL, DATA)
    import tokenizers
    import torch

    from bertprobe.data.dataset import DataSpec
    from bertprobe.data.tables import load_table
    from bertprobe.model.loading import load_target
    from bertprobe.model.spec import ModelSpec
    from bertprobe.tasks import squad_metrics
    from bertprobe.tasks.spans import decode, encode_windows, window_logits

    t0 = time.perf_counter()
    examples = load_table(DataSpec(path=str(DATA))).examples[: args.limit]
    target = load_target(ModelSpec(path=str(MODEL), device="cpu", dtype="float32"))
    task = target.task
    t1 = time.perf_counter()
    s = task.settings
    windows = encode_windows(target.tokenizer, [ex.text for ex in examples], [ex.text_pair for ex in examples],
                             s["max_length"], s["stride"], s["question_first"], [ex.id for ex in examples])
    t2 = time.perf_counter()
    flat = [row for qw in windows for row in qw.rows]
    logits = window_logits(target, flat, args.batch_size)
    t3 = time.perf_counter()
    answers, at = [], 0
    for qw, ex in zip(windows, examples):
        mine = logits[at : at + len(qw.rows)]
        at += len(qw.rows)
        answers.append(decode([a for a, _ in mine], [b for _, b in mine], qw, ex.text_pair, s["n_best"],
                              s["max_answer_tokens"], task.null_threshold_for(examples)))
    t4 = time.perf_counter()
    golds = task.golds(examples)
    scores = squad_metrics.summary([a.text for a in answers], golds)
    print(f"torch {torch.__version__}, tokenizers {tokenizers.__version__}, {torch.get_num_threads()} threads; "
          f"{len(examples)} questions, {len(flat)} windows predicted "
          f"({sum(len(qw.rows) > 1 for qw in windows)} questions over several windows, "
          f"{sum(qw.rebuilt for qw in windows)} rebuilt because the tokenizer's windows fell short)")
    print(f"load {t1 - t0:.1f} s, windows {t2 - t1:.1f} s, forward {t3 - t2:.1f} s "
          f"({len(flat) / (t3 - t2):.1f} windows/s, batch {args.batch_size}), decode {t4 - t3:.1f} s; "
          f"total {t4 - t0:.1f} s")
    print(f"EM {scores['exact']:.2f}  F1 {scores['f1']:.2f}  (model card on the whole split: EM 58.44, F1 71.20)")
    if args.alternative:
        at, texts = 0, []
        for qw, ex in zip(windows, examples):
            mine = logits[at : at + len(qw.rows)]
            at += len(qw.rows)
            texts.append(unmasked([a for a, _ in mine], [b for _, b in mine], qw, ex.text_pair))
        other = squad_metrics.summary(texts, golds)
        differ = sum(a.text != t for a, t in zip(answers, texts))
        print(f"Hugging Face's candidate choice: EM {other['exact']:.2f}  F1 {other['f1']:.2f}; {differ} answers differ")


if __name__ == "__main__":
    main()
