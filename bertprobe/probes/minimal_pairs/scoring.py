"""Scoring minimal pairs: both sentences' pseudo-log-likelihoods from the shared masked-LM engine, in work units
of pairs (``PairChunks``), and the length check against the model's positions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bertprobe.data.dataset import Dataset
from bertprobe.errors import RowProblems
from bertprobe.execution import Sweep
from bertprobe.model.masked_scoring import MaskedScorer, encode_texts
from bertprobe.model.target import Target
from bertprobe.probes.minimal_pairs.pairs import MinimalPair


@dataclass(frozen=True)
class PairScore:
    """A pair and both sentences' PLLs; it is right when the good sentence's is strictly higher."""

    pair: MinimalPair
    good: float
    bad: float

    @property
    def correct(self) -> bool:
        return self.good > self.bad

    @property
    def tied(self) -> bool:
        return self.good == self.bad


@dataclass(frozen=True)
class PairChunks(Sweep):
    """PLLs of chunks of pairs (a unit is a tuple of (good, bad) sentence pairs); a chunk's value holds both
    lists of PLLs and the forward passes and masked rows it took (those of a group of units on its first). All
    sentences of the units run together are scored together, so the engine packs their masked copies by length
    across pairs. ``precision``: the engine's (``model``, ``bfloat16``)."""

    metric: str = "original"
    batch_tokens: int = 2048
    max_rows: int = 512
    precision: str = "model"

    def setup(self, target: Target, data: Dataset | None) -> MaskedScorer:
        return MaskedScorer(target, self.batch_tokens, self.max_rows, precision=self.precision)

    def run(self, state: MaskedScorer, units: list[Any]) -> list[dict[str, Any]]:
        passes, rows = state.passes, state.rows
        texts = [t for chunk in units for good, bad in chunk for t in (good, bad)]
        totals = [s.total for s in state.pll(texts, self.metric, desc="BLiMP sentences")]
        out, at = [], 0
        for chunk in units:
            mine = totals[at : at + 2 * len(chunk)]
            at += 2 * len(chunk)
            out.append({"good": mine[0::2], "bad": mine[1::2], "passes": 0, "rows": 0})
        if out:
            out[0].update(passes=state.passes - passes, rows=state.rows - rows)
        return out


def check_lengths(tokenizer: Any, limit: int, pairs: list[MinimalPair]) -> None:
    """A DataError naming every sentence longer than the model's ``limit`` positions (with its special tokens)."""
    texts = list(dict.fromkeys(t for p in pairs for t in (p.good, p.bad)))
    lengths = {e.text: len(e.ids) for e in encode_texts(tokenizer, texts)}
    rows = RowProblems()
    for p in pairs:
        for name, text in (("sentence_good", p.good), ("sentence_bad", p.bad)):
            if lengths[text] > limit:
                rows.add(f"{p.where}: {name} is {lengths[text]} tokens, longer than the model's {limit} positions")
    rows.raise_if_any()
