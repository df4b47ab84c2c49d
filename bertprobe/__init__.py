"""bertprobe: adversarial and robustness probes for fine-tuned BERT-family models."""

from bertprobe.errors import BertprobeError, DataError, ProbeError, SuiteError, TargetError
from bertprobe.hookspecs import hookimpl
from bertprobe.outcomes import Outcomes
from bertprobe.probe import Probe, ProbeContext, Sweep
from bertprobe.results import Finding, Metric, ProbeResult, RunReport
from bertprobe.version import __version__

__all__ = ["BertprobeError", "DataError", "Finding", "Metric", "Outcomes", "Probe", "ProbeContext", "ProbeError",
           "ProbeResult", "RunReport", "SuiteError", "Sweep", "TargetError", "__version__", "hookimpl"]
