"""Task ``ordinal`` and its section of the built-in ``accuracy`` probe: a worked example of extending a probe.

An ordinal classifier's classes are ordered (star ratings, severity levels: class ids 0 < 1 < 2 ...), so a
prediction one class off is less wrong than one four classes off, which accuracy alone does not say. The task
says what the outputs mean (a single-label classifier's, in order); the section says what accuracy measures for
it: the probe's own per-class audit, then the mean absolute error in classes and the share of predictions within
one class of the gold (a Wilson interval), gated by default. Nothing here edits bertprobe: the task registers
through ``bertprobe_register_tasks`` and the section through ``bertprobe_register_sections``. A suite picks the
task with ``model: {task: ordinal}`` (it is never detected from a config).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from bertprobe import ProbeResult, hookimpl
from bertprobe.probes.accuracy import classes
from bertprobe.results import Catalogue, DefaultExpectation
from bertprobe.stats import wilson_interval
from bertprobe.tasks import SingleLabelClassification


@dataclass(frozen=True)
class Ordinal(SingleLabelClassification):
    """A single-label classifier whose class ids are in order (0 < 1 < 2 ...)."""

    name: ClassVar[str] = "ordinal"
    description: ClassVar[str] = "ordinal classification: one class of several in order (star ratings; example plugin)"

    @classmethod
    def detect(cls, config: Any) -> bool:
        return False  # chosen by the suite (model.task: ordinal), never from a config


class OrdinalAccuracy:
    """The accuracy probe's section for ``ordinal`` models: what the probe calls (``audit``) and what it adds to
    the probe's metric catalogue (``catalogue``: names, directions, a default bound)."""

    catalogue = Catalogue(
        {"mean_absolute_error": "ordinal: mean distance in classes between the prediction and the gold",
         "within_one": "ordinal: share of predictions at most one class from the gold (Wilson interval)"},
        {"mean_absolute_error": False, "within_one": True},
        (DefaultExpectation("within_one", min=0.9, interval=True,
                            why="ordinal: a prediction two or more classes off is a grave error (a 1-star review "
                                "read as 3 stars); fewer than 9 in 10 within one class, surely, is not fit"),))

    def audit(self, result: ProbeResult, target: Any, data: Any, params: Any, ctx: Any) -> None:
        classes.audit(result, target, data, params, ctx)  # the probe's own per-class audit first
        logits = ctx.predictions(target, data, params.batch_size).logits  # the run's one shared pass
        distance = (target.task.predict(logits) - target.task.gold(data)).abs()
        within = int((distance <= 1).sum())
        result.add_metric("mean_absolute_error", float(distance.float().mean()), False,
                          "mean distance in classes between the prediction and the gold")
        result.add_metric("within_one", within / len(distance), True, "share of predictions within one class",
                          wilson_interval(within, len(distance), params.confidence))


@hookimpl
def bertprobe_register_tasks(registry: Any) -> None:
    registry.add(Ordinal)


@hookimpl
def bertprobe_register_sections(registry: Any) -> None:
    registry.add("accuracy", OrdinalAccuracy(), task=Ordinal.name)
