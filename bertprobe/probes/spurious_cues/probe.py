"""Probe ``spurious-cues``: cue statistics, partial-input tests and counterfactuals.

Paper: Niven & Kao 2019, "Probing Neural Network Comprehension of Natural Language Arguments" (ACL).
BERT's 77% on ARCT came from statistical cues such as "not" in the warrants (productivity 0.61,
coverage 0.64 in the paper); on an adversarial set with negated claims and swapped labels it fell to
chance (mean 0.504). The probe has three parts:

1. Cue statistics (``bertprobe.probes.spurious_cues.stats``): applicability, productivity, coverage of unigrams and bigrams,
   with the paper's definitions fitted to the label structure (see that module).
2. Partial inputs: the fine-tuned model scored with fields removed. ARCT: warrants only (W), reason
   and warrants (R, W), claim and warrants (C, W). Single-sentence classification: only the top cue
   words kept, or the top cue words masked.
3. Counterfactuals: ARCT's adversarial negated-claim, label-swapped set (``adversarial_path``); and a
   cue-flip transform: the top cue of one class inserted into examples of another (for multiple choice:
   into the wrong choice), counting how often the prediction flips.

Every accuracy and the cue-flip rate carry a Wilson 95% interval (a suite may judge them with
``interval: true``) and per-example outcomes, so that ``compare`` pairs two models on the same items.

On an extractive QA reader the probe's section for readers audits instead (``answers``, what ``ctx.section``
finds for ``span_answers``): the partial-input tests of Kaushik & Lipton 2018 ("How Much Reading Does Reading
Comprehension Require?", EMNLP) and the position bias of Ko et al. 2020 ("Look at the First Sentence: Position
Bias in Question Answering", EMNLP): F1 with the question removed or reduced to its question word, F1 with the
answer's sentence moved to the end of the context, and where the predicted answers lie against the gold's, each
with its interval; the cue statistics, which count words per class, do not apply to spans.

On a model that ranks texts (a bi-encoder or a reranker: ``ranks_texts``) its section ``rankings`` audits reliance
on lexical overlap instead: nDCG@10 of the queries that share few content words with their relevant passage against
those that share many (the gap with an unpaired bootstrap interval), and nDCG@10 of partial queries (the question
word alone; the stop words alone), with its share of the full queries' nDCG@10.

Deviations: Niven & Kao *trained* separate models on partial inputs; we score the given fine-tuned
model with fields removed, which audits that model rather than the dataset. Cues are ranked by
productivity above chance times coverage (``rank: excess``) so that frequent chance-level tokens do
not top the list; ``rank: product`` ranks by productivity times coverage. The cue-flip transform is ours.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from bertprobe.data.dataset import Dataset, DataSpec, Example
from bertprobe.errors import ProbeError
from bertprobe.hookmarkers import hookimpl
from bertprobe.model.target import Target
from bertprobe.probe import Probe, ProbeContext
from bertprobe.probes.spurious_cues import answers, rankings
from bertprobe.probes.spurious_cues.answers import QUESTION_MODES
from bertprobe.probes.spurious_cues.rankings import PARTIAL_MODES
from bertprobe.probes.spurious_cues.stats import (
    Cue,
    choice_cues,
    choice_grams,
    grams,
    label_cues,
    top_cues,
    words,
)
from bertprobe.results import Finding, ProbeResult
from bertprobe.results.outcomes import example_ids


@dataclass(frozen=True)
class CueParams:
    ngrams: tuple[int, ...] = (1, 2)  # n-gram sizes counted as cues
    normalize_contractions: bool = True  # count n't as not, 're as are, ... (the literal counts are reported too)
    smoothing: float = 0.0  # add-k smoothing of the productivity counts
    min_applicability: int = 5  # data points a cue must apply to before it is ranked
    top: int = 10  # cues listed and used by the partial-input tests
    rank: Literal["excess", "product"] = "excess"  # excess: (productivity - chance) x coverage; product: productivity x coverage (the paper's)
    statistics_path: str | None = None  # data the cue statistics are counted on (default: the probe's data; ARCT: its train split)
    statistics_loader: str | None = None  # loader for statistics_path (default: by extension)
    adversarial_path: str | None = None  # ARCT's adversarial set (negated claims, swapped labels)
    cue_tokens: int = 1  # top cue words of a class inserted by the cue-flip test
    batch_size: int | None = None  # examples per forward pass (default: sized to the device)
    findings: int = 10  # flipped examples shown in the report
    question_removed: tuple[str, ...] = QUESTION_MODES  # readers: empty (no question), question-word ("When?")
    position_bins: int = 10  # readers: bins of the answer-position histogram (relative position in the context)
    bootstrap: int = 1000  # readers and retrievers: bootstrap resamples of the F1 and nDCG intervals (0 leaves them out)
    confidence: float = 0.95  # readers and retrievers: level of the intervals
    overlap_share: float = 1 / 3  # retrievers: share of queries in each of the low- and high-overlap groups (terciles: 1/3)
    partial_queries: tuple[str, ...] = PARTIAL_MODES  # retrievers: question-word ("What?"), stopwords (content words removed), or [] for none

    def __post_init__(self) -> None:
        if not self.ngrams or any(n < 1 for n in self.ngrams):
            raise ValueError("ngrams must list sizes >= 1, e.g. [1, 2]")
        if self.top < 1 or self.cue_tokens < 1:
            raise ValueError("top and cue_tokens must be at least 1")
        if self.smoothing < 0:
            raise ValueError("smoothing must be >= 0")
        unknown = [m for m in self.question_removed if m not in QUESTION_MODES]
        if unknown:
            raise ValueError(f"question_removed: {', '.join(map(repr, unknown))} unknown; use any of "
                             f"{', '.join(QUESTION_MODES)} (or [] for none)")
        if self.position_bins < 2:
            raise ValueError("position_bins must be at least 2")
        if self.bootstrap < 0 or self.findings < 0:
            raise ValueError("bootstrap and findings must be >= 0")
        if not 0 < self.confidence < 1:
            raise ValueError("confidence must lie strictly between 0 and 1")
        if not 0 < self.overlap_share <= 0.5:
            raise ValueError("overlap_share must lie in (0, 0.5], e.g. 0.3333 for terciles")
        unknown = [m for m in self.partial_queries if m not in PARTIAL_MODES]
        if unknown:
            raise ValueError(f"partial_queries: {', '.join(map(repr, unknown))} unknown; use any of "
                             f"{', '.join(PARTIAL_MODES)} (or [] for none)")


def add_accuracy(result: ProbeResult, name: str, target: Target, examples: list[Example], batch_size: int | None,
                 higher_is_better: bool | None, description: str) -> list[int]:
    """Predict ``examples``, record their accuracy as ``name`` (a share with its interval and outcomes) and return
    the predictions."""
    pred = target.predict(examples, batch_size)
    result.add_share(name, [p == ex.label for p, ex in zip(pred, examples)], example_ids(examples), higher_is_better,
                     description)
    return pred


def _is_choice(data: Dataset) -> bool:
    return all(ex.choices for ex in data.examples)


class SpuriousCuesProbe(Probe):
    """Niven & Kao 2019 style cue audit; see the module docstring."""

    name = "spurious-cues"
    description = "Cue productivity/coverage, partial-input accuracy and counterfactuals (Niven & Kao 2019)"
    requires = frozenset({"predictions", "data:labels"})
    tasks = frozenset({"classification", "multiple-choice", "question-answering", "sentence-embedding", "reranker"})
    metrics = {
        "cue_productivity_top": "productivity of the top cue: how often it sits with the label it predicts",
        "cue_coverage_top": "coverage of the top cue: share of data points it applies to",
        "cue_share_covered": "share of data points where one of the top cues applies",
        "chance": "1 / number of labels (choices)",
        "accuracy_full": "accuracy on full inputs",
        "accuracy_warrant_only": "ARCT: accuracy from the warrants alone",
        "accuracy_reason_warrant": "ARCT: accuracy from reason and warrants",
        "accuracy_claim_warrant": "ARCT: accuracy from claim and warrants",
        "accuracy_adversarial": "accuracy on the adversarial (negated claim, swapped label) set",
        "accuracy_cues_only": "accuracy when only the top cue words are kept",
        "accuracy_cues_masked": "accuracy with the top cue words masked",
        "cue_flip_rate": "share of correctly predicted examples whose prediction flips when another class's cue is inserted",
        "cue_productivity_top_literal": "the top cue's productivity, literal tokens only",
        "cue_coverage_top_literal": "the top cue's coverage, literal tokens only",
    }  # and what a section writes instead (its catalogue: a reader's partial inputs): catalogue()
    Params = CueParams
    key_metrics = ("accuracy_full", "accuracy_adversarial", "accuracy_cues_masked", "cue_flip_rate")  # descriptive
    paper = ("Niven, Kao 2019. Probing Neural Network Comprehension of Natural Language Arguments (ACL); readers: "
             "Kaushik, Lipton 2018. How Much Reading Does Reading Comprehension Require? (EMNLP); Ko et al. 2020. "
             "Look at the First Sentence: Position Bias in Question Answering (EMNLP); retrievers: Thakur et al. 2021. "
             "BEIR: A Heterogeneous Benchmark for Zero-shot Evaluation of Information Retrieval Models (NeurIPS)")
    metric_directions = {"accuracy_full": True, "accuracy_adversarial": True, "cue_flip_rate": False}
    path_params = ("statistics_path", "adversarial_path")

    def run(self, target: Target, data: Dataset | None, params: CueParams, ctx: ProbeContext) -> ProbeResult:
        assert data is not None
        result = ProbeResult(probe=self.name)
        section = ctx.section(self.name, target.task)
        if section is not None:  # a reader: partial inputs over spans
            section.audit(result, target, data, params, ctx)
            return result
        stats_data = data
        if params.statistics_path:
            if ctx.load_data is None:
                raise ProbeError("statistics_path needs the harness's data loader")
            stats_data = ctx.load_data(DataSpec(path=params.statistics_path, loader=params.statistics_loader, label="label"))
        choice = _is_choice(data)
        if choice != _is_choice(stats_data):
            raise ProbeError("statistics data and probe data must both be multiple choice or both classification")
        cues, chance, n_labels = self._statistics(result, stats_data, params, choice, target)
        best = top_cues(cues, chance, params.top, params.min_applicability, params.rank)
        if not best:
            raise ProbeError(f"no cue applies to at least {params.min_applicability} data points; lower min_applicability")
        add_accuracy(result, "accuracy_full", target, data.examples, params.batch_size, True, "accuracy on full inputs")
        if choice:
            self._partial_choice(result, target, data, params)
            if params.adversarial_path:
                self._adversarial(result, target, params, ctx)
            self._flip_choice(result, target, data, best[0], params)
        else:
            self._partial_single(result, target, data, best, params)
            self._flip_single(result, target, data, cues, chance, n_labels, params)
        result.details["figures"] = cue_figures(result)
        result.details["key_finding"] = cue_finding(result, best[0])
        return result

    # ---- 1. statistics -----------------------------------------------------------------------
    def _statistics(self, result: ProbeResult, data: Dataset, params: CueParams, choice: bool,
                    target: Target) -> tuple[list[Cue], float, int]:
        labels = [int(ex.label) for ex in data.examples]  # type: ignore[arg-type]
        if choice:
            n_labels = max(len(ex.choices or ()) for ex in data.examples)

            def compute(normalize: bool) -> list[Cue]:
                return choice_cues([ex.choices for ex in data.examples], labels, params.ngrams, normalize,  # type: ignore[misc]
                                   params.smoothing)
        else:
            n_labels = max(len(target.label_names), max(labels) + 1)

            def compute(normalize: bool) -> list[Cue]:
                texts = [ex.text if ex.text_pair is None else f"{ex.text} {ex.text_pair}" for ex in data.examples]
                return label_cues(texts, labels, n_labels, params.ngrams, normalize, params.smoothing)

        chance = 1 / n_labels
        cues = compute(params.normalize_contractions)
        literal = compute(False) if params.normalize_contractions else cues
        best = top_cues(cues, chance, params.top, params.min_applicability, params.rank)
        result.add_metric("chance", chance, None, "1 / number of labels (choices)")
        if best:
            result.add_metric("cue_productivity_top", best[0].productivity, None, f"productivity of the top cue '{best[0].cue}'")
            result.add_metric("cue_coverage_top", best[0].coverage, None, f"coverage of the top cue '{best[0].cue}'")
            covered = self._share_covered(data, {c.cue for c in best}, params, choice)
            result.add_metric("cue_share_covered", covered, None, f"share of data points where one of the top {len(best)} cues applies")
        by_name = {c.cue: c for c in literal}
        if best and best[0].cue in by_name:
            lit = by_name[best[0].cue]
            result.add_metric("cue_productivity_top_literal", lit.productivity, None, "the top cue's productivity, literal tokens only")
            result.add_metric("cue_coverage_top_literal", lit.coverage, None, "the top cue's coverage, literal tokens only")
        names = target.label_names
        result.details.update({
            "top_cue": best[0].cue if best else None,
            "statistics_examples": len(labels),
            "normalize_contractions": params.normalize_contractions,
            "rank": params.rank,
            "top_cues": [self._cue_row(c, choice, names) for c in best],
            "top_cues_literal": [self._cue_row(by_name[c.cue], choice, names) for c in best if c.cue in by_name],
        })
        if best:
            result.details["summary"] = {
                "top cue": f"'{best[0].cue}': productivity {best[0].productivity:.3f}, coverage {best[0].coverage:.3f} "
                           f"(n = {len(labels)}, chance {chance:.2f})",
                "next cues": ", ".join(f"'{c.cue}'" for c in best[1:6]),
            }
        for c in best:
            result.findings.append(Finding(
                title=f"cue '{c.cue}'",
                expected="correct choice" if choice else (names[c.label] if c.label < len(names) else str(c.label)),
                score=round(c.score(chance, params.rank), 4),
                extra={"kind": "cue", "columns": {"applicability": c.applicability,
                                                  "productivity": round(c.productivity, 3),
                                                  "coverage": round(c.coverage, 3)}},
            ))
        return cues, chance, n_labels

    @staticmethod
    def _cue_row(c: Cue, choice: bool, names: list[str]) -> dict[str, Any]:
        row = {"cue": c.cue, "applicability": c.applicability, "productivity": round(c.productivity, 4),
               "coverage": round(c.coverage, 4), "hits": c.hits}
        if not choice:
            row["label"] = names[c.label] if c.label < len(names) else c.label
        return row

    @staticmethod
    def _share_covered(data: Dataset, cues: set[str], params: CueParams, choice: bool) -> float:
        hit = 0
        for ex in data.examples:
            if choice:
                _, applicable = choice_grams(ex.choices or (), params.ngrams, params.normalize_contractions)
            else:
                applicable = grams(words(f"{ex.text} {ex.text_pair or ''}", params.normalize_contractions), params.ngrams)
            hit += bool(applicable & cues)
        return hit / max(len(data.examples), 1)

    # ---- 2. partial inputs -------------------------------------------------------------------
    def _partial_choice(self, result: ProbeResult, target: Target, data: Dataset, params: CueParams) -> None:
        if not all("claim" in ex.meta and "reason" in ex.meta for ex in data.examples):
            result.details["partial_inputs"] = "skipped: the data has no claim/reason fields (use the arct loader)"
            return
        variants = {
            "accuracy_warrant_only": lambda ex: "",
            "accuracy_reason_warrant": lambda ex: ex.meta["reason"],
            "accuracy_claim_warrant": lambda ex: ex.meta["claim"],
        }
        for name, build in variants.items():
            add_accuracy(result, name, target, [replace(ex, text=build(ex)) for ex in data.examples], params.batch_size,
                         None, "accuracy with fields removed; well above chance means the model does not need what "
                               "the task needs")

    def _partial_single(self, result: ProbeResult, target: Target, data: Dataset, best: list[Cue],
                        params: CueParams) -> None:
        cue_words = {c.cue for c in best if " " not in c.cue}
        mask = target.tokenizer.mask_token

        def keep_only(text: str) -> str:
            return " ".join(w for w in text.split() if set(words(w, params.normalize_contractions)) & cue_words)

        def masked(text: str) -> str:
            out = [(mask or "") if set(words(w, params.normalize_contractions)) & cue_words else w for w in text.split()]
            return " ".join(w for w in out if w)

        only = [replace(ex, text=keep_only(ex.text)) for ex in data.examples]
        hidden = [replace(ex, text=masked(ex.text)) for ex in data.examples]
        add_accuracy(result, "accuracy_cues_only", target, only, params.batch_size, None,
                     "accuracy when only the top cue words are kept")
        add_accuracy(result, "accuracy_cues_masked", target, hidden, params.batch_size, None,
                     f"accuracy with the top cue words replaced by {mask or 'nothing'}")

    # ---- 3. counterfactuals ------------------------------------------------------------------
    def _adversarial(self, result: ProbeResult, target: Target, params: CueParams, ctx: ProbeContext) -> None:
        assert ctx.load_data is not None
        adv = ctx.load_data(DataSpec(path=params.adversarial_path, loader="arct", label="label"))
        pred = add_accuracy(result, "accuracy_adversarial", target, adv.examples, params.batch_size, True,
                            "accuracy on the adversarial (negated claim, swapped label) set")
        flagged = [i for i, ex in enumerate(adv.examples) if ex.meta.get("flagged")]
        plain = [i for i, ex in enumerate(adv.examples) if not ex.meta.get("flagged")]
        for key, rows in (("adversarial_rows", flagged), ("original_rows", plain)):
            if rows:
                result.details[f"accuracy_{key}"] = sum(pred[i] == adv.examples[i].label for i in rows) / len(rows)
        result.details["adversarial_examples"] = len(adv.examples)

    def _flip_choice(self, result: ProbeResult, target: Target, data: Dataset, cue: Cue, params: CueParams) -> None:
        """Insert the top cue into the wrong choice where it is absent; count predictions that move to it."""
        base = target.predict(data.examples, params.batch_size)
        rows, perturbed = [], []
        for i, ex in enumerate(data.examples):
            wrong = 1 - int(ex.label)  # type: ignore[arg-type]
            if base[i] != ex.label or wrong >= len(ex.choices or ()):
                continue
            wrong_grams = grams(words(ex.choices[wrong], params.normalize_contractions), params.ngrams)  # type: ignore[index]
            if cue.cue in wrong_grams:  # whole words: 'not' is not in 'nothing'
                continue
            choices = list(ex.choices)  # type: ignore[arg-type]
            choices[wrong] = f"{cue.cue} {choices[wrong]}"
            rows.append(i)
            perturbed.append(replace(ex, choices=tuple(choices)))
        self._flip_metric(result, target, data, rows, perturbed, params, cue.cue,
                          lambda p, ex: p != ex.label)

    def _flip_single(self, result: ProbeResult, target: Target, data: Dataset, cues: list[Cue], chance: float,
                     n_labels: int, params: CueParams) -> None:
        """Insert class A's top cue words at the start of correctly predicted class-B examples."""
        base = target.predict(data.examples, params.batch_size)
        rows, perturbed, used = [], [], {}
        for a in range(n_labels):
            top = [c for c in top_cues(cues, chance, params.top * 5, params.min_applicability, params.rank, label=a)
                   if " " not in c.cue][: params.cue_tokens]
            if not top:
                continue
            prefix = " ".join(c.cue for c in top)
            used[a] = prefix
            for i, ex in enumerate(data.examples):
                if ex.label != a and base[i] == ex.label:
                    rows.append(i)
                    perturbed.append(replace(ex, text=f"{prefix} {ex.text}"))
        result.details["cue_flip_prefixes"] = {target.label_names[a] if a < len(target.label_names) else a: p
                                               for a, p in used.items()}
        self._flip_metric(result, target, data, rows, perturbed, params, ", ".join(used.values()),
                          lambda p, ex: p != ex.label)

    def _flip_metric(self, result: ProbeResult, target: Target, data: Dataset, rows: list[int],
                     perturbed: list[Example], params: CueParams, cue: str, flipped: Any) -> None:
        if not rows:
            result.details["cue_flip"] = "no eligible examples"
            return
        pred = target.predict(perturbed, params.batch_size)
        hits = [bool(flipped(p, ex)) for p, ex in zip(pred, perturbed)]
        flips = [j for j, hit in enumerate(hits) if hit]
        ids = example_ids(data.examples)
        result.add_share("cue_flip_rate", hits, [ids[i] for i in rows], False,
                         f"share of correctly predicted examples whose prediction flips when the cue '{cue}' is inserted")
        result.details["cue_flip_examples"] = len(rows)
        for j in flips[: params.findings]:
            ex, new = data.examples[rows[j]], perturbed[j]
            columns: dict[str, Any] = {}
            if ex.choices:  # ARCT: the claim and reason, then each warrant by name, the changed one marked
                before, after = ex.text, new.text
                if ex.meta.get("claim") is not None and before == after:  # shown in their own columns
                    columns["claim"], columns["reason"] = ex.meta["claim"], ex.meta.get("reason", "")
                    before = after = None
                for k, (w_old, w_new) in enumerate(zip(ex.choices, new.choices or ex.choices)):
                    columns[f"warrant {k}"] = w_old if w_old == w_new else f"{w_old} => {w_new}"
                expected = f"warrant {ex.label}"
                observed = f"warrant {pred[j]}"
            else:
                before, after = ex.text, new.text
                expected, observed = str(ex.label), str(pred[j])
            highlight = [w for w in cue.split(", ") if w]
            result.findings.append(Finding(title="prediction flipped by an inserted cue", input=before,
                                           perturbed=after if after != before else None, expected=expected,
                                           observed=observed, extra={"kind": "cue-flip", "columns": columns,
                                                                     "highlight": highlight}))


def cue_finding(result: ProbeResult, top: Cue) -> str:
    """One line: the top cue, then each accuracy that tells whether the model needs it, with its interval."""
    parts = [f"top cue '{top.cue}' (productivity {top.productivity:.2f}, coverage {top.coverage:.2f})"]
    for name, label in (("accuracy_adversarial", "adversarial"), ("accuracy_warrant_only", "warrants only"),
                        ("accuracy_cues_masked", "cues masked"), ("cue_flip_rate", "flipped by an inserted cue")):
        metric = result.metrics.get(name)
        if metric is not None and metric.value is not None:
            ci = f" [{metric.ci[0]:.2f}, {metric.ci[1]:.2f}]" if metric.ci else ""
            parts.append(f"{label} {metric.value:.2f}{ci}")
    return "; ".join(parts)


def cue_figures(result: ProbeResult) -> list[dict[str, Any]]:
    """Productivity against coverage of the top cues (chance marked), and the accuracies with chance."""
    chance = result.value("chance")
    figures: list[dict[str, Any]] = []
    cues = result.details.get("top_cues") or []
    if cues:
        figures.append({"kind": "scatter", "title": "cue productivity against coverage (top cues)",
                        "data": {"points": [{"x": c["coverage"], "y": c["productivity"], "label": c["cue"]}
                                            for c in cues[:20]], "reference": {"y": chance}},
                        "axes": {"x": "coverage", "y": "productivity"}})
    names = [n for n in ("accuracy_full", "accuracy_warrant_only", "accuracy_reason_warrant", "accuracy_claim_warrant",
                         "accuracy_cues_only", "accuracy_cues_masked", "accuracy_adversarial") if n in result.metrics]
    if names:
        figures.append({"kind": "bars", "title": "accuracy on full, partial and adversarial inputs",
                        "metrics": ["accuracy_*"],
                        "data": {"labels": [n.replace("accuracy_", "") for n in names],
                                 "series": [{"name": "accuracy", "values": [result.value(n) for n in names]}],
                                 "reference": {"value": chance, "label": "chance"} if chance else None},
                        "axes": {"y": "accuracy"}})
    return figures


@hookimpl
def bertprobe_register_probes(registry: Any) -> None:
    registry.add(SpuriousCuesProbe)


@hookimpl
def bertprobe_register_sections(registry: Any) -> None:
    registry.add("spurious-cues", answers, when="span_answers")
    registry.add("spurious-cues", rankings, when="ranks_texts")
