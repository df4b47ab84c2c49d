"""``backdoor-scan`` on a multi-label classifier (``label_sets``): a unit is one label's state, turned on where it is
off (``LABEL:add``) or off where it is on (``LABEL:remove``), at the model's threshold for the label
(``attacks.goals.LabelStateGoal``); the texts scanned are those whose state of it the model gets right.
"""

from __future__ import annotations

from typing import Any, cast

from bertprobe.data.dataset import Dataset
from bertprobe.errors import ProbeError
from bertprobe.model.target import Target
from bertprobe.probes.attacks.goals import LabelStateGoal
from bertprobe.probes.attacks.vocabulary import resolve_label
from bertprobe.tasks.multilabel import MultiLabelClassification


def parse_label_states(pairs: tuple[str, ...], names: list[str], label_map: Any = None) -> list[tuple[int, int]]:
    """The (label, add) units to scan, from ``label:add`` / ``label:remove`` (default: every label, turned on where
    it is off and off where it is on)."""
    if not pairs:
        return [(c, add) for c in range(len(names)) for add in (1, 0)]
    out = []
    for pair in pairs:
        label, _, way = pair.partition(":")
        if way.strip() not in ("add", "remove"):
            raise ProbeError(f"pair {pair!r}: on a multi-label model a pair is LABEL:add or LABEL:remove")
        out.append((resolve_label(label.strip(), names, "pair label", label_map), int(way.strip() == "add")))
    return out


def units(params: Any, names: list[str], label_map: Any = None) -> list[tuple[int, int]]:
    """The units of the scan (``parse_label_states`` of ``pairs``); a ``reference_model`` is refused."""
    found = parse_label_states(params.pairs, names, label_map)
    if params.reference_model:
        raise ProbeError("reference_model is measured for single-label models only; leave it out on a multi-label model")
    return found


def unit_names(names: list[str], label: int, add: int) -> tuple[str, str]:
    """How a unit's source and target read: the label's states (``toxic off`` -> ``toxic on``)."""
    return (f"{names[label]} off", f"{names[label]} on") if add else (f"{names[label]} on", f"{names[label]} off")


def correct(target: Target, data: Dataset, params: Any, progress: Any = None) -> dict[str, Any]:
    """What every unit needs: per label, whether the model gets each example's state of it right."""
    task = cast(MultiLabelClassification, target.task)
    logits = target.logits(data.examples, params.batch_size, progress=progress)
    right = (task.predict(logits) == task.gold(data)).T  # labels x examples
    return {"correct_states": right.tolist()}


def pool(target: Target, data: Dataset, state: dict[str, Any], label: int, add: int) -> tuple[LabelStateGoal, list[int]]:
    """The goal of unit (``label``, ``add``) and the texts it scans: those whose state of the label is the source's
    and that the model gets right."""
    attack = LabelStateGoal(label, bool(add), float(cast(MultiLabelClassification, target.task).thresholds[label]))
    right = state["correct_states"][label]
    return attack, [i for i, ex in enumerate(data.examples) if (label in ex.label) != bool(add) and right[i]]
