"""bertprobe: adversarial and robustness probes for fine-tuned BERT-family models."""

from bertprobe.errors import BertprobeError, DataError, ProbeError, SuiteError, TargetError
from bertprobe.execution import Sweep
from bertprobe.hookspecs import hookimpl
from bertprobe.probe import Probe, ProbeContext
from bertprobe.results import Finding, Metric, Outcomes, ProbeResult, RunReport, example_ids
from bertprobe.version import __version__

__all__ = ["BertprobeError", "DataError", "Finding", "Metric", "ModelSpec", "Outcomes", "Probe", "ProbeContext",
           "ProbeError", "ProbeResult", "RunReport", "SuiteError", "Sweep", "Target", "TargetError", "__version__",
           "example_ids", "hookimpl", "load_target"]

_FROM_MODEL = ("ModelSpec", "Target", "load_target")  # the model wing, imported when first asked for


def __getattr__(name: str) -> object:
    if name in _FROM_MODEL:
        from bertprobe import model

        return getattr(model, name)
    raise AttributeError(f"module 'bertprobe' has no attribute {name!r}")
