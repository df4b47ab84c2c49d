"""One model's turn: every probe of the suite on it, each run and judged against its expectations."""

from __future__ import annotations

import random
import time
import traceback
from typing import Any

import numpy as np
import torch

from bertprobe.capabilities import TARGET
from bertprobe.errors import (
    DataError,
    ProbeError,
    SuiteError,
    TargetError,
)
from bertprobe.model.kernels import attention_kernels
from bertprobe.model.spec import ModelSpec
from bertprobe.params import params_to_dict
from bertprobe.probe import Probe, ProbeContext
from bertprobe.progress import reporting
from bertprobe.results import ProbeResult, policy
from bertprobe.run.session import Session
from bertprobe.suite.schema import ProbeSpec, Suite


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def judge(result: ProbeResult, spec: ProbeSpec, cls: type[Probe], task: Any = None, sections: Any = None) -> None:
    """Give ``result``'s metrics their meanings from the catalogue (where the probe gave none), and judge it against
    the suite's expectations and the probe's gating policy (``bertprobe.results.policy``):
    the probe's own defaults and key metrics plus what the section the model's ``task`` finds (``sections``: the
    run's ``Sections``, None: the built-in ones; no task: the probe's own alone) adds, so a section is judged by its
    own bounds and never by another's (the union over the sections is what ``validate`` and ``describe`` show,
    before a model loads)."""
    from bertprobe.plugins import builtin_sections

    found = None if task is None else (sections if sections is not None else builtin_sections()).find(cls.name, task)
    catalogue = cls.catalogue((found,) if found is not None else ())
    for name, metric in result.metrics.items():  # every report says what each metric means
        if not metric.description:
            metric.description = catalogue.meaning(name)
    policy.judge(result, spec.expect, spec.expect_off, catalogue.defaults, catalogue.key_metrics)


def run_probe(session: Session, spec: ProbeSpec, params: Any, model_spec: ModelSpec) -> ProbeResult:
    """Run one probe on one model; its own failures become an ``error`` result, input errors propagate."""
    suite = session.suite
    cls = session.plugins.probes.get(spec.probe)
    data_spec = spec.data or suite.data
    target = session.target_for(model_spec)
    name = model_spec.label
    result = ProbeResult(probe=spec.probe, id=spec.id, params=params_to_dict(params), model=name, seed=suite.seed)
    if cls.refuses_task(target.task, session.plugins.sections):  # a hub model: its task is known once it loads
        from bertprobe.suite.validate import task_refusal

        raise SuiteError(task_refusal(spec.id, cls, target.task, name, session.plugins))
    missing = cls.missing_requirements(target.capabilities)
    twin = getattr(target, "twin", None)  # a served model's checkpoint: what it lacks, the twin has
    ran_on = ""
    twin_runs = getattr(target, "twin_runs", frozenset())  # what the twin may stand in for (never the endpoint's scores)
    if missing and twin is not None and set(missing) <= twin_runs and not cls.missing_requirements(twin.capabilities):
        target, missing, ran_on = twin, [], f"run on the twin {target.spec.twin} (the endpoint lacks {', '.join(missing)})"
    if missing:
        result.status = "skipped"
        why = {**TARGET, **dict(getattr(target, "lacking", {}))}  # a served model says why it lacks each
        result.message = f"target {name} ({target.task.name}) lacks: " + ", ".join(
            f"{m} ({why[m]})" if m in why else m for m in missing)
        judge(result, spec, cls, target.task, session.plugins.sections)
        return result
    data = session.data_for(data_spec, target) if (cls.needs_data and data_spec) else None
    lacking = cls.missing_data(data.features) if data is not None else []
    if lacking:
        raise DataError(f"probe {spec.id}: data '{data_spec.describe()}' lacks {', '.join(lacking)}; "  # type: ignore[union-attr]
                        "give it data that has them (words and dependency layers come from a .conllu treebank)")

    def baseline_result() -> ProbeResult | None:
        if not session.baseline or session.baseline == name:
            return None
        return session.report.result(session.baseline, spec.id)

    progress = session.progress_for(name, spec.id)
    ctx = ProbeContext(
        seed=suite.seed,
        out_dir=session.run_dir,
        progress=progress,
        log=lambda msg: session.say(f"[{name}/{spec.id}] {msg}" if len(suite.models) > 1 else f"[{spec.id}] {msg}"),
        load_target=session.target_for,
        load_data=lambda s: session.data_for(s, None),
        resolve_model=session.resolve_model,
        baseline_result=baseline_result,
        model_name=name,
        probe_id=spec.id,
        predictions=lambda t, d, batch_size=None: session.caches.predictions(t, d, batch_size, progress),
        section=session.plugins.sections.find,
        map=lambda fn, units, desc="", group=0: session.map_units(name, spec.id, fn, units, desc, group,
                                                                    (model_spec, data_spec if cls.needs_data else None)),
    )
    seed_everything(suite.seed)
    start = time.perf_counter()
    try:
        # no cuDNN attention on CUDA: a plan per batch shape; the shared prediction helpers report progress
        with attention_kernels(target.device), reporting(progress):
            produced = cls().run(target, data, params, ctx)
    except (TargetError, DataError, SuiteError):
        raise
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # a broken probe must not end the run
        result.status = "error"
        result.message = f"{type(exc).__name__}: {exc}" if not isinstance(exc, ProbeError) else str(exc)
        session.emit("probe_traceback", id=spec.id, model=name, traceback=traceback.format_exc())
    else:
        produced.id, produced.probe, produced.model, produced.seed = spec.id, spec.probe, name, suite.seed
        produced.params = result.params
        if getattr(cls, "paper", ""):
            produced.details.setdefault("paper", cls.paper)
        if ran_on:
            produced.details["ran_on"] = ran_on
        if data is not None:  # what the small-sample warning reads where the probe counts no examples of its own
            produced.details.setdefault("data_examples", len(data))
        result = produced
    result.duration_s = time.perf_counter() - start
    judge(result, spec, cls, target.task, session.plugins.sections)
    return result


def model_probes(suite: Suite, position: int, model_spec: ModelSpec) -> list[tuple[ProbeSpec, ModelSpec]]:
    """The probes a model's turn runs, each with the model it runs on (a probe with its own model runs
    once, in the first model's turn)."""
    return [(spec, spec.model or model_spec) for spec in suite.probes if spec.model is None or position == 0]


def models_params_name(session: Session, plan: list[ModelSpec], params_by_probe: dict[str, Any],
                       start: int = 0) -> set[ModelSpec]:
    """The models that the probes' model params (``Probe.model_params``: behaviour's ``mlm``) name in the turns of
    ``plan`` (the run's turns from position ``start``), resolved as the probes resolve them: what the local executor
    keeps loaded between turns, so that such a model loads once per run; and the twins of the later served models
    (``endpoint.twin_spec``), so that a checkpoint that is also a baseline entry loads once."""
    from bertprobe.model.endpoint import twin_spec

    out: set[ModelSpec] = set()
    for position, model_spec in enumerate(plan, start=start):
        twin = twin_spec(model_spec) if model_spec.endpoint is not None else None
        if twin is not None:  # a served model's twin: the checkpoint a baseline entry may have loaded already
            out.add(twin)
        for spec, target_spec in model_probes(session.suite, position, model_spec):
            cls = session.plugins.probes.get(spec.probe) if spec.probe in session.plugins.probes else None
            for name in getattr(cls, "model_params", None) or {}:
                value = getattr(params_by_probe.get(spec.id), name, None)
                if isinstance(value, str) and value:
                    out.add(session.resolve_model(value, target_spec))
    return out


def run_model(session: Session, position: int, model_spec: ModelSpec, params_by_probe: dict[str, Any]) -> None:
    """One model's turn: every probe of the suite on it, each result recorded as it finishes.

    The same function runs in this process (``local``) and inside a worker (``ray``), where the
    session sends its events to the driver instead of writing them.
    """
    several = len(session.suite.models) > 1
    for spec, target_spec in model_probes(session.suite, position, model_spec):
        if (target_spec.label, spec.id) in session.state.kept:
            session.say(f"kept {spec.id}" + (f" on {target_spec.label}" if several else "") + " from the interrupted run")
            continue
        session.say(f"running {spec.id}" + (f" on {target_spec.label}" if several else ""))
        session.emit("probe_start", id=spec.id, probe=spec.probe, model=target_spec.label)
        session.record(run_probe(session, spec, params_by_probe[spec.id], target_spec))
