"""Exception hierarchy. Every user-facing failure is a BertprobeError with a one-line message."""

from __future__ import annotations


class BertprobeError(Exception):
    """Base class: the CLI prints the message on one line and exits with code 2."""


class SuiteError(BertprobeError):
    """The suite file is missing, malformed, or names something unknown."""


class TargetError(BertprobeError):
    """The model cannot be loaded (missing path, hub unreachable, unsafe weights, unknown task)."""


class DataError(BertprobeError):
    """The data cannot be loaded or does not fit the model (missing file or column, unknown label)."""


class ProbeError(BertprobeError):
    """A probe cannot run with the given parameters or data."""


class PluginError(BertprobeError):
    """A plugin is broken: unknown hook implementations, name collisions."""


class InternalError(Exception):
    """A bug in bertprobe or a plugin stopped the run: the report says ``aborted``; exit code 3."""


def first_line(error: BaseException | str | None, default: str = "") -> str:
    """The first non-blank line of an exception's message (or of a text), for one-line errors.

    ``default`` stands in for an empty message; pass ``type(exc).__name__`` where the type must show.
    """
    text = str(error if error is not None else "").strip()
    return text.splitlines()[0].strip() if text else default
