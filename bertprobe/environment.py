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
