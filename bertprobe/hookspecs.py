"""Every hook a bertprobe plugin may implement, grouped by phase.

A plugin is a module or object with functions decorated by ``bertprobe.hookimpl``. Third-party
plugins are found through the ``bertprobe`` entry-point group; built-ins use the same hooks. The markers
are in ``hookmarkers``; ``hookimpl`` is handed on here too, where plugins have always taken it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bertprobe.hookmarkers import PROJECT, hookimpl, hookspec  # noqa: F401  (hookimpl, PROJECT: handed on)

if TYPE_CHECKING:
    from bertprobe.model.spec import ModelSpec
    from bertprobe.model.target import Target
    from bertprobe.registry import Registry
    from bertprobe.results import ProbeResult, RunReport
    from bertprobe.sections import Sections



# ---- registration: called once while the plugin manager is built --------------------------------
@hookspec
def bertprobe_register_probes(registry: Registry[Any]) -> None:
    """Add Probe subclasses: ``registry.add(MyProbe)``. Names must be unique across plugins."""


@hookspec
def bertprobe_register_reporters(registry: Registry[Any]) -> None:
    """Add reporters: instances with ``name`` (what ``report.formats`` lists), ``filename`` (what they write
    in the run folder) and ``write(report, run_dir) -> Path``. A reporter runs only when its name is in
    the suite's ``report.formats``."""


@hookspec
def bertprobe_register_datasets(registry: Registry[Any]) -> None:
    """Add named data loaders, as instances with ``name``, ``description`` and ``load(spec) -> Dataset``
    (e.g. ``arct``); a suite picks one with ``data: {loader: NAME, path: ...}``. Raise ``DataError``
    for bad input."""


@hookspec
def bertprobe_register_executors(registry: Registry[Any]) -> None:
    """Add executors: classes (or instances) with ``name`` and the methods of
    ``bertprobe.executors.Executor``, constructed with an ``ExecutorSpec``. A suite picks one with
    ``executor: NAME`` (or ``--executor NAME``); ``local`` and ``ray`` are built in."""


@hookspec
def bertprobe_register_tasks(registry: Registry[Any]) -> None:
    """Add tasks: ``registry.add(MyTask)``, a ``bertprobe.tasks.Task`` subclass saying what a model's outputs
    mean (detection from the config, gold labels, activation, loss, correctness, confidence). A suite names
    one with ``model.task``; probes list the tasks they support in ``tasks``."""


@hookspec
def bertprobe_register_sections(registry: Sections) -> None:
    """Add what a probe runs for the models of one task (``bertprobe.sections``): ``registry.add(PROBE, SECTION,
    task=NAME)`` for a task of yours (or a built-in one), ``when=FLAG`` for every task that sets a meaning flag
    (how the built-in probes register theirs). ``SECTION`` holds what the probe calls (its docstring names the
    protocol) and optionally a ``catalogue`` of the metrics it writes; called after every probe has registered."""


@hookspec
def bertprobe_register_codecs(registry: Registry[Any]) -> None:
    """Add wire shapes for served models: ``registry.add(MyCodec)``, a class with ``name`` (what a suite writes as
    ``model.protocol``) built with keywords it accepts among ``model`` (the served name), ``labels``, ``outputs``,
    ``label_sets`` and ``reader``, whose instances answer ``infer_path(model)``, ``request(items)`` (a JSON body for
    a batch of inputs) and ``response(body, items)`` (one output per input, see ``bertprobe.model.endpoint_codecs``;
    ``CodecError`` for a response that does not fit), and optionally ``metadata(get)`` (a ``ServedModel``).
    ``v2``, ``v1`` and ``hf`` are built in."""


# ---- loading ------------------------------------------------------------------------------------
@hookspec(firstresult=True)
def bertprobe_load_target(spec: ModelSpec, tasks: Registry[Any], codecs: Registry[Any]) -> Target | None:
    """Load the model named by ``spec``, or return None to let the next plugin try. ``tasks`` holds the
    registered tasks (``bertprobe.tasks.resolve_task`` picks the model's; an implementation may ignore it);
    ``codecs`` the wire shapes of served models (``spec.endpoint``).

    The built-in Hugging Face loader runs last (``trylast``), so a plugin can serve its own formats.
    """


# ---- the run ------------------------------------------------------------------------------------
@hookspec
def bertprobe_session_start(session: Any) -> None:
    """The run begins: ``session`` has ``suite``, ``run_dir`` and ``report`` (still empty)."""


@hookspec
def bertprobe_probe_result(session: Any, result: ProbeResult) -> None:
    """One probe finished (passed, failed, skipped or error); results stream here as they come."""


@hookspec
def bertprobe_session_finish(session: Any, report: RunReport) -> None:
    """The run ended (completed, interrupted or aborted) and ``report`` is final."""
