"""The behaviour probe's params (``BehaviourProbe.Params``), read by its own code and by each of its sections."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class BehaviourParams:
    """``cases``: JSONL files of cases. ``templates``: template tests (see ``templates.py``).
    ``perturbations``: names or mappings ``{name, variants, class, direction, tolerance, field}`` applied to
    the suite's data (default: the whole catalogue; ``[]`` turns them off). ``lexicons``: your own word
    lists by name (a built-in name replaces that list). ``max_cases``: cases per template test.
    ``max_examples``: data examples the perturbations see (a seeded sample). ``findings``: failing cases
    shown per test. ``bootstrap``: resamples of the fairness gaps' intervals (0: none; the failure
    rates' need none: Wilson's, on the effective sample size where a reader's cases share a context). On an extractive reader
    (``answers.py``): ``answer_metric`` (f1 or em) and ``answer_bar``, what an mft answer must score against its
    expected answers; ``builtin_templates``: the MFT templates after CheckList's SQuAD suite; ``origins``: their
    person templates again over surnames of each origin group.
    """

    cases: str | tuple[str, ...] = ()
    templates: tuple[dict[str, Any], ...] = ()
    perturbations: tuple[Any, ...] | None = None
    lexicons: dict[str, tuple[str, ...]] = field(default_factory=dict)
    max_cases: int = 100
    max_examples: int = 300
    findings: int = 5
    bootstrap: int = 1000
    batch_size: int | None = None  # examples per forward pass (default: sized to the device)
    answer_metric: str = "f1"  # extractive QA: an mft answer scored by SQuAD's F1 or em against its expected answers
    answer_bar: float = 0.8  # extractive QA: the score an mft answer must reach to pass
    builtin_templates: bool = True  # extractive QA: run the built-in MFT templates (after CheckList's SQuAD suite)
    origins: bool = True  # extractive QA: the person templates again over surnames of each origin group (fairness)

    def __post_init__(self) -> None:
        if self.max_cases < 1 or self.max_examples < 1:
            raise ValueError("max_cases and max_examples must be at least 1")
        if self.answer_metric not in ("f1", "em"):
            raise ValueError(f"answer_metric must be f1 or em, not {self.answer_metric!r}")
        if not 0.0 <= self.answer_bar <= 1.0:
            raise ValueError(f"answer_bar must lie in [0, 1], not {self.answer_bar}")
