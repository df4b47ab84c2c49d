"""The suite wing: a suite file loaded (safe YAML, ``${VAR}`` expansion, paths), what it is once loaded
(``schema``), its checks before anything runs (``validate``) and the command line's overrides
(``overrides``)."""

from bertprobe.suite.load import apply_sets, interpolate, load_suite, parse_suite
from bertprobe.suite.schema import (
    DEFAULT_TOLERANCE,
    ExecutorSpec,
    GateSpec,
    ProbeSpec,
    Suite,
    unique_names,
)

__all__ = ["DEFAULT_TOLERANCE", "ExecutorSpec", "GateSpec", "ProbeSpec", "Suite", "apply_sets", "interpolate",
           "load_suite", "parse_suite", "unique_names"]
