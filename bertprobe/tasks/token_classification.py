"""Token classification (NER): one tag per word, entities decoded from the tags (``tasks.entities``).

Words in, one tag per word out: a word's logits are its first sub-token's (``model.word_logits``), long
sentences in overlapping windows. Gold tags are read per word, in the data's scheme (IOB2, IOB1 or
BIOES, detected or set with ``data.options: {scheme: ...}``) and converted to the model's scheme; a tag
the model does not know is an error naming the file, line and the closest tags of the model. An example
is correct when its predicted entity set equals the gold one (``sentence_exact``).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import torch
import torch.nn.functional as F

from bertprobe.data.dataset import Dataset, DataSpec, Example
from bertprobe.errors import DataError, ProbeError, RowProblems
from bertprobe.tasks.base import Task, config_labels, refuse_questions
from bertprobe.tasks.classification import has_head
from bertprobe.tasks.entities import SCHEMES, convert, detect_scheme, spans
from bertprobe.tasks.scores import OutcomeScore


@dataclass(frozen=True)
class TokenClassification(Task):
    """``…ForTokenClassification``: a softmax over tags per word; gold and predictions are tag ids per word."""

    name: ClassVar[str] = "token-classification"
    description: ClassVar[str] = "token classification (NER): one tag per word, entities from IOB2/BIOES tags"
    model_class: ClassVar[str] = "AutoModelForTokenClassification"
    capabilities: ClassVar[frozenset[str]] = frozenset({"predictions", "classifier", "probabilities"})
    word_tags: ClassVar[bool] = True

    @classmethod
    def detect(cls, config: Any) -> bool:
        return has_head(config, "ForTokenClassification")

    @classmethod
    def bind(cls, config: Any, options: Mapping[str, Any] | None = None) -> Task:
        names = config_labels(config)
        return cls(label_names=names, settings={"scheme": detect_scheme(list(names))})

    @property
    def scheme(self) -> str:
        return str(self.settings.get("scheme", "IOB2"))

    @property
    def entity_types(self) -> list[str]:
        """The entity types the model's tags name (PER, LOC, ORG...)."""
        return sorted({n.split("-", 1)[1] for n in self.label_names if "-" in n})

    # ---- data ----------------------------------------------------------------------------------
    def read_labels(self, data: Dataset, spec: DataSpec, model: str) -> Dataset:
        refuse_questions(data, self.name, model, "one tag per word (a CoNLL column file such as .iob2, or JSONL with "
                         "tokens and tags lists)")
        if not any(ex.label is not None for ex in data.examples):
            return data
        rows = RowProblems()
        for i, ex in enumerate(data.examples):
            if ex.words is None or not isinstance(ex.label, (tuple, list)) or len(ex.label) != len(ex.words):
                rows.add(f"{data.where(i)}: {model} is a token-classification model, which needs one tag per "
                         "word; give a CoNLL column file (.iob2, .conll) or JSONL with tokens and tags lists")
        rows.raise_if_any()
        lookup = {n.upper(): i for i, n in enumerate(self.label_names)}
        mapped = {str(k).strip().upper(): str(v) for k, v in spec.label_map.items()}
        every = [str(t) for ex in data.examples for t in (ex.label or ())]
        source = str(spec.options.get("scheme") or detect_scheme([mapped.get(t.upper(), t) for t in every]))
        if source not in SCHEMES:
            raise DataError(f"data.options.scheme: {source!r} is not one of {', '.join(SCHEMES)}")
        out = []
        for i, ex in enumerate(data.examples):
            tags = [mapped.get(str(t).upper(), str(t)) for t in ex.label]
            lines = ex.meta.get("lines") or ()
            bad = False
            for w, tag in enumerate(tags):
                if tag.upper() not in lookup and not (source != self.scheme and tag.split("-", 1)[-1] in self.entity_types):
                    where = f"line {lines[w]} of {data.name}" if w < len(lines) else data.where(i)
                    near = difflib.get_close_matches(tag, list(self.label_names), n=3, cutoff=0.4)
                    rows.add(f"tag '{tag}' on {where} is not one {model} knows"
                             + (f"; did you mean {near[0]}? fix the data, or map it with --label-map {tag}={near[0]}"
                                if near else f"; map it with --label-map {tag}=TAG")
                             + f"; tags: {', '.join(self.label_names)}")
                    bad = True
            if bad:
                continue
            if source != self.scheme:
                tags = convert(tags, source, self.scheme)
            out.append(replace(ex, label=tuple(lookup[t.upper()] for t in tags)))
        rows.raise_if_any()
        return replace(data, examples=out, label_names=list(self.label_names))

    def gold(self, data: Dataset) -> torch.Tensor:
        """Tag ids ``[N, longest sentence]``, -100 past each sentence's end."""
        width = max((len(ex.label or ()) for ex in data.examples), default=0)
        out = torch.full((len(data.examples), width), -100, dtype=torch.long)
        for i, ex in enumerate(data.examples):
            out[i, : len(ex.label or ())] = torch.tensor(list(ex.label or ()), dtype=torch.long)  # type: ignore[arg-type]
        return out

    # ---- what the logits mean (per word, ``[N, W, tags]`` padded, or ``[W, tags]`` for one sentence) --
    def probs(self, logits: torch.Tensor) -> torch.Tensor:
        return logits.float().softmax(dim=-1)

    def predict(self, logits: torch.Tensor) -> torch.Tensor:
        return logits.argmax(dim=-1)

    def loss(self, logits: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy over each sentence's labelled positions (-100 ignored; gold longer than the logits,
        padded for a whole dataset, is cut to them)."""
        gold = gold[:, : logits.shape[1]]
        per_word = F.cross_entropy(logits.float().transpose(1, 2), gold.to(logits.device), reduction="none",
                                   ignore_index=-100)
        words = (gold != -100).sum(-1).clamp_min(1).to(per_word.device)
        return per_word.sum(-1) / words

    def outcome_score(self, metric: str = "auto") -> OutcomeScore:
        """Entity micro-F1 (default; per sentence its entity true positives, false positives and false negatives,
        from the tags at the labelled positions) or sentence exact match (``subset_accuracy``)."""
        from bertprobe.tasks.entities import sentence_counts

        scheme = self.scheme

        def counts(logits: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
            gold = gold[:, : logits.shape[1]].to(logits.device)
            pred = logits.argmax(-1)
            rows = []
            for p, g in zip(pred.tolist(), gold.tolist()):
                keep = [i for i, t in enumerate(g) if t != -100]
                c = sentence_counts([self.label_names[g[i]] for i in keep], [self.label_names[p[i]] for i in keep], scheme)
                tp, n_pred, n_gold = sum(c.tp.values()), sum(c.pred.values()), sum(c.gold.values())
                rows.append([tp, n_pred - tp, n_gold - tp])
            return torch.tensor(rows, dtype=torch.long, device=logits.device).reshape(len(rows), 3)

        if metric in ("auto", "entity_f1"):
            return OutcomeScore("entity_f1", counts, "entity-level micro F1, strict")
        if metric in ("subset_accuracy", "sentence_exact"):
            return OutcomeScore("sentence_exact", lambda logits, gold: counts(logits, gold)[:, 1:].sum(-1) == 0,
                                "share of sentences whose entities are exactly right")
        raise ProbeError(f"metric '{metric}' does not apply to a token-classification model; use entity_f1 or sentence_exact")

    def token_gold(self, word_of_token: Sequence[Sequence[int]], data: Dataset) -> torch.Tensor:
        """Gold at sub-token level for word-aligned encodings: each word's tag on its first sub-token, -100 on the
        rest and on special tokens (the training convention), padded with -100 to the longest row."""
        width = max((len(w) for w in word_of_token), default=0)
        out = torch.full((len(word_of_token), width), -100, dtype=torch.long)
        for i, (words, ex) in enumerate(zip(word_of_token, data.examples)):
            seen: set[int] = set()
            for position, w in enumerate(words):
                if w >= 0 and w not in seen:
                    seen.add(w)
                    out[i, position] = int(ex.label[w])  # type: ignore[index]
        return out

    def correct(self, pred: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
        """Whether each sentence's predicted entities equal its gold ones (exact spans and types)."""
        return torch.tensor([set(spans(self.tags(p, g))) == set(spans(self.tags(g, g))) for p, g in zip(pred, gold)])

    def confidence(self, probs: torch.Tensor, gold: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per labelled word: the top tag's probability, and whether the top tag is the gold one."""
        keep = gold != -100
        top, pred = probs.max(dim=-1)
        return top[keep], (pred == gold)[keep]

    def tags(self, ids: torch.Tensor | Sequence[int], gold: torch.Tensor | Sequence[int] | None = None) -> list[str]:
        """Tag names of one sentence's ids (cut at the gold padding when given)."""
        values = ids.tolist() if isinstance(ids, torch.Tensor) else list(ids)
        if gold is not None:
            g = gold.tolist() if isinstance(gold, torch.Tensor) else list(gold)
            values = [v for v, k in zip(values, g) if k != -100]
        return [self.label_names[int(v)] for v in values]

    def describe_labels(self, values: Sequence[int] | int) -> str:
        if isinstance(values, int):
            return super().describe_labels(values)
        return " ".join(f"[{kind} {a}:{b}]" for a, b, kind in spans(self.tags(values), self.scheme)) or "no entity"


def words_of(examples: Sequence[Example]) -> list[tuple[str, ...]]:
    """The words of each example (a DataError names the first without)."""
    out = []
    for ex in examples:
        if not ex.words:
            raise DataError(f"{ex.where or ex.id}: a token-classification model needs the words of each example")
        out.append(tuple(ex.words))
    return out
