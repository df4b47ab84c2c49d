"""bertprobe: adversarial and robustness probes for fine-tuned BERT-family models."""

from bertprobe.hookspecs import hookimpl
from bertprobe.probe import Probe, ProbeContext
from bertprobe.results import Finding, Metric, ProbeResult, RunReport

__version__ = "0.1.0"

__all__ = ["Finding", "Metric", "Probe", "ProbeContext", "ProbeResult", "RunReport", "__version__", "hookimpl"]
