"""The results wing: judging and recording a run.

``report`` holds what a run records (metrics, findings, expectations, results, the report folded from
events.jsonl); ``outcomes`` the per-example outcomes that paired gates read; ``policy`` how a probe's
result is judged when the suite says nothing; ``gates`` the paired comparison of a matrix; ``verdict``
the stated decision; ``exitcodes`` what the CLI returns; ``figures`` the figure specs (data, no drawing);
``catalogue`` what a probe's metrics mean, its own and what its tasks add.
This face hands on what probes and plugins build results from.
"""

from bertprobe.results.catalogue import Catalogue
from bertprobe.results.outcomes import Outcomes, example_ids
from bertprobe.results.report import (
    DefaultExpectation,
    Expectation,
    Finding,
    Metric,
    MetricDelta,
    ModelInfo,
    ProbeResult,
    RunReport,
    jsonable,
    read_events,
)

__all__ = ["Catalogue", "DefaultExpectation", "Expectation", "Finding", "Metric", "MetricDelta", "ModelInfo", "Outcomes",
           "ProbeResult", "RunReport", "example_ids", "jsonable", "read_events"]
