"""Multi-label classification: a sigmoid per label, thresholds per label, label sets as gold.

A text may carry any number of labels, none included (an empty set is a valid label). Detected from
``problem_type: multi_label_classification`` in the model's config, or set with ``task: multi-label``.
Never a softmax: each label's sigmoid probability is a binary forecast, thresholded at 0.5 by default
(``model.threshold``), or per label (``model.thresholds: {toxic: 0.3}``).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, ClassVar

import torch
import torch.nn.functional as F

from bertprobe.data.dataset import Dataset, DataSpec, Example
from bertprobe.errors import DataError, ProbeError, RowProblems, SuiteError
from bertprobe.tasks.base import Task, config_labels, refuse_questions, refuse_token_tags
from bertprobe.tasks.classification import has_head
from bertprobe.tasks.scores import OutcomeScore

_ON, _OFF = {"1", "1.0", "true", "yes"}, {"0", "0.0", "false", "no", ""}


@dataclass(frozen=True)
class MultiLabelClassification(Task):
    """``problem_type: multi_label_classification``: sigmoid per label, prediction = probability >= threshold,
    loss = binary cross-entropy (mean over labels), an example is correct when its label set is exact."""

    name: ClassVar[str] = "multi-label"
    description: ClassVar[str] = "multi-label classification: any number of labels per text (sigmoid per label)"
    model_class: ClassVar[str] = "AutoModelForSequenceClassification"
    capabilities: ClassVar[frozenset[str]] = frozenset({"predictions", "classifier", "probabilities"})
    priority: ClassVar[int] = 10  # before single-label: the same architecture, told apart by problem_type
    label_sets: ClassVar[bool] = True
    config_fields: ClassVar[Mapping[str, Any]] = MappingProxyType({"problem_type": "multi_label_classification"})

    @classmethod
    def detect(cls, config: Any) -> bool:
        return has_head(config, "ForSequenceClassification") and getattr(config, "problem_type", None) == "multi_label_classification"

    @classmethod
    def bind(cls, config: Any, options: Mapping[str, Any] | None = None) -> Task:
        names = config_labels(config)
        options = dict(options or {})
        default = float(options.get("threshold", 0.5))
        per_label = {str(k): float(v) for k, v in dict(options.get("thresholds") or {}).items()}
        lookup = {n.lower(): n for n in names}
        for label, value in [("threshold", default), *per_label.items()]:
            if not 0 < value < 1:
                raise SuiteError(f"model.thresholds: {label} = {value} must lie strictly between 0 and 1")
        unknown = [k for k in per_label if k.lower() not in lookup]
        if unknown:
            raise SuiteError(f"model.thresholds: '{unknown[0]}' is not a label of the model{_nearest(unknown[0], names)}; "
                             f"labels: {', '.join(names)}")
        per_label = {lookup[k.lower()]: v for k, v in per_label.items()}
        return cls(label_names=names, settings={"threshold": default, "thresholds": per_label})

    @property
    def thresholds(self) -> torch.Tensor:
        """One decision threshold per label, in label order."""
        per = dict(self.settings.get("thresholds") or {})
        default = float(self.settings.get("threshold", 0.5))
        return torch.tensor([per.get(n, default) for n in self.label_names], dtype=torch.float32)

    # ---- data ----------------------------------------------------------------------------------
    def read_labels(self, data: Dataset, spec: DataSpec, model: str) -> Dataset:
        return read_label_sets(data, spec, self.label_names, model)

    def gold(self, data: Dataset) -> torch.Tensor:
        out = torch.zeros(len(data.examples), len(self.label_names), dtype=torch.long)
        for i, ex in enumerate(data.examples):
            for j in ex.label or ():  # type: ignore[union-attr]
                out[i, int(j)] = 1
        return out

    # ---- what the logits mean -----------------------------------------------------------------
    def probs(self, logits: torch.Tensor) -> torch.Tensor:
        return logits.float().sigmoid()

    def predict(self, logits: torch.Tensor) -> torch.Tensor:
        return (self.probs(logits) >= self.thresholds.to(logits.device)).long()

    def loss(self, logits: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
        target = gold.to(device=logits.device, dtype=torch.float32)
        return F.binary_cross_entropy_with_logits(logits.float(), target, reduction="none").mean(dim=-1)

    def correct(self, pred: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
        return (pred == gold.to(pred.device)).all(dim=-1)

    def outcome_score(self, metric: str = "auto") -> OutcomeScore:
        """micro-F1 (default; per example its true positives, false positives and false negatives) or
        subset_accuracy (exact match per example)."""
        thresholds = self.thresholds

        def decisions(logits: torch.Tensor) -> torch.Tensor:
            return logits.float().sigmoid() >= thresholds.to(logits.device)

        if metric in ("auto", "micro_f1"):
            def counts(logits: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
                pred, g = decisions(logits), gold.bool()
                return torch.stack([(pred & g).sum(-1), (pred & ~g).sum(-1), (~pred & g).sum(-1)], dim=-1)

            return OutcomeScore("micro_f1", counts, "F1 over every (example, label) decision pooled")
        if metric == "subset_accuracy":
            def nearest_threshold(logits: torch.Tensor) -> torch.Tensor:  # the label decision closest to flipping
                return (logits.float() - torch.logit(thresholds.to(logits.device).float())).abs().min(-1).values

            return OutcomeScore("subset_accuracy", lambda logits, gold: (decisions(logits) == gold.bool()).all(-1),
                                "exact match: predicted label set equals the gold one", nearest_threshold)
        raise ProbeError(f"metric '{metric}' does not apply to a multi-label model; use micro_f1 or subset_accuracy")

    def metrics(self, probs: torch.Tensor, pred: torch.Tensor, gold: torch.Tensor) -> dict[str, Any]:
        """scikit-learn's multi-label metrics (``labelset_metrics.label_set_metrics``) on indicator arrays."""
        from bertprobe.tasks.labelset_metrics import label_set_metrics

        return label_set_metrics(probs.double().numpy(), pred.numpy(), gold.numpy())

    def confidence(self, probs: torch.Tensor, gold: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Every (example, label) pair is a binary forecast: the label's probability and whether it is gold."""
        return probs.reshape(-1), gold.to(probs.device).reshape(-1) == 1

    def describe_labels(self, values: Sequence[int] | int) -> str:
        """One label's name, or a 0/1 indicator row as the set of labels it turns on (``{toxic, insult}``)."""
        if isinstance(values, int):
            return super().describe_labels(values)
        return "{" + ", ".join(n for n, on in zip(self.label_names, values) if on) + "}"


def _nearest(label: str, names: Sequence[str]) -> str:
    near = _near(label, names)
    return f" (nearest: {', '.join(near)})" if near else ""


def _near(label: str, names: Sequence[str]) -> list[str]:
    close = difflib.get_close_matches(label.lower(), [n.lower() for n in names], n=3, cutoff=0.5)
    return [n for c in close for n in names if n.lower() == c]


SEPARATORS = ("|", ";", ",", "/", "+", " ")


def _unknown_label(text: str, where: str, names: Sequence[str], lookup: Mapping[str, int], spec: DataSpec,
                   model: str) -> str:
    """Why a label is not the model's, and the likeliest fix: a separator other than ``data.label_sep`` whose
    parts are all labels (``LOC|ORG``), a close spelling (``PRE``: did you mean PER?), else a label map."""
    head = f"label '{text}' on {where} is not one {model} knows"
    for sep in SEPARATORS:
        parts = [p.strip() for p in text.split(sep)] if sep != spec.label_sep and sep in text.strip() else []
        if len(parts) > 1 and all(p.lower() in lookup for p in parts):
            quoted = f"'{sep}'"
            return (f"{head}, but its parts {', '.join(parts)} are: it looks like a label set separated by {quoted} "
                    f"(data.label_sep is '{spec.label_sep}'); set data.label_sep: {quoted} (--set data.label_sep={quoted})")
    near = _near(text, names)
    if near:
        return (f"{head}; did you mean {near[0]}? fix the data, or map it with --label-map {text}={near[0]}; "
                f"labels: {', '.join(names)}")
    return f"{head}; labels: {', '.join(names)}; fix the data or map it with --label-map {text}=NAME"


def _form(raw: Any) -> str:
    if isinstance(raw, (list, tuple)):
        return "a JSON list"
    if isinstance(raw, str):
        return "a delimited string"
    if isinstance(raw, dict):
        return "0/1 columns"
    return type(raw).__name__


def _label_set(raw: Any, where: str, data: Dataset, spec: DataSpec, names: Sequence[str], lookup: Mapping[str, int],
               mapped: Mapping[str, str], model: str, rows: RowProblems) -> set[int] | None:
    """One example's label set as label ids; None, with its problems added to ``rows``, when it is malformed."""
    if isinstance(raw, dict):
        items = []
        for column, value in raw.items():
            text = str(value).strip().lower() if value is not None else ""
            if text not in _ON | _OFF:
                rows.add(f"{where}: column '{column}' holds {value!r}; a label column holds 0 or 1")
                return None
            if text in _ON:
                items.append(column)
    elif isinstance(raw, str):
        items = [p.strip() for p in raw.split(spec.label_sep)] if raw.strip() else []
    elif isinstance(raw, (list, tuple)):
        items = list(raw)
        ints = [v for v in items if isinstance(v, int) and not isinstance(v, bool)]
        strs = [v for v in items if isinstance(v, str)]
        if ints and strs:
            rows.add(f"label set {raw!r} on {where} mixes class ids ({', '.join(map(str, ints))}) and names "
                     f"({', '.join(strs)}); write every label of the file by name (such as {names[0]!r}), or every one by id")
            return None
    else:
        rows.add(f"label {raw!r} on {where} is not a label set; give a JSON list (\"labels\": [\"a\", \"b\"]), "
                 f"a '{spec.label_sep}'-separated string, or one 0/1 column per label (data.label_columns)")
        return None
    ids = set()
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (str, int)):
            rows.add(f"label {item!r} on {where} is not a label name")
            return None
        text = str(item).strip()
        text = mapped.get(text.lower(), text)
        index = lookup.get(text.lower())
        if index is None and isinstance(item, int) and data.label_names and 0 <= item < len(data.label_names):
            named = mapped.get(data.label_names[item].lower(), data.label_names[item])  # the data's own names
            index = lookup.get(named.lower())
            text = named
        elif index is None and isinstance(item, int) and 0 <= item < len(names):
            index = item
        if index is None:
            rows.add(_unknown_label(text, where, names, lookup, spec, model))
            return None
        ids.add(index)
    return ids


def read_label_sets(data: Dataset, spec: DataSpec, names: Sequence[str], model: str) -> Dataset:
    """Each example's label set as sorted label ids, from a JSON list, a ``label_sep``-delimited string, or
    one 0/1 column per label (``data.label_columns``, or every label of the model present as a column).

    Every malformed form is a DataError naming the file and line: an unknown label (with the nearest known
    ones), a value other than 0/1 in a label column, or two forms mixed in one file.
    """
    refuse_questions(data, "multi-label", model, "a text and a label set per example (csv/tsv/jsonl)")
    refuse_token_tags(data, "multi-label", model, "a label set")
    lookup = {n.lower(): i for i, n in enumerate(names)}
    mapped = {str(k).strip().lower(): str(v) for k, v in spec.label_map.items()}
    columns: list[str] = []
    if data.examples and all(ex.label is None for ex in data.examples) and all(n in data.examples[0].meta for n in names):
        columns = list(names)  # one 0/1 column per label of the model (data.label_columns names others)
    for ex in data.examples[:1]:
        named = list(ex.label) if isinstance(ex.label, dict) else columns
        bad = [c for c in named if c.lower() not in lookup and mapped.get(c.lower(), "").lower() not in lookup]
        if bad:
            raise DataError(f"{data.name}: label column '{bad[0]}' is not a label of {model}{_nearest(bad[0], names)}; "
                            f"labels: {', '.join(names)}; map it with --label-map {bad[0]}=NAME")
    if not columns and not any(ex.label is not None for ex in data.examples):
        return data
    first_form: tuple[str, str] | None = None
    out: list[Example] = []
    rows = RowProblems()
    for i, ex in enumerate(data.examples):
        where = data.where(i)
        raw: Any = {c: ex.meta.get(c) for c in columns} if columns else ex.label
        if raw is None:
            rows.add(f"{where} has no label set; give every example one (an empty list [] for no label)")
            continue
        form = _form(raw)
        if first_form is None:
            first_form = (form, where)
        elif form != first_form[0]:
            rows.add(f"{where}: the label set is {form}, but {first_form[1]} gives {first_form[0]}; "
                     "write every label set in one form")
            continue
        ids = _label_set(raw, where, data, spec, names, lookup, mapped, model, rows)
        if ids is not None:
            out.append(replace(ex, label=tuple(sorted(ids))))
    rows.raise_if_any()
    return replace(data, examples=out, label_names=list(names))
