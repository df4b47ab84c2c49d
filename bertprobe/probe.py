"""The probe contract every built-in and third-party probe implements: ``Probe`` (what a probe declares and
runs), ``ProbeContext`` (what the harness lends it) and ``unit_seed``.

How its work runs lives beside it: ``Sweep``, ``run_chunks`` and ``map_in_process`` in ``bertprobe.execution``,
and one prediction pass, ``Predictions`` and ``predict_directly``, in the model wing (``bertprobe.model.predictions``,
which reads the task's meaning flags so that no probe does). ``Sweep`` and ``Predictions`` are re-exported here,
where plugins import them.
"""

from __future__ import annotations

import abc
import fnmatch
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from bertprobe.execution import Sweep, map_in_process
from bertprobe.params import NoParams
from bertprobe.results import Catalogue, DefaultExpectation, ProbeResult
from bertprobe.results.catalogue import DIRECTION_WORDS, merge

if TYPE_CHECKING:
    from bertprobe.data.dataset import Dataset, DataSpec
    from bertprobe.model.predictions import Predictions
    from bertprobe.model.spec import ModelSpec
    from bertprobe.model.target import Target

__all__ = ["Predictions", "Probe", "ProbeContext", "Sweep", "unit_seed"]


def __getattr__(name: str) -> object:
    """``Predictions`` (what ``ctx.predictions`` returns), re-exported from the model wing when first asked for."""
    if name == "Predictions":
        from bertprobe.model.predictions import Predictions

        return Predictions
    raise AttributeError(f"module 'bertprobe.probe' has no attribute {name!r}")


T = TypeVar("T")


def _no_progress(iterable: Iterable[T], **_: Any) -> Iterable[T]:
    return iterable


def unit_seed(seed: int, probe_id: str, key: str) -> int:
    """The seed of one work unit: derived from (suite seed, probe id, unit key), so a unit computes the
    same whether it runs in order, alone after a resume, or on another worker."""
    import hashlib

    return int(hashlib.sha256(f"{seed}:{probe_id}:{key}".encode()).hexdigest()[:8], 16)


def _predict_directly(target: Target, data: Dataset, batch_size: int | None = None, progress: Any = None) -> Predictions:
    """``ctx.predictions`` outside a run: ``bertprobe.model.predictions.predict_directly`` (imported when first
    called: importing the contract loads no model machinery)."""
    from bertprobe.model.predictions import predict_directly

    return predict_directly(target, data, batch_size, progress)


def _resolve_model(name_or_path: str, like: ModelSpec | None = None) -> ModelSpec:
    """``ctx.resolve_model`` outside a run: the harness's own resolution, with no matrix to name."""
    from bertprobe.model.spec import resolve_model_param

    return resolve_model_param(name_or_path, like)


def model_param_problem(where: str, value: str, what: str, why: str) -> str:
    """The one-line refusal of a model param (``Probe.model_params``) naming the wrong model: the same words from
    ``validate`` (before any weights load) and from a probe that checks the loaded model."""
    name = where.rsplit(".", 1)[-1]
    return f"{where}: '{value}' is not {what}: {why}; name one, or drop {name}"


@dataclass
class ProbeContext:
    """What the harness lends a running probe besides the target and the data.

    ``resolve_model(name_or_path, like)`` turns a param that names another model (``transfer_model``,
    ``compare_model``) into a ModelSpec: a model name of the run's matrix first, then a path or hub id
    (loaded on ``like``'s device and dtype). ``baseline_result()`` returns the matrix baseline's
    finished result of the running probe id (None on the baseline itself or in a one-model run).

    ``map(fn, units, desc="", group=0)`` runs a sweep of independent work units, ``units`` being
    ``(key, unit)`` pairs with keys unique within the probe, and returns ``fn(unit)`` for each, in order.
    With ``group=k``, ``fn`` takes a list of up to k units and returns one value per unit (so units can
    share forward passes); each value is still recorded, and resumed, per unit. ``fn`` must
    return JSON-able values (numbers, strings, lists, dicts), and the values come back as JSON gives them
    (tuples as lists). Under the harness each finished unit is recorded (a ``unit_result`` event), so a
    resumed run (``bertprobe run --resume``) continues a sweep instead of restarting it. Seed a unit
    with ``ctx.unit_seed(key)``, never with state shared across units. Give a bound ``Sweep`` instead of
    a closure and the run's executor may shard the units over workers (``--executor ray``).

    ``predictions(target, data, batch_size=None)`` returns the model's logits on the data (and the seconds
    the pass took): under the harness once per model and data fingerprint, so probes that read the same
    predictions (accuracy, calibration, slices) share one pass.
    """

    seed: int = 0
    out_dir: Path | None = None
    progress: Callable[..., Any] = _no_progress
    log: Callable[[str], None] = lambda message: None
    load_target: Callable[[ModelSpec], Target] | None = None
    load_data: Callable[[DataSpec], Dataset] | None = None
    resolve_model: Callable[..., ModelSpec] = _resolve_model
    baseline_result: Callable[[], ProbeResult | None] | None = None
    model_name: str = ""
    probe_id: str = ""
    map: Callable[..., list[Any]] = map_in_process
    predictions: Callable[..., Predictions] = _predict_directly
    section: Callable[[str, Any], Any] = field(default=None)  # type: ignore[assignment]
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.section is None:  # outside a run: the built-in sections
            from bertprobe.plugins import builtin_section

            self.section = builtin_section

    def unit_seed(self, key: str) -> int:
        """The seed of work unit ``key`` of this probe (see ``map``)."""
        return unit_seed(self.seed, self.probe_id, key)


def _section_list(probe: str, sections: Iterable[Any] | None) -> tuple[Any, ...]:
    """The sections a catalogue gathers from: a ``Sections`` registry's of ``probe`` in registration order, the
    built-in ones for None, or the section objects given (a run: the one its model's task finds)."""
    from bertprobe.plugins import builtin_sections
    from bertprobe.sections import Sections

    if sections is None:
        sections = builtin_sections()
    if isinstance(sections, Sections):
        return tuple(sections.of(probe))
    return tuple(s for s in sections if s is not None)


class _Sections:
    """Sections as a cache key: equal when the same objects, in order (a section, say a plugin's namespace object,
    need not be hashable)."""

    def __init__(self, items: tuple[Any, ...]) -> None:
        self.items = items

    def __hash__(self) -> int:
        return hash(tuple(id(item) for item in self.items))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Sections) and len(other.items) == len(self.items) \
            and all(a is b for a, b in zip(self.items, other.items))


@lru_cache(maxsize=256)
def _merged_catalogue(probe: type[Probe], sections: _Sections) -> Catalogue:
    """``Probe.catalogue``: a function of the probe class and the sections, so merged once per pair."""
    own = probe.metrics if isinstance(probe.metrics, Mapping) else dict.fromkeys(probe.metrics, "")
    parts = [Catalogue(own, probe.metric_directions, tuple(probe.defaults), tuple(probe.key_metrics))]
    parts += [part for section in sections.items if (part := getattr(section, "catalogue", None)) is not None]
    return merge(parts)


LEGACY_TASKS = frozenset({"classification", "multiple-choice", "masked-lm", "encoder"})
# what a model may or may not offer whatever its task: not known before it loads
MODEL_CAPABILITIES = frozenset({"attentions", "heads", "uniform-heads", "gradients", "input-gradients", "mask-token"})


class Probe(abc.ABC):
    """Base class of a probe.

    Subclasses set ``name`` (what a suite writes), ``description`` (one line for ``bertprobe list``),
    ``requires`` (target capabilities such as ``classifier``, ``mlm``, ``attentions``, ``gradients``: abilities,
    never a task, which ``tasks`` lists; and what the data must hold: ``data:labels``, ``data:words``,
    ``data:layer:head``; see ``Dataset.features``),
    ``metrics`` (metric names, fnmatch patterns allowed, that ``expect:`` may name), ``Params``
    (a frozen dataclass; the suite's ``params:`` are validated against it) and ``path_params`` (names of
    params that hold file paths, comma-separated or ``prefix:path`` allowed: relative ones written in
    a suite resolve against the suite file's folder, as ``model.path`` and ``data.path`` do).
    """

    name: ClassVar[str]
    description: ClassVar[str] = ""
    requires: ClassVar[frozenset[str]] = frozenset()
    # the tasks (``bertprobe.tasks``) whose outputs the probe reads correctly; a model of any other task is
    # refused before it loads. The default, for probes written before tasks were a layer, is the four tasks
    # bertprobe had then: such a probe never meets a multi-label model by accident.
    tasks: ClassVar[frozenset[str]] = LEGACY_TASKS
    needs_data: ClassVar[bool] = True
    data_optional: ClassVar[bool] = False  # runs without data too (gets the suite's data when it has some)
    paper: ClassVar[str] = ""  # the citation shown at the top of the probe's section in the report
    uses_baseline: ClassVar[bool] = False  # reads ctx.baseline_result(): parallel executors run the baseline first
    path_params: ClassVar[tuple[str, ...]] = ()  # params holding file paths: resolved against the suite's folder
    label_params: ClassVar[tuple[str, ...]] = ()  # params naming a class: checked against the model's config
    # params naming another model the probe loads (a matrix name, a path or a hub id): param -> (the capability that
    # model must offer, "" for none; what such a model is, in the refusal's words). ``validate`` checks each against
    # the model's config.json before any weights load (not the model under test; offering the capability), and the
    # local executor keeps it loaded across the matrix's models
    model_params: ClassVar[Mapping[str, tuple[str, str]]] = {}
    # metric (fnmatch pattern) -> higher_is_better, for `bertprobe describe`; reports take the direction
    # from each Metric the probe returns
    metric_directions: ClassVar[dict[str, bool | None]] = {}
    # metric names (fnmatch patterns) that ``expect:`` may name; a mapping gives each its meaning, which
    # `bertprobe describe` and the docs show. These four are the probe's own: what a section for one kind of model
    # writes in its place, the section declares (its ``catalogue``: ``bertprobe.sections``), and ``catalogue()``
    # merges both
    metrics: ClassVar[tuple[str, ...] | Mapping[str, str]] = ()
    # the gating policy: the bounds every metric matching a pattern must meet when the suite sets none of its
    # own (``expect: {METRIC: off}`` turns one off); each says why its threshold is what it is
    defaults: ClassVar[tuple[DefaultExpectation, ...]] = ()
    # the metrics (patterns) a reader looks at first: the report lists those that nothing gates as
    # "measured, not gated" (default: the patterns of ``defaults``)
    key_metrics: ClassVar[tuple[str, ...]] = ()
    Params: ClassVar[type] = NoParams

    @classmethod
    def catalogue(cls, sections: Iterable[Any] | None = None) -> Catalogue:
        """The probe's metric catalogue: its own ``metrics``, ``metric_directions``, ``defaults`` and
        ``key_metrics``, then what each of its sections writes in its place (a section's ``catalogue``), in the order
        they were registered. ``sections``: the run's registry (``Plugins.sections``), or the section objects to
        merge; None: the built-in sections. Known before any model loads: the union over the sections, whichever the
        model's task turns out to be (what ``validate`` and ``describe`` read); a run judges a model by
        ``catalogue((the section its task finds,))``."""
        return _merged_catalogue(cls, _Sections(_section_list(cls.name, sections)))

    @classmethod
    def metric_rows(cls, sections: Iterable[Any] | None = None) -> list[tuple[str, str, str]]:
        """``(metric, direction, meaning)`` of each metric of the catalogue, as ``bertprobe describe`` and the docs'
        probe pages show them; the direction comes from the first pattern of its directions that matches."""
        catalogue = cls.catalogue(sections)
        rows = []
        for metric, meaning in catalogue.metrics.items():
            higher = catalogue.direction(metric)
            rows.append((metric, DIRECTION_WORDS[None if higher == "unset" else higher], meaning))  # type: ignore[index]
        return rows

    @classmethod
    def named_labels(cls, params: Any, metrics: Sequence[str]) -> list[tuple[str, str]]:
        """``(where, name)`` for each class name this probe's suite entry gives (``params.target_label``), checked
        by ``validate`` against the model's classes from its config.json before any weights load. ``metrics``:
        the metrics its ``expect:`` names; ``params`` is None when they did not parse. The default reads
        ``label_params``; a probe that takes class names elsewhere (per-label metrics, templates) adds them."""
        out = []
        for name in cls.label_params:
            value = getattr(params, name, None)
            if isinstance(value, str) and not value.strip().isdigit():
                out.append((f"params.{name}", value))
        return out

    @classmethod
    def key_metric_patterns(cls, sections: Iterable[Any] | None = None) -> tuple[str, ...]:
        """The catalogue's key metrics: of the probe and of each section, its ``key_metrics``, else the patterns its
        gating policy covers."""
        return cls.catalogue(sections).key_metrics

    @classmethod
    def knows_metric(cls, name: str, sections: Iterable[Any] | None = None) -> bool:
        """Whether ``expect:`` may name this metric: one of the catalogue's (always true when the probe declares
        none of its own)."""
        return not cls.metrics or any(fnmatch.fnmatchcase(name, pat) for pat in cls.catalogue(sections).metrics)

    @classmethod
    def model_param_refusal(cls, name: str, task: Any, section_for: Callable[[str, Any], Any]) -> str | None:
        """Why param ``name`` (one of ``model_params``) cannot be used on a model of ``task`` (None: it can), with
        ``section_for(probe, task)`` the run's lookup: ``validate`` asks before any weights load, ``run`` before the
        probe starts. The default refuses nothing."""
        return None

    @classmethod
    def input_problems(cls, params: Any) -> list[str]:
        """What is wrong with the files ``params`` name (item sets, pair files): read before any weights load, by
        ``validate`` and by ``run``'s preflight, which list every probe's problems at once. One message per
        problem, naming the file and line and the fix. The default reads nothing."""
        return []

    @classmethod
    def tokenizer_problems(cls, params: Any, tokenizer: Any, max_length: int | None = None, seed: int = 0) -> list[str]:
        """What is wrong with ``params``' inputs for this model's ``tokenizer`` (no mask token, an item word the
        vocabulary lacks, a text longer than the ``max_length`` positions its config.json gives, None: unknown):
        asked by ``validate`` and ``run``'s preflight for each local model the probe runs on, with only its
        tokenizer loaded (never its weights), ``seed`` the suite's. One message per problem; the default finds
        none."""
        return []

    @classmethod
    def model_problems(cls, params: Any, model: Any) -> list[str]:
        """What ``params`` ask that ``model`` (a ``ModelSpec``: its runtime, device, dtype, endpoint) cannot give,
        known from the suite alone: asked by ``validate`` and ``run``'s preflight for each model the probe runs on,
        before anything loads. One message per problem, with the fix; the default finds none."""
        return []

    @classmethod
    def missing_requirements(cls, capabilities: frozenset[str] | set[str]) -> list[str]:
        """Target capabilities the probe requires and ``capabilities`` lacks (``data:`` needs aside)."""
        return sorted(r for r in set(cls.requires) - set(capabilities) if not r.startswith("data:"))

    @classmethod
    def supports_task(cls, task: Any, sections: Any = None) -> bool:
        """Whether the probe reads ``task``'s models: it lists the task in ``tasks``, or ``sections`` (the run's
        ``Sections``) hold a section of this probe registered for the task by name (a plugin's own task)."""
        if task.name in cls.tasks:
            return True
        entry = sections.entry(cls.name, task) if sections is not None else None
        return entry is not None and entry.task == task.name

    @classmethod
    def refuses_task(cls, task: Any, sections: Any = None) -> bool:
        """Whether a model of ``task`` (a ``Task`` class or instance) must be refused before it loads: the
        probe does not list the task, yet the task offers what the probe requires (so it would run, reading the
        outputs with the wrong meaning), or the task admits only the probes that list it (``listed_probes_only``).
        Otherwise a task lacking a requirement is skipped, as a missing capability is. A section of the probe
        registered for the task by name (``sections``: the run's) makes the probe support it. Capabilities are
        abilities, never a task's name: a task is supported through ``tasks`` or a section, never ``requires``."""
        if cls.supports_task(task, sections):
            return False
        if getattr(task, "listed_probes_only", False):
            return True
        offered = set(task.capabilities) | MODEL_CAPABILITIES
        return not cls.missing_requirements(offered)

    @classmethod
    def missing_data(cls, features: frozenset[str] | set[str]) -> list[str]:
        """What the probe requires of its data (``data:words``, ``data:layer:head``...) that ``features`` lacks."""
        return sorted(r for r in set(cls.requires) - set(features) if r.startswith("data:"))

    @abc.abstractmethod
    def run(self, target: Target, data: Dataset | None, params: Any, ctx: ProbeContext) -> ProbeResult:
        """Run against ``target`` and return metrics, findings and details (status is set later)."""
