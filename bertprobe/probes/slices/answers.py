"""The slices probe's section for extractive readers (``span_answers``): each question's F1 and EM, and the
built-in question slices (``units(target, data, params, ctx)``, a ``SliceScores``).

Built-in slices (all computed from the data and the answers, no parser):

* question word: what, who, when, where, why, how, which, other (``squad_metrics.question_word``);
* gold answer length in words (the first gold answer, SQuAD's first annotation): 1, 2, 3, 4-5, 6 or more;
  unanswerable questions (SQuAD 2.0) form their own slice;
* context length in words, by quartile, and contexts split into several windows (longer than ``max_length``);
* lexical overlap between the question and the sentence holding the (first) gold answer, after Sugawara et
  al. 2018 ("What Makes Reading Comprehension Questions Easier?", EMNLP), who find that questions whose
  words appear in the answer's sentence are the easy ones: the share of the question's content words
  (lower-cased word types, stop words removed: scikit-learn's English list, shipped as
  ``tasks/stopwords_en.txt`` with its provenance; one-letter words dropped) found among the words of that sentence.
  Binned low (under 1/3), medium (1/3 to under 2/3) and high (2/3 or more); a question without content words
  is in none. Deviations: exact lower-cased word match (Sugawara et al. also count a question word's
  lemma); sentences are split at ., ! or ? followed by white space, and at line breaks (an abbreviation such
  as "U.S. " ends a sentence early).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from bertprobe.data.dataset import Dataset, Example
from bertprobe.probes.slices.units import SliceScore, SliceScores
from bertprobe.results import Catalogue
from bertprobe.tasks.answer_text import answer_sentence, overlap
from bertprobe.tasks.qa_clusters import question_clusters
from bertprobe.tasks.question_answering import QuestionAnswering
from bertprobe.tasks.squad_metrics import QUESTION_WORDS, question_word

ANSWER_LENGTHS = ((1, 1, "1 word"), (2, 2, "2 words"), (3, 3, "3 words"), (4, 5, "4-5 words"), (6, math.inf, "6+ words"))
OVERLAP_BINS = ((0.0, 1 / 3, "low"), (1 / 3, 2 / 3, "medium"), (2 / 3, math.inf, "high"))


def bin_of(value: float, bins: Sequence[tuple[float, float, str]]) -> str | None:
    """The name of the [low, high) bin holding ``value`` (None for NaN)."""
    if math.isnan(value):
        return None
    return next((name for low, high, name in bins if low <= value < high), None)


def question_slices(examples: Sequence[Example], windows: Sequence[int] | None = None) -> dict[str, np.ndarray]:
    """The built-in slices of the module docstring as boolean masks over the questions; ``windows`` is how many
    windows each question's context was split into (the answers'), where known."""
    n = len(examples)
    masks: dict[str, np.ndarray] = {}

    def put(name: str, i: int) -> None:
        masks.setdefault(name, np.zeros(n, dtype=bool))[i] = True

    kinds = [question_word(ex.text) for ex in examples]
    for word in QUESTION_WORDS:
        if word in kinds:
            masks[f"question word: {word}"] = np.array([k == word for k in kinds])
    for i, ex in enumerate(examples):
        gold = tuple(ex.label or ())
        if not gold:
            put("unanswerable", i)
            continue
        text, start = gold[0]
        length = len(text.split())
        put(f"answer length {next(name for low, high, name in ANSWER_LENGTHS if low <= length <= high)}", i)
        level = bin_of(overlap(ex.text, answer_sentence(ex.text_pair or "", start, text)), OVERLAP_BINS)
        if level is not None:
            put(f"question-sentence overlap {level}", i)
    lengths = np.array([len((ex.text_pair or "").split()) for ex in examples])
    if n:
        q = np.quantile(lengths, [0.25, 0.5, 0.75])
        bounds = [(-1, q[0]), (q[0], q[1]), (q[1], q[2]), (q[2], np.inf)]
        for k, (lo, hi) in enumerate(bounds, start=1):
            mask = (lengths > lo) & (lengths <= hi)
            if mask.any():
                masks[f"context length quartile {k} ({int(lo) + 1 if lo >= 0 else 0}-{'' if hi == np.inf else int(hi)} "
                      "words)"] = mask
    if windows is not None:
        masks["context in several windows"] = np.array([w > 1 for w in windows])
    order = [f"answer length {name}" for *_, name in ANSWER_LENGTHS] + [f"question-sentence overlap {name}"
                                                                        for *_, name in OVERLAP_BINS]
    ranked = sorted(masks, key=lambda k: order.index(k) if k in order else -1)  # bins in their natural order
    return {k: masks[k] for k in ranked}


def units(target: Any, data: Dataset, params: Any, ctx: Any) -> SliceScores:
    """The questions, scored by the task (F1 and EM of the shared answers), and the question slices."""
    task = cast(QuestionAnswering, target.task)
    answers = ctx.predictions(target, data, params.batch_size).answers
    outcomes = task.outcomes(answers, data.examples)
    golds = task.golds(data)
    f1 = np.array([o["f1"] for o in outcomes], dtype=np.float64)
    em = np.array([o["em"] for o in outcomes], dtype=np.float64)
    return SliceScores(
        scores=(SliceScore("f1", "f1", "score", f1, "mean SQuAD F1 over questions"),
                SliceScore("exact_match", "em", "binary", em, "share of questions answered exactly (SQuAD EM)")),
        masks=question_slices(data.examples, [a.windows for a in answers]),
        expected=[" | ".join(dict.fromkeys(g)) or "(no answer)" for g in golds],
        observed=[a.text or "(no answer)" for a in answers], unit="questions", groups=question_clusters(data.examples),
        notes={"overlap": "share of the question's content words (stop words removed) in the gold answer's sentence; "
                          "low < 1/3 <= medium < 2/3 <= high (Sugawara et al. 2018)",
               "answer length": "words of the first gold answer", "context length": "words of the context, quartiles"})


# what this section writes in the slices probe's place (merged by Probe.catalogue)
catalogue = Catalogue({"f1": "extractive QA: mean SQuAD F1 over questions, on all the data",
                       "exact_match": "extractive QA: share of questions answered exactly (SQuAD EM), on all the data",
                       "worst_slice_f1": "extractive QA: lowest mean F1 of a slice with >= min_size questions"},
                      {"f1": True, "exact_match": True, "worst_slice_f1": True})
