"""Ettinger 2020's figures (``ettinger``) as metrics, per-set tables and a headline of a cloze result."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bertprobe.execution import Sweep
from bertprobe.model.target import Target
from bertprobe.probes.cloze.ettinger import EttingerSet, read_set, role_cloze_diff, role_prob_diff, shares
from bertprobe.results import ProbeResult

LABELS = {"cprag": "CPRAG", "role": "ROLE", "neg_simp": "NEG-SIMP", "neg_nat": "NEG-NAT"}

# what expect: may name; the probe's catalogue merges these
CATALOGUE = {
    "ettinger_*_top1": "Ettinger 2020 prediction accuracy, k=1: share of contexts (CPRAG; NEG: affirmative-true "
                       "contexts) or rows (ROLE) whose top vocabulary token is an expected word",
    "ettinger_*_top5": "Ettinger 2020 prediction accuracy, k=5: an expected word among the top 5 vocabulary tokens",
    "ettinger_cprag_sensitivity*": "Ettinger 2020 CPRAG: share of items with P(expected) > P(within-category) and "
                                   "> P(between-category) (_gap: both differences above 0.01; _h/_l: high/low constraint)",
    "ettinger_role_sensitivity*": "Ettinger 2020 ROLE: share of pairs with P(target | good order) > P(target | "
                                  "role reversal) (_gap: by more than 0.01)",
    "ettinger_role_top*_cloze_q*": "Ettinger 2020 ROLE: prediction accuracy at k=1 / k=5 per quartile (q1-q4) of the "
                                   "expected completion's human cloze (where the file has exp_cloze)",
    "ettinger_role_prob_diff": "Ettinger 2020 ROLE: mean P(target | good order) - P(target | role reversal) over "
                               "the pairs where both are defined",
    "ettinger_neg_*_sensitivity*": "Ettinger 2020 NEG: share of (item, polarity) cases whose true completion is more "
                                   "probable than the false one (_gap: by more than 0.01)",
    "ettinger_neg_nat_natural*": "Ettinger 2020 NEG-NAT, naturally licensed items (licensing Y): true more probable "
                                 "than false (_aff/_neg: affirmative/negated contexts)",
    "ettinger_neg_nat_less_natural*": "Ettinger 2020 NEG-NAT, less natural items (licensing N): true more probable "
                                      "than false (_aff/_neg: affirmative/negated contexts)",
    "ettinger_neg_*_aff*": "Ettinger 2020 NEG: share of items with P(true | affirmative) > P(false | affirmative) "
                           "(TA > FA; _gap: by more than 0.01)",
    "ettinger_neg_*_neg*": "Ettinger 2020 NEG: share of items with P(true | negated) > P(false | negated) "
                           "(TN > FN; _gap: by more than 0.01)",
    "ettinger_rows": "Ettinger rows (context, target) scored",
    "ettinger_rows_not_one_token": "Ettinger rows whose target is not one vocabulary token (misses, as her NaN)",
}
DIRECTIONS = {"ettinger_rows*": None}


@dataclass(frozen=True)
class EttingerReadings(Sweep):
    """Reads Ettinger sets (a unit is an ``EttingerSet``): one masked pass per distinct context."""

    batch_size: int = 32

    def setup(self, target: Target, data: Any) -> Target:
        return target

    def run(self, state: Target, units: list[Any]) -> list[dict[str, Any]]:
        return [read_set(state, eset, self.batch_size) for eset in units]


def add_ettinger(result: ProbeResult, sets: list[EttingerSet], readings: list[dict[str, Any]]) -> str:
    """Add every set's figures to ``result`` (metrics, ``details["ettinger"]``); return a one-line headline."""
    tables: dict[str, Any] = {}
    headline: list[str] = []
    rows = missing = 0
    for eset, reading in zip(sets, readings):
        prefix = f"ettinger_{eset.kind}"
        figures = {}
        for suffix, (ids, hits) in shares(eset, reading).items():
            result.add_share(f"{prefix}_{suffix}", hits, [f"{eset.name}:{i}" for i in ids])
            figures[suffix] = {"value": sum(hits) / max(len(hits), 1), "hits": sum(hits), "n": len(hits)}
        if eset.kind == "role":
            diff, pairs = role_prob_diff(eset, reading["probs"])
            result.add_metric(f"{prefix}_prob_diff", diff, True)
            figures["prob_diff"] = {"value": diff, "n": pairs}
            human, with_cloze = role_cloze_diff(eset)
            if human is not None:  # the humans' side of the same comparison: a property of the items
                figures["human_cloze_diff"] = {"value": human, "n": with_cloze}
        skipped = reading["not_one_token"]
        lost = [r for r in eset.rows if r.target in skipped]
        rows += len(eset.rows)
        missing += len(lost)
        tables[eset.name] = {
            "kind": eset.kind, "items": len({r.item for r in eset.rows}), "rows": len(eset.rows),
            "contexts": len(reading["top"]), "forward_passes": reading["passes"], "figures": figures,
            "not_one_token": [{"word": w, "reason": why, "rows": sum(r.target == w for r in eset.rows)}
                              for w, why in skipped.items()],
        }
        headline.append(_headline(eset, figures))
    result.add_metric("ettinger_rows", float(rows), kind="count")
    result.add_metric("ettinger_rows_not_one_token", float(missing), kind="count")
    result.details["ettinger"] = tables
    note = f"; {missing} of {rows} rows' targets not one token (misses)" if missing else ""
    return "Ettinger 2020: " + "; ".join(headline) + note


def _headline(eset: EttingerSet, figures: dict[str, Any]) -> str:
    def v(name: str) -> str:
        return f"{figures[name]['value']:.2f}" if name in figures and figures[name]["value"] is not None else "-"

    label = LABELS[eset.kind]
    if eset.kind.startswith("neg"):
        return f"{label} top-1 {v('top1')}, true>false affirmative {v('aff')} / negated {v('neg')}"
    return f"{label} top-5 {v('top5')}, sensitivity {v('sensitivity')}"


def summary_lines(tables: dict[str, Any]) -> dict[str, str]:
    """The per-set lines of the report's summary."""
    out = {}
    for name, t in tables.items():
        f = t["figures"]
        parts = [f"{k} {f[k]['hits']}/{f[k]['n']}" for k in ("top1", "top5", "sensitivity", "sensitivity_gap", "aff", "neg")
                 if k in f]
        if t["not_one_token"]:
            parts.append(f"{sum(x['rows'] for x in t['not_one_token'])} rows not one token")
        out[f"Ettinger {name}"] = ", ".join(parts)
    return out
