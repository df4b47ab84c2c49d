"""``universal-trigger`` on a multi-label classifier (``label_sets``): one label's state turned off or on.

``target_label`` names the label attacked; ``direction: remove`` searches on the texts carrying it and pushes its
sigmoid below the model's threshold for it, ``add`` on the texts without it and above
(``attacks.goals.LabelStateGoal``, binary cross-entropy). The probe's own result reports it (accuracy: the share of
attacked held-out texts whose state of the label the model gets right).
"""

from __future__ import annotations

import random
from typing import Any, cast

from bertprobe.data.dataset import Dataset
from bertprobe.errors import ProbeError
from bertprobe.model.target import Target
from bertprobe.probes.attacks.goals import LabelStateGoal
from bertprobe.probes.universal_trigger.params import TriggerParams
from bertprobe.probes.universal_trigger.search import SearchState, attacked_labels, class_state, drawn, require_label
from bertprobe.tasks.multilabel import MultiLabelClassification


def search_state(target: Target, data: Dataset, params: TriggerParams, seed: int, progress: Any = None,
                 log: Any = None) -> SearchState:
    """The texts whose state of ``target_label`` the trigger should flip (seeded order, split into a search and a
    held-out part), the goal at the model's threshold for the label."""
    require_label(params)
    names = target.label_names
    label, to = attacked_labels(target, params, names)
    if to is not None:
        raise ProbeError("to_label does not apply to a multi-label model: set direction: add or remove")
    rng = random.Random(seed)
    add = params.direction == "add"
    attack = LabelStateGoal(label, add, float(cast(MultiLabelClassification, target.task).thresholds[label]))
    examples = drawn([ex for ex in data.examples if (label in (ex.label or ())) != add],  # type: ignore[operator]
                     params, rng, f"{'without' if add else 'with'} label '{names[label]}'")
    return class_state(target, examples, params, label, to, attack, rng, progress, log)
