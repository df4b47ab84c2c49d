"""``${VAR}`` in a text: the one expander of the suite's values and of a served model's headers.

``${VAR}`` is the variable's value (``unset(name)`` decides what an unset one does: usually an error naming it),
``${VAR:-default}`` the default where the variable is unset or empty, ``${VAR-default}`` the default where it is
unset only, as in a POSIX shell. Nothing else is expanded, and nothing is evaluated.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}")


def expand_vars(text: str, env: Mapping[str, str], unset: Callable[[str], str]) -> str:
    """``text`` with each ``${...}`` replaced from ``env`` (read with ``env.get``); ``unset(name)`` gives the text of
    a variable that is unset and has no default (or raises)."""

    def one(match: re.Match[str]) -> str:
        name, op, default = match.group(1), match.group(2), match.group(3)
        current = env.get(name)
        if op == ":-" and not current:
            return default
        if op == "-" and current is None:
            return default
        if current is None:
            return unset(name)
        return current

    return VAR.sub(one, text)


def defaults_in(text: str) -> list[str]:
    """The defaults written in ``text``'s ``${VAR:-default}``s and ``${VAR-default}``s (non-empty ones only)."""
    return [m.group(3) for m in VAR.finditer(text) if m.group(2) and m.group(3)]
