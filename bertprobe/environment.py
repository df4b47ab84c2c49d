"""The machine and software a run executes on: usable cores, torch threads, library versions."""

from __future__ import annotations

import os
import platform

import torch

from bertprobe.version import __version__


def env_flag(name: str) -> bool:
    """Whether the environment variable ``name`` is set to a yes: 1, true, yes or on (any case)."""
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS has one, else the CPU count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def default_threads() -> int:
    """torch's thread count, capped at the usable cores."""
    return max(1, min(torch.get_num_threads(), usable_cores()))


def busy_note(threads: int, load: float | None = None, cores: int | None = None) -> str:
    """A warning when this run's ``threads`` plus what already runs (the 1-minute load average) exceed the usable
    cores: a loaded 2-core host ran 2.4x slower at 2 threads than at 1, and its examples/s compared builds unfairly.
    Empty when the machine has room (or tells no load)."""
    if load is None:
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):
            return ""
    cores = cores or usable_cores()
    if load + threads <= cores + 1:  # a full core more than the machine has: the load average lags a little
        return ""
    fewer = max(1, int(cores - load + 0.5))
    advice = f"pass --threads {fewer}, or run on a quiet machine" if fewer < threads else "run on a quiet machine"
    return (f"the machine was busy when the run started (load {load:.1f} on {cores} cores, with {threads} threads of "
            f"this run): timings and examples/s are slowed and not comparable with a quiet run's; {advice}")


def package_version(name: str) -> str:
    """An installed package's version from its metadata, without importing it (``datasets`` takes a second);
    the module's ``__version__`` when there is no metadata (a source checkout on the path)."""
    import importlib
    import importlib.metadata

    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return str(getattr(importlib.import_module(name), "__version__", "?"))


def versions() -> dict[str, str]:
    """The versions a run records in its ``run_start`` event."""
    return {
        "bertprobe": __version__,
        "torch": torch.__version__,
        "transformers": package_version("transformers"),
        "datasets": package_version("datasets"),
        "python": platform.python_version(),
    }
