"""Exception hierarchy. Every user-facing failure is a BertprobeError with a one-line message."""

from __future__ import annotations

import re
from typing import Any


class BertprobeError(Exception):
    """Base class: the CLI prints the message on one line and exits with code 2."""


class SuiteError(BertprobeError):
    """The suite file is missing, malformed, or names something unknown."""


class TargetError(BertprobeError):
    """The model cannot be loaded (missing path, hub unreachable, unsafe weights, unknown task)."""


class CodecError(TargetError):
    """A served model's response whose shape does not fit its protocol: malformed, the wrong number of outputs,
    unknown labels (``bertprobe.model.endpoint_codecs``)."""


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


ROW_LIMIT = 20  # distinct problems of bad data rows listed one by one; the rest are counted
# a bad row's place in a message: "line 12 of f" (a file's line) or "question 56be4db0 of f" (a SQuAD question's id)
_ROW = re.compile(r"\bline (\d+)\b|\bquestion (\S+) of ")


class Problems:
    """What checks that keep going have found: each appends, and ``raise_if_any`` raises once, listing them all.

    A problem is a message and the error type it would have raised alone. ``suite`` problems name a YAML path
    or a ``--set`` of the suite file and get its name in front when they are reported alone.
    """

    def __init__(self) -> None:
        self.items: list[tuple[str, type[BertprobeError], bool]] = []

    def __len__(self) -> int:
        return len(self.items)

    def __bool__(self) -> bool:
        return bool(self.items)

    def add(self, message: str, kind: type[BertprobeError] = SuiteError, suite: bool = False) -> None:
        """Record a problem; one already recorded (alone, or after a ``WHERE: `` prefix) is not repeated."""
        for known, _, _ in self.items:
            if message == known or known.endswith(f": {message}") or message.endswith(f": {known}"):
                return
        self.items.append((message, kind, suite))

    def add_error(self, exc: BertprobeError, suite: bool = False) -> None:
        """An error a check raised: each problem it lists (``exc.problems``), else its message."""
        listed = getattr(exc, "problems", None)
        if listed:
            for problem in listed:
                self.add(problem, type(exc))
        else:
            self.add(str(exc), type(exc), suite)

    def attempt(self, check: Any, *args: Any, **kwargs: Any) -> Any:
        """``check(*args, **kwargs)``, or None with its BertprobeError recorded."""
        try:
            return check(*args, **kwargs)
        except BertprobeError as exc:
            self.add_error(exc)
            return None

    @property
    def messages(self) -> list[str]:
        return [m for m, _, _ in self.items]

    def raise_if_any(self, source: str = "") -> None:
        """Raise the one problem as it would have been raised alone, or one error listing them all (its
        ``problems`` attribute holds them, one message each, for the CLI to number one per line)."""
        if not self.items:
            return
        if len(self.items) == 1:
            message, kind, suite = self.items[0]
            raise kind(f"{source}: {message}" if suite and source else message)
        raise problems_error(self.messages, self.items[0][1], source)


def problems_error(messages: list[str], kind: type[BertprobeError] = SuiteError, source: str = "") -> BertprobeError:
    """One error listing several problems: its message is one line ``SOURCE: N problems: (1) ...; (2) ...``
    (logs, reports), and ``problems`` / ``headline`` let the CLI print them numbered, one per line."""
    head = f"{source}: {len(messages)} problems" if source else f"{len(messages)} problems"
    exc = kind(f"{head}: " + "; ".join(f"({i}) {m}" for i, m in enumerate(messages, 1)))
    exc.problems = list(messages)  # type: ignore[attr-defined]
    exc.headline = head  # type: ignore[attr-defined]
    return exc


class RowProblems:
    """Bad rows of one data file, raised once as a DataError: rows with the same problem (the same message but for
    its line number, or its question id in SQuAD JSON) are one item, ``label 'LOC|ORG' on lines 114, 124, 131 and
    48 more of test.tsv ...``, ``questions q1, q7 and q9 of dev.json: the question is empty``; the first ``limit``
    distinct problems are listed and the rest counted."""

    SHOWN_LINES = 3  # line numbers named per problem; the rest are counted

    def __init__(self, limit: int = ROW_LIMIT) -> None:
        self.limit = limit
        self.groups: dict[str, list[str]] = {}  # message with '{line}' for its line number -> the line numbers
        self.counts: dict[str, int] = {}
        self.more = 0  # rows with problems past the first ``limit`` distinct ones

    def add(self, message: str) -> None:
        match = _ROW.search(message)
        group = None if match is None else 1 if match.group(1) is not None else 2
        key = message if match is None else f"{message[:match.start(group)]}{{line}}{message[match.end(group):]}"
        if key not in self.groups and len(self.groups) >= self.limit:
            self.more += 1
            return
        lines = self.groups.setdefault(key, [])
        self.counts[key] = self.counts.get(key, 0) + 1
        if match is not None and len(lines) < self.SHOWN_LINES:
            lines.append(match.group(group))

    @property
    def messages(self) -> list[str]:
        """One message per distinct problem, naming its rows."""
        out = []
        for key, lines in self.groups.items():
            count = self.counts[key]
            if "{line}" not in key or count == 1:
                out.append(key.replace("{line}", lines[0]) if lines else key)
                continue
            rest = count - len(lines)
            named = ", ".join(lines[:-1]) + (f", {lines[-1]} and {rest} more" if rest else f" and {lines[-1]}")
            out.append(key.replace("line {line}", f"lines {named}", 1).replace("question {line} of", f"questions {named} of", 1)
                       .replace("{line}", named, 1))
        return out

    def __bool__(self) -> bool:
        return bool(self.groups)

    def raise_if_any(self) -> None:
        if not self.groups:
            return
        messages = self.messages
        if self.more:
            messages.append(f"and {self.more} more row{'' if self.more == 1 else 's'} with other problems "
                            f"(the first {self.limit} are listed)")
        if len(messages) == 1:
            raise DataError(messages[0])
        raise problems_error(messages, DataError)
