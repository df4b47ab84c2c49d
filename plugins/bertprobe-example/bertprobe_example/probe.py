"""Probe ``typo-consistency``: does one typo per sentence change the prediction?

Character-level noise in the style of Belinkov & Bisk 2018 ("Synthetic and Natural Noise Both Break
Neural Machine Translation"), reduced to its simplest form: swap two adjacent inner characters of
randomly chosen words of four letters or more. Deviation: one swap per word, ``typos`` words per example.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Any

from bertprobe import Finding, Probe, ProbeContext, ProbeResult, hookimpl


@dataclass(frozen=True)
class TypoParams:
    typos: int = 1  # words per example that get one swap of two adjacent letters
    findings: int = 10  # changed predictions shown in the report

    def __post_init__(self) -> None:
        if self.typos < 1:
            raise ValueError("typos must be at least 1")


def add_typos(text: str, typos: int, rng: random.Random) -> str:
    """Swap two adjacent inner characters in ``typos`` words of length >= 4."""
    words = text.split(" ")
    candidates = [i for i, w in enumerate(words) if len(w) >= 4 and w.isalpha()]
    for i in rng.sample(candidates, min(typos, len(candidates))):
        w = words[i]
        j = rng.randrange(1, len(w) - 2)
        words[i] = w[:j] + w[j + 1] + w[j] + w[j + 2 :]
    return " ".join(words)


class TypoConsistency(Probe):
    """Share of examples whose predicted class is unchanged by a typo (higher is more robust)."""

    name = "typo-consistency"
    description = "Share of predictions unchanged by a seeded adjacent-character typo (example plugin)"
    requires = frozenset({"classifier"})
    metrics = {
        "consistency": "share of examples whose prediction survives the typos",
        "accuracy_clean": "accuracy on the clean text",
        "accuracy_typos": "accuracy with the typos",
    }
    Params = TypoParams

    def run(self, target: Any, data: Any, params: TypoParams, ctx: ProbeContext) -> ProbeResult:
        rng = random.Random(ctx.seed)
        noisy = [replace(ex, text=add_typos(ex.text, params.typos, rng)) for ex in data.examples]
        clean_pred = target.predict(data.examples)
        noisy_pred = target.predict(noisy)
        gold = [ex.label for ex in data.examples]
        n = len(gold)
        result = ProbeResult(probe=self.name)
        same = [a == b for a, b in zip(clean_pred, noisy_pred)]
        result.add_metric("consistency", sum(same) / n, True, "share of predictions unchanged by the typos")
        if all(g is not None for g in gold):
            result.add_metric("accuracy_clean", sum(p == g for p, g in zip(clean_pred, gold)) / n, True)
            result.add_metric("accuracy_typos", sum(p == g for p, g in zip(noisy_pred, gold)) / n, True)
        names = target.label_names
        for i in [i for i, s in enumerate(same) if not s][: params.findings]:
            result.findings.append(
                Finding("prediction flipped by a typo", data.examples[i].text, noisy[i].text,
                        names[clean_pred[i]], names[noisy_pred[i]])
            )
        # A figure is data: the HTML report draws this spec (no matplotlib import in the plugin).
        bars = [m for m in ("accuracy_clean", "accuracy_typos", "consistency") if m in result.metrics]
        result.details["figures"] = [{
            "kind": "bars", "title": "predictions with and without typos",
            "data": {"labels": bars, "series": [{"name": target.name, "values": [result.value(m) for m in bars]}]},
            "axes": {"y": "share"},
        }]
        return result


@hookimpl
def bertprobe_register_probes(registry: Any) -> None:
    registry.add(TypoConsistency)


# The codec hook lives beside it (bertprobe_example.codec), registered through this entry point too.
from bertprobe_example.codec import bertprobe_register_codecs  # noqa: E402,F401
