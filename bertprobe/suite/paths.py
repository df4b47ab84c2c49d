"""Where relative paths point.

A path written in a suite file, including the default of a ``${VAR:-default}``, resolves against the
suite file's folder, so a suite runs the same from any directory. A path that came from a flag or from
an environment variable's value resolves against the current directory, as the user typed it.

Only values that look local are touched: ``./x`` and ``../x``, and names that exist beside the suite
file. Hub ids (``org/name``), absolute paths and ``~`` are left alone. A value may carry a loader prefix
(``ettinger:../data``) and hold several comma-separated paths.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bertprobe.variables import VAR as _VAR

_PREFIX = re.compile(r"^([A-Za-z][A-Za-z0-9_-]+):(?!//)")


def from_env(raw: Any, env: Mapping[str, str]) -> bool:
    """Whether ``raw`` (a value as written in the YAML) is one ``${VAR...}`` that the environment set."""
    if not isinstance(raw, str):
        return False
    text = _PREFIX.sub("", raw.strip(), count=1)
    match = _VAR.fullmatch(text)
    if not match:
        return False
    name, op = match.group(1), match.group(2)
    current = env.get(name)
    return bool(current) if op == ":-" else current is not None


def _resolve_one(value: str, base: Path, always: bool) -> str:
    text = value.strip()
    if not text or text.startswith(("/", "~")) or "://" in text:
        return value
    explicit = text in (".", "..") or text.startswith(("./", "../", ".\\", "..\\"))
    if always or explicit or (base / text).exists():
        return os.path.normpath(base / text)
    return value


def resolve_path_value(value: Any, base: Path, always: bool = False) -> Any:
    """Resolve a path (or comma-separated paths, or a ``prefix:path``, or a list of those) against ``base``."""
    if isinstance(value, (list, tuple)):
        return type(value)(resolve_path_value(v, base, always) for v in value)
    if not isinstance(value, str):
        return value
    prefix = ""
    match = _PREFIX.match(value)
    if match and not (len(match.group(1)) == 1):  # "C:" is a drive, not a prefix
        prefix, value = match.group(0), value[match.end():]
    parts = [_resolve_one(part, base, always) for part in value.split(",")]
    return prefix + ",".join(parts)


def resolve_in(doc: dict[str, Any], raw: Any, key: str, base: Path, env: Mapping[str, str], always: bool = False) -> None:
    """Resolve ``doc[key]`` in place unless its raw YAML value came from an environment variable."""
    if key not in doc:
        return
    raw_value = raw.get(key) if isinstance(raw, dict) else None
    if isinstance(doc[key], list) and isinstance(raw_value, list):
        doc[key] = [v if from_env(r, env) else resolve_path_value(v, base, always)
                    for v, r in zip(doc[key], raw_value + [None] * (len(doc[key]) - len(raw_value)))]
        return
    if from_env(raw_value, env):
        return
    doc[key] = resolve_path_value(doc[key], base, always)
