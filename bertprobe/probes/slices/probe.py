"""Probe ``slices``: where does accuracy drop? Accuracy per data slice, tested against the rest of the data.

After Giskard's performance-bias detector (a slice is flagged at a 5% relative drop, "major" at 10%, with
at least 20 examples) and Deepchecks' segment performance (property-based slices). Built-in slices:
token-length quartiles, inputs truncated at ``max_length``, gold label, predicted label, inputs with a
negation word, a number, a URL or handle, a question, and, for the most frequent content words of the
data, inputs containing each. User slices: ``slices: {name: regex}`` and ``slice_by: [column]`` (columns
of the data file beyond text and label).

Deviations, where we do more: each slice's accuracy has a Wilson interval; its difference from the rest
of the data gets Fisher's exact test, and the p-values are adjusted across all slices (Benjamini-Hochberg),
so testing a hundred slices does not flag five by chance. A slice is flagged when its drop is at least
``min_drop`` (absolute, in accuracy), its adjusted p is below ``alpha`` and it has ``min_size`` examples.
Words are found with a plain lowercase word split, not a parser.

Where the units are no classes, the probe's section for the kind of model gives them (``ctx.section``; its
``units(target, data, params, ctx)`` returns a ``units.SliceUnits`` or ``units.SliceScores``): a tagger's
sentences, exact or not (``entities``), or, for a model that scores its examples rather than classifying them, the
scores and built-in slices (``answers``: each question's SQuAD F1 and exact match; question word, answer length,
context length and the question's overlap with the answer's sentence after Sugawara et al. 2018, "What Makes
Reading Comprehension Questions Easier?"; or a retriever's queries, ``rankings``: each query's nDCG@10 and hit@10,
sliced by query length, question word and the query's word overlap with its gold passage). Each score is then a
mean per slice with a percentile bootstrap interval over the slice's examples, and the first score's difference
from the rest is tested with Welch's standard error (a two-sided z test: F1 is no proportion, so Fisher's test
does not apply), adjusted and flagged as above. Where the
section clusters its units (a question's context), the intervals resample contexts (Wilson's on fewer than 30), and
the test's standard error comes from a cluster bootstrap of the gap, referred to Student's t with G - 1 degrees of
freedom (G: the contexts of the smaller side).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np

from bertprobe.data.classes import class_problem, find_class
from bertprobe.data.dataset import Dataset
from bertprobe.errors import ProbeError
from bertprobe.hookmarkers import hookimpl
from bertprobe.model.target import Target
from bertprobe.probe import Probe, ProbeContext
from bertprobe.results import DefaultExpectation, Finding, ProbeResult
from bertprobe.results.outcomes import Outcomes, example_ids
from bertprobe.probes.slices import answers, entities, rankings
from bertprobe.probes.slices.units import SliceScores, SliceUnits
from bertprobe.stats import cluster_gap, clustered, mean_interval, unpaired_bootstrap_diff, wilson_interval

NEGATION = re.compile(r"\b(not|no|never|nothing|nobody|none|neither|nor|without|cannot)\b|n't\b", re.IGNORECASE)
NUMBER = re.compile(r"\d")
URL = re.compile(r"https?://|www\.|(?<!\w)@\w+", re.IGNORECASE)
QUESTION = re.compile(r"\?")
WORD = re.compile(r"[a-z][a-z'-]+")
STOPWORDS = frozenset("""a an the and or but if of to in on at by for with from as is are was were be been being it its it's
this that these those there here he she they we you i me my our your his her their them him us do does did doing have has
had having not no so than too very can will just into about over under more most some any all such only own same other
what which who whom when where why how 's n't -lrb- -rrb- film movie one""".split())


@dataclass(frozen=True)
class SlicesParams:
    """``min_drop``: the accuracy drop (absolute) that flags a slice; ``alpha``: the adjusted p below which
    a drop counts; ``min_size``: examples a slice needs to be judged; ``vocabulary_slices``: how many of
    the most frequent content words become slices; ``slices``: your own, ``{name: regex}`` on the text;
    ``slice_by``: data columns whose values make slices; ``findings``: misclassified examples per flagged slice.
    ``metric``: accuracy, or for a binary task ``recall`` or ``precision`` of the ``positive`` class (default:
    the second class): a proportion over the gold-positive or predicted-positive examples, tested the same way."""

    min_drop: float = 0.05
    alpha: float = 0.05
    min_size: int = 20
    vocabulary_slices: int = 50
    slices: dict[str, str] = field(default_factory=dict)
    slice_by: tuple[str, ...] = ()
    findings: int = 5
    metric: str = "accuracy"  # accuracy | recall | precision | label:NAME (multi-label: one label's decisions)
    positive: str | int | None = None  # the class (multi-label: the label) recall and precision are about
    batch_size: int | None = None  # examples per forward pass (default: sized to the device)

    def __post_init__(self) -> None:
        if self.metric not in ("accuracy", "recall", "precision") and not (self.metric.startswith("label:") and self.metric[6:]):
            raise ValueError(f"metric: {self.metric!r} is not accuracy, recall, precision or label:NAME")
        if not 0 <= self.min_drop <= 1 or not 0 < self.alpha < 1 or self.min_size < 1 or self.vocabulary_slices < 0:
            raise ValueError("min_drop in [0, 1], alpha in (0, 1), min_size >= 1, vocabulary_slices >= 0")
        for name, pattern in self.slices.items():
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"slices.{name}: not a regular expression ({exc})") from None


def fisher_exact(a: int, b: int, c: int, d: int) -> float:
    """Two-sided p of Fisher's exact test on the 2x2 table [[a, b], [c, d]] (tables as likely or less)."""
    row1, col1, n = a + b, a + c, a + b + c + d
    lo, hi = max(0, col1 - (n - row1)), min(row1, col1)

    def logp(k: int) -> float:
        return (math.lgamma(row1 + 1) - math.lgamma(k + 1) - math.lgamma(row1 - k + 1)
                + math.lgamma(n - row1 + 1) - math.lgamma(col1 - k + 1) - math.lgamma(n - row1 - col1 + k + 1)
                - math.lgamma(n + 1) + math.lgamma(col1 + 1) + math.lgamma(n - col1 + 1))

    observed = logp(a)
    total = sum(math.exp(logp(k)) for k in range(lo, hi + 1) if logp(k) <= observed + 1e-9)
    return min(1.0, total)


def benjamini_hochberg(p: list[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (monotone, at most 1), in the input's order."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    adjusted = [0.0] * m
    running = 1.0
    for rank, i in reversed(list(enumerate(order, start=1))):
        running = min(running, p[i] * m / rank)
        adjusted[i] = running
    return adjusted


def flag_slices(rows: list[dict[str, Any]], params: SlicesParams) -> list[dict[str, Any]]:
    """Adjust the rows' ``p`` across the slices (Benjamini-Hochberg: ``p_adjusted``), flag each slice at least
    ``min_drop`` below the rest at an adjusted p below ``alpha`` with ``min_size`` units (``flagged``), sort the
    rows in place (flagged first, then by drop) and return the flagged ones."""
    adjusted = benjamini_hochberg([r["p"] for r in rows]) if rows else []
    for row, p_adj in zip(rows, adjusted):
        row["p_adjusted"] = p_adj
        row["flagged"] = bool(row["drop"] >= params.min_drop and p_adj < params.alpha and row["size"] >= params.min_size)
    rows.sort(key=lambda r: (not r["flagged"], -r["drop"]))
    return [r for r in rows if r["flagged"]]


def welch_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided p of mean(a) == mean(b) for two independent samples of scores: a z test on the difference with
    Welch's standard error sqrt(var_a / n_a + var_b / n_b) (sample variances; 1.0 with fewer than 2 on a side;
    a zero standard error gives 1.0 for equal means, else 0.0)."""
    if len(a) < 2 or len(b) < 2:
        return 1.0
    diff = float(np.mean(a) - np.mean(b))
    se = math.sqrt(float(np.var(a, ddof=1)) / len(a) + float(np.var(b, ddof=1)) / len(b))
    if se == 0.0:
        return 1.0 if abs(diff) < 1e-15 else 0.0
    return float(min(1.0, 2 * (1 - NormalDist().cdf(abs(diff) / se))))


def builtin_slices(data: Dataset, lengths: list[int], max_length: int, pred: np.ndarray, labels: list[str],
                   vocabulary: int, min_size: int, gold: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The built-in slices as boolean masks over the examples; ``gold`` and ``pred`` are class ids, or 0/1
    indicators ``[N, C]`` (multi-label: "gold has X", "predicted has X")."""
    texts = [ex.text if ex.text_pair is None else f"{ex.text} {ex.text_pair}" for ex in data.examples]
    n = len(texts)
    out: dict[str, np.ndarray] = {}
    q = np.quantile(lengths, [0.25, 0.5, 0.75])
    arr = np.asarray(lengths)
    bounds = [(-1, q[0]), (q[0], q[1]), (q[1], q[2]), (q[2], np.inf)]
    for k, (lo, hi) in enumerate(bounds, start=1):
        out[f"length quartile {k} ({int(lo) + 1 if lo >= 0 else 0}-{'' if hi == np.inf else int(hi)} tokens)"] = (arr > lo) & (arr <= hi)
    out[f"truncated at {max_length} tokens"] = arr >= max_length
    gold = np.asarray(data.labels()) if gold is None else gold
    for c, name in enumerate(labels):
        if gold.ndim == 2:
            out[f"gold has {name}"], out[f"predicted has {name}"] = gold[:, c] == 1, pred[:, c] == 1
        else:
            out[f"gold {name}"], out[f"predicted {name}"] = gold == c, pred == c
    for name, pattern in (("has a negation", NEGATION), ("has a number", NUMBER), ("has a URL or handle", URL),
                          ("is a question", QUESTION)):
        out[name] = np.array([bool(pattern.search(t)) for t in texts])
    words = [set(WORD.findall(t.lower())) for t in texts]
    counts = Counter(w for ws in words for w in ws if w not in STOPWORDS and len(w) > 2)
    for word, count in counts.most_common():
        if len([k for k in out if k.startswith("contains ")]) >= vocabulary:
            break
        if count >= min_size:
            out[f"contains '{word}'"] = np.array([word in ws for ws in words])
    return {k: v for k, v in out.items() if len(v) == n}


class SlicesProbe(Probe):
    name = "slices"
    description = "Where accuracy drops: slices tested against the rest of the data (Fisher, Benjamini-Hochberg)"
    paper = "Giskard performance-bias detector; Deepchecks segment performance (property slices)"
    requires = frozenset({"predictions", "data:labels"})
    tasks = frozenset({"classification", "multiple-choice", "multi-label", "token-classification", "question-answering",
                       "sentence-embedding", "reranker"})
    metrics = {
        "slices_flagged": "slices at least min_drop below the rest, BH-adjusted p < alpha, >= min_size examples",
        "worst_slice_accuracy": "lowest metric of a slice with >= min_size examples",
        "max_slice_drop": "largest drop of the metric against the rest",
        "slices_tested": "slices with examples inside and outside",
        "accuracy": "accuracy on all the data",
        "recall": "recall of the positive class on all the data",
        "precision": "precision of the positive class on all the data",
        "label:*": "multi-label, metric: label:NAME: share of correct decisions on one label, on all the data",
    }  # and a section's scores where its units are scored (its catalogue: a reader's f1, worst_slice_f1...)
    metric_directions = {"slices_flagged": False, "worst_slice_accuracy": True, "max_slice_drop": False,
                         "slices_tested": None, "accuracy": True, "recall": True, "precision": True, "label:*": True}
    Params = SlicesParams

    @classmethod
    def named_labels(cls, params: Any, metrics: Any) -> list[tuple[str, str]]:
        """``metric: label:NAME`` and ``positive: NAME`` name classes of the model."""
        out = super().named_labels(params, metrics)
        if params is None:
            return out
        if params.metric.startswith("label:"):
            out.append(("params.metric", params.metric[6:]))
        if isinstance(params.positive, str) and not params.positive.strip().isdigit():
            out.append(("params.positive", params.positive))
        return out
    defaults = (DefaultExpectation(
        "slices_flagged", max=0,
        why="a flagged slice is min_drop (5 points) less accurate than the rest at a Benjamini-Hochberg adjusted "
            "p < alpha (0.05): a real weak spot, as Giskard's performance-bias detector (alpha 0.05) reports it"),)
    key_metrics = ("slices_flagged", "worst_slice_accuracy", "max_slice_drop")

    def run(self, target: Target, data: Dataset | None, params: SlicesParams, ctx: ProbeContext) -> ProbeResult:
        assert data is not None
        if any(ex.label is None for ex in data.examples):
            raise ProbeError("slices needs a gold label for every example")
        task = target.task
        section = ctx.section(self.name, task)  # None: the examples' classes
        units = None if section is None else section.units(target, data, params, ctx)
        if isinstance(units, SliceScores):  # the section scores the examples (extractive QA: F1 and EM per question)
            return self._scored(units, data, params, ctx)
        if isinstance(units, SliceUnits):  # the section's own units (entities: sentences, exact or not)
            correct, base, gold, pred, labels = units.correct, units.base, units.gold, units.pred, units.labels
        else:
            logits = ctx.predictions(target, data, params.batch_size).logits
            pred, gold = task.predict(logits).numpy(), task.gold(data).numpy()
            labels = list(target.label_names) or [str(i) for i in range(logits.shape[-1])]
            correct, base = self._outcome(params, gold, pred, labels, task.label_map)
        lengths = list(target.encode(data.examples).lengths)
        masks = builtin_slices(data, lengths, target.max_length, pred, labels, params.vocabulary_slices, params.min_size,
                               gold)
        if params.metric != "accuracy":  # recall or precision within a gold or predicted class says nothing
            masks = {k: v for k, v in masks.items() if not k.startswith(("gold ", "predicted "))}
        if units is not None:
            masks.update(units.masks)
        texts = [ex.text if ex.text_pair is None else f"{ex.text} {ex.text_pair}" for ex in data.examples]
        masks.update(self._user_masks(data, texts, params))
        metric = params.metric
        overall = float(correct[base].mean()) if base.any() else float("nan")
        rows = []
        for name, mask in ctx.progress(list(masks.items()), desc="slices"):
            size = int((mask & base).sum())
            if size == 0 or size == int(base.sum()):
                continue
            inside, rest = correct[mask & base], correct[~mask & base]
            acc, rest_acc = float(inside.mean()), float(rest.mean())
            p = fisher_exact(int(inside.sum()), size - int(inside.sum()), int(rest.sum()), len(rest) - int(rest.sum()))
            rows.append({"name": name, "size": size, "accuracy": acc, "interval": list(wilson_interval(int(inside.sum()), size)),
                         "rest_accuracy": rest_acc, "drop": rest_acc - acc, "p": p, "mask": mask})
        if units is not None and units.row_scores is not None:
            for row in rows:
                row.update(units.row_scores(row["mask"], ctx.seed))
        flagged = flag_slices(rows, params)
        result = ProbeResult(probe=self.name)
        ids = example_ids(data.examples)
        result.outcomes.append(Outcomes.from_values("correct", ids, correct))
        for row in flagged:  # each flagged slice's own outcomes: a matrix pairs them with the baseline's on the same examples
            members = np.flatnonzero(row["mask"] & base)
            row["outcome"] = f"{metric} on '{row['name']}'"
            result.outcomes.append(Outcomes.from_values(row["outcome"], [ids[i] for i in members], correct[members],
                                                        subset_of="correct", counted_in="slices_flagged"))
        judged = [r for r in rows if r["size"] >= params.min_size]
        result.add_metric(metric, overall, True, f"{metric} on all the data", outcome="correct" if metric == "accuracy" else None)
        result.add_metric("slices_tested", len(rows), None, "slices with examples inside and outside", kind="count")
        result.add_metric("slices_flagged", len(flagged), False,
                          f"slices at least {params.min_drop:.0%} below the rest, BH-adjusted p < {params.alpha}, "
                          f">= {params.min_size} examples", kind="count")
        if judged:
            worst = min(judged, key=lambda r: r["accuracy"])
            result.add_metric("worst_slice_accuracy", worst["accuracy"], True,
                              f"lowest {metric} of a slice with >= {params.min_size} examples ('{worst['name']}')",
                              ci=tuple(worst["interval"]), kind="extreme")
            biggest = max(judged, key=lambda r: r["drop"])
            result.add_metric("max_slice_drop", biggest["drop"], False, f"largest drop of {metric} against the rest "
                              f"('{biggest['name']}')", ci=self._drop_interval(correct[base], biggest["mask"][base], ctx.seed),
                              kind="extreme")
        for row in flagged:
            wrong = [i for i in np.flatnonzero(row["mask"] & base) if not correct[i]][: params.findings]
            for i in wrong:
                ex = data.examples[i]
                expected, observed = units.shown(i) if units is not None else (self._show(task, gold[i]), self._show(task, pred[i]))
                result.findings.append(Finding(title=f"slice '{row['name']}': {row['accuracy']:.1%} vs {row['rest_accuracy']:.1%}",
                                               input=texts[i], expected=expected, observed=observed,
                                               score=round(row["p_adjusted"], 6), extra={"kind": "slice", "slice": row["name"], "id": ex.id,
                                                                                          "score_label": "adjusted p"}))
        result.details["slices"] = [{k: (round(v, 6) if isinstance(v, float) else v) for k, v in r.items() if k != "mask"}
                                    | {"interval": [round(x, 4) for x in r["interval"]]} for r in rows]
        shown = rows[:25]
        result.details["figures"] = [{
            "kind": "bars", "title": f"{metric} per slice (95% Wilson interval; flagged first, then by drop)",
            "metrics": ["worst_slice_accuracy"],
            "data": {"labels": [("* " if r["flagged"] else "") + r["name"] for r in shown],
                     "series": [{"name": metric, "values": [r["accuracy"] for r in shown],
                                 "errors": [r["interval"] for r in shown]}],
                     "reference": {"value": overall, "label": f"overall {overall:.3f}"}},
            "axes": {"y": metric}}]
        result.details["metric"] = metric
        result.details["key_finding"] = (f"{len(flagged)} slice(s) flagged; worst: '{flagged[0]['name']}' "
                                         f"{flagged[0]['accuracy']:.1%} vs {flagged[0]['rest_accuracy']:.1%} elsewhere"
                                         if flagged else f"no slice flagged of {len(rows)}")
        return result

    def _scored(self, own: SliceScores, data: Dataset, params: SlicesParams, ctx: ProbeContext) -> ProbeResult:
        """Slices of units a section scores (``SliceScores``): each score's mean per slice with a percentile bootstrap
        interval over the slice's examples, the gap to the overall mean, and the first score's difference from
        the rest of the data tested with Welch's standard error (a two-sided z test), BH-adjusted across slices;
        flagged as the class slices are (``min_drop`` below the rest, adjusted p < ``alpha``, ``min_size``).
        Where the section groups its units (``groups``: a question's context), the intervals resample clusters and
        the test takes its standard error from a cluster bootstrap of the gap, referred to Student's t with one
        degree of freedom fewer than the clusters of the smaller side (``stats.cluster_gap``). A slice's interval
        is ``stats.mean_interval``'s: a 0/1 score's (exact match) Wilson's, on its effective sample size where
        units share clusters; a graded score's Wilson's below 30 units (clusters where there are clusters), else
        the (cluster) bootstrap."""
        if params.metric != "accuracy":
            raise ProbeError(f"slices: metric '{params.metric}' applies to classes; this model's {own.unit} are scored "
                             f"({', '.join(s.name for s in own.scores)}): leave metric out")
        primary = own.scores[0]
        values = primary.values
        n = len(values)
        masks = dict(own.masks)
        texts = [ex.text if ex.text_pair is None else f"{ex.text} {ex.text_pair}" for ex in data.examples]
        masks.update(self._user_masks(data, texts, params))
        overall = {s.name: float(s.values.mean()) if n else float("nan") for s in own.scores}
        groups = own.groups if clustered(own.groups) else None  # units sharing a cluster: resampled together
        gap_intervals: dict[str, tuple[float, float]] = {}  # each slice's cluster bootstrap of its gap, drawn once
        rows = []
        for name, mask in ctx.progress(list(masks.items()), desc="slices"):
            size = int(mask.sum())
            if size == 0 or size == n:
                continue
            row: dict[str, Any] = {"name": name, "size": size}
            keys = None if groups is None else [groups[i] for i in np.flatnonzero(mask)]
            for score in own.scores:
                inside = score.values[mask]
                row[score.name] = float(inside.mean())
                row[f"{score.name}_interval"] = [round(x, 4) for x in mean_interval(inside, 1000, 0.95, ctx.seed, keys)]
                row[f"{score.name}_gap"] = overall[score.name] - row[score.name]
            rest = values[~mask]
            row[f"rest_{primary.name}"] = float(rest.mean())
            row["drop"] = row[f"rest_{primary.name}"] - row[primary.name]
            if groups is None:
                row["p"] = welch_p(values[mask], rest)
            else:
                gap_intervals[name], row["p"] = cluster_gap(values, mask, groups, 1000, 0.95, ctx.seed)
            row["mask"] = mask
            rows.append(row)
        flagged = flag_slices(rows, params)
        result = ProbeResult(probe=self.name)
        ids = example_ids(data.examples)
        result.outcomes += [Outcomes.from_values(s.outcome, ids, s.values, s.kind) for s in own.scores]
        for row in flagged:  # each flagged slice's own scores: a matrix pairs them with the baseline's on the same examples
            members = np.flatnonzero(row["mask"])
            row["outcome"] = f"{primary.name} on '{row['name']}'"
            result.outcomes.append(Outcomes.from_values(row["outcome"], [ids[i] for i in members], values[members],
                                                        primary.kind, subset_of=primary.outcome,
                                                        counted_in="slices_flagged"))
        for score in own.scores:
            # the baseline of the slices, shown beside them; the probe that owns the score gates it (no direction,
            # no outcome: a matrix pairs it there once)
            result.add_metric(score.name, overall[score.name], None, f"{score.description}, on all the data")
        judged = [r for r in rows if r["size"] >= params.min_size]
        name = primary.name
        result.add_metric("slices_tested", len(rows), None, "slices with examples inside and outside", kind="count")
        result.add_metric("slices_flagged", len(flagged), False,
                          f"slices at least {params.min_drop:g} below the rest in {name}, BH-adjusted p < {params.alpha}, "
                          f">= {params.min_size} {own.unit}", kind="count")
        if judged:
            worst = min(judged, key=lambda r: r[name])
            result.add_metric(f"worst_slice_{name}", worst[name], True, f"lowest {name} of a slice with >= "
                              f"{params.min_size} {own.unit} ('{worst['name']}')", ci=tuple(worst[f"{name}_interval"]),
                              kind="extreme")
            biggest = max(judged, key=lambda r: r["drop"])
            result.add_metric("max_slice_drop", biggest["drop"], False, f"largest drop of {name} against the rest "
                              f"('{biggest['name']}')", ci=self._drop_interval(values, biggest["mask"], ctx.seed)
                              if groups is None else gap_intervals[biggest["name"]],
                              kind="extreme")
        for row in flagged:
            inside = np.flatnonzero(row["mask"])
            for i in inside[np.argsort(values[inside], kind="stable")][: params.findings]:
                ex = data.examples[i]
                result.findings.append(Finding(
                    title=f"slice '{row['name']}': {name} {row[name]:.3f} vs {row[f'rest_{name}']:.3f}", input=ex.text,
                    expected=own.expected[i], observed=own.observed[i], score=round(row["p_adjusted"], 6),
                    extra={"kind": "slice", "slice": row["name"], "id": ex.id, name: round(float(values[i]), 6),
                           "score_label": "adjusted p"}))
        result.details["slices"] = [{k: (round(v, 6) if isinstance(v, float) else v) for k, v in r.items() if k != "mask"}
                                    for r in rows]
        result.details["unit"] = own.unit
        result.details["slice_notes"] = dict(own.notes)
        shown = rows[:25]
        result.details["figures"] = [{
            "kind": "bars", "title": f"{name} per slice (95% {'cluster ' if groups else ''}bootstrap interval; flagged first, then by drop)",
            "metrics": [f"worst_slice_{name}"],
            "data": {"labels": [("* " if r["flagged"] else "") + r["name"] for r in shown],
                     "series": [{"name": name, "values": [r[name] for r in shown],
                                 "errors": [r[f"{name}_interval"] for r in shown]}],
                     "reference": {"value": overall[name], "label": f"overall {overall[name]:.3f}"}},
            "axes": {"y": name}}]
        result.details["metric"] = name
        result.details["key_finding"] = (f"{len(flagged)} slice(s) flagged; worst: '{flagged[0]['name']}' {name} "
                                         f"{flagged[0][name]:.3f} vs {flagged[0][f'rest_{name}']:.3f} elsewhere"
                                         if flagged else f"no slice flagged of {len(rows)}")
        return result

    @staticmethod
    def _user_masks(data: Dataset, texts: list[str], params: SlicesParams) -> dict[str, np.ndarray]:
        """The user's slices: ``slices`` (regexes on the text) and ``slice_by`` (the values of data columns)."""
        masks = {}
        for name, pattern in params.slices.items():
            regex = re.compile(pattern, re.IGNORECASE)
            masks[f"{name} (regex)"] = np.array([bool(regex.search(t)) for t in texts])
        for column in params.slice_by:
            values = [ex.meta.get(column) for ex in data.examples]
            if all(v is None for v in values):
                known = sorted({k for ex in data.examples for k in ex.meta})
                raise ProbeError(f"slice_by: the data has no column '{column}'; extra columns: {', '.join(known) or 'none'}")
            for value in sorted({str(v) for v in values if v is not None}):
                masks[f"{column} = {value}"] = np.array([str(v) == value for v in values])
        return masks

    @staticmethod
    def _show(task: Any, value: np.ndarray) -> str:
        return task.describe_labels([int(v) for v in value] if np.ndim(value) else int(value))

    @classmethod
    def _outcome(cls, params: SlicesParams, gold: np.ndarray, pred: np.ndarray, labels: list[str],
                 label_map: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """Per example, whether it counts as right, and which examples the metric is a proportion over.
        Multi-label: exact match for accuracy; one label's decisions for ``label:NAME``, and for recall or precision
        of the ``positive`` label."""
        if gold.ndim == 1:
            return (pred == gold).astype(float), cls._base(params, gold, pred, labels, label_map)
        if params.metric == "accuracy":
            return (pred == gold).all(axis=1).astype(float), np.ones(len(gold), dtype=bool)
        name = params.metric[6:] if params.metric.startswith("label:") else params.positive
        if name is None:
            raise ProbeError(f"slices: metric '{params.metric}' on a multi-label model needs the label: set positive: NAME")
        match = find_class(name, labels, label_map)  # a name, an index, or a role (bertprobe.data.classes)
        if match is None:
            raise ProbeError("slices: " + class_problem(name, labels, "label"))
        k = match.index
        right = (pred[:, k] == gold[:, k]).astype(float)
        if params.metric == "recall":
            return right, gold[:, k] == 1
        if params.metric == "precision":
            return right, pred[:, k] == 1
        return right, np.ones(len(gold), dtype=bool)

    @staticmethod
    def _base(params: SlicesParams, gold: np.ndarray, pred: np.ndarray, labels: list[str],
              label_map: Any = None) -> np.ndarray:
        """All examples for accuracy; the gold-positive (recall) or predicted-positive (precision) ones."""
        if params.metric == "accuracy":
            return np.ones(len(gold), dtype=bool)
        if len(labels) != 2:
            raise ProbeError(f"slices: metric '{params.metric}' needs a binary task; this model has {len(labels)} classes")
        positive = params.positive if params.positive is not None else 1
        match = find_class(positive, labels, label_map)  # a name, an index, or a role (bertprobe.data.classes)
        if match is None:
            raise ProbeError("slices: " + class_problem(positive, labels, "positive"))
        positive = match.index
        return (gold == positive) if params.metric == "recall" else (pred == positive)

    @staticmethod
    def _drop_interval(correct: np.ndarray, mask: np.ndarray, seed: int, resamples: int = 1000) -> tuple[float, float]:
        """Bootstrap interval of rest accuracy minus slice accuracy (resampling within each side)."""
        return unpaired_bootstrap_diff(correct[mask], correct[~mask], resamples, 0.95, seed)


@hookimpl
def bertprobe_register_probes(registry: Any) -> None:
    registry.add(SlicesProbe)


@hookimpl
def bertprobe_register_sections(registry: Any) -> None:
    registry.add("slices", entities, when="word_tags")
    registry.add("slices", answers, when="span_answers")
    registry.add("slices", rankings, when="ranks_texts")
