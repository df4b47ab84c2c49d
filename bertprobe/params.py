"""Validate a YAML mapping against a probe's frozen ``Params`` dataclass."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from bertprobe.errors import SuiteError
from bertprobe.registry import did_you_mean


@dataclasses.dataclass(frozen=True)
class NoParams:
    """For probes that take no parameters."""


def type_name(tp: Any) -> str:
    origin = get_origin(tp)
    if origin is Literal:
        return " | ".join(repr(a) for a in get_args(tp))
    if origin in (Union, types.UnionType):
        return " or ".join(type_name(a) for a in get_args(tp))
    if origin is not None:
        return f"{getattr(origin, '__name__', origin)}[{', '.join(type_name(a) for a in get_args(tp) if a is not Ellipsis)}]"
    return "null" if tp is type(None) else getattr(tp, "__name__", str(tp))


def coerce(value: Any, tp: Any, path: str) -> Any:
    """Return ``value`` checked against ``tp`` (ints widen to float, lists become tuples)."""
    origin = get_origin(tp)
    if tp is Any:
        return value
    if origin is Literal:
        if value in get_args(tp):
            return value
        choices = [str(a) for a in get_args(tp)]
        raise SuiteError(
            f"{path}: {value!r} is not one of {', '.join(choices)}{did_you_mean(str(value), choices)}"
        )
    if origin in (Union, types.UnionType):
        errors = []
        for arg in get_args(tp):
            try:
                return coerce(value, arg, path)
            except SuiteError as exc:
                errors.append(str(exc))
        raise SuiteError(f"{path}: expected {type_name(tp)}, got {value!r}")
    if tp is type(None):
        if value is None:
            return None
    elif tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif tp is str:
        if isinstance(value, str):
            return value
    elif origin in (list, tuple, typing.Sequence) or tp in (list, tuple):
        if isinstance(value, (list, tuple)):
            args = [a for a in get_args(tp) if a is not Ellipsis]
            item = args[0] if args else Any
            return tuple(coerce(v, item, f"{path}[{i}]") for i, v in enumerate(value))
    elif origin is dict or tp is dict:
        if isinstance(value, dict):
            args = get_args(tp)
            item = args[1] if len(args) == 2 else Any
            return {str(k): coerce(v, item, f"{path}.{k}") for k, v in value.items()}
    else:
        return value
    raise SuiteError(f"{path}: expected {type_name(tp)}, got {value!r}")


def parse_params(cls: type, raw: Any, path: str, problems: list[str] | None = None) -> Any:
    """Build ``cls`` from ``raw`` (a mapping or None); unknown keys and bad types raise SuiteError.

    With a ``problems`` list, each unknown key or bad value is appended to it and left out (its default
    stands), so that one pass reports them all; what cannot be built even so still raises.
    """
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise SuiteError(f"{path}: expected a mapping of parameters, got {type(raw).__name__}")
    hints = get_type_hints(cls)
    known = [f.name for f in dataclasses.fields(cls) if not f.metadata.get("internal")]  # not a suite's to set
    kwargs = {}
    for key, value in raw.items():
        try:
            if key not in known:
                allowed = ", ".join(known) or "none"
                raise SuiteError(f"{path}.{key}: unknown parameter{did_you_mean(str(key), known)}; allowed: {allowed}")
            kwargs[key] = coerce(value, hints[key], f"{path}.{key}")
        except SuiteError as exc:
            if problems is None:
                raise
            problems.append(str(exc))
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as exc:
        raise SuiteError(f"{path}: {exc}") from None


def params_to_dict(params: Any) -> dict[str, Any]:
    return dataclasses.asdict(params) if dataclasses.is_dataclass(params) else {}


def plain_text(doc: str) -> str:
    """A docstring for the terminal: RST double backticks and ``:role:`` markers dropped."""
    import re

    return re.sub(r":[a-z]+:`([^`]+)`", r"\1", doc).replace("``", "")


def param_docs(params_cls: type) -> dict[str, str]:
    """What each field of a Params dataclass means: the trailing ``# comment`` on its line in the class
    source, else a ``name: meaning`` line of the class docstring."""
    import inspect
    import io
    import re
    import tokenize

    names = [f.name for f in dataclasses.fields(params_cls)]
    out: dict[str, str] = {}
    try:
        source = inspect.getsource(params_cls)
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (OSError, TypeError, tokenize.TokenError, IndentationError):
        tokens = []
    line_names: dict[int, str] = {}
    for tok in tokens:
        if tok.type == tokenize.NAME and tok.start[1] == 4 and tok.string in names:
            line_names.setdefault(tok.start[0], tok.string)
        elif tok.type == tokenize.COMMENT and tok.start[0] in line_names:
            out.setdefault(line_names[tok.start[0]], tok.string.lstrip("# ").strip())
    doc = params_cls.__doc__ or ""
    for line in doc.splitlines():
        m = re.match(r"\s*(\w+)\s*:\s*(.+)", line)
        if m and m.group(1) in names:
            out.setdefault(m.group(1), m.group(2).strip())
    # prose docstrings: "``name``: meaning. ``other``: ..." (a meaning runs to the next ``name``:)
    flat = " ".join(doc.split())
    for m in re.finditer(r"``(\w+)``\s*:\s*(.+?)(?=[;.]?\s*``\w+``\s*:|\Z)", flat):
        if m.group(1) in names:
            out.setdefault(m.group(1), m.group(2).strip().rstrip(".;"))
    return out


def param_rows(params_cls: type) -> list[tuple[str, str, str, str]]:
    """``(name, type, default, meaning)`` of each field of a Params dataclass, as ``bertprobe describe``
    and the docs' probe pages show them (the default as its repr, or ``(required)``)."""
    try:
        hints = get_type_hints(params_cls)
    except Exception:  # a plugin's hint that does not resolve: show the annotation as written
        hints = {}
    meanings = param_docs(params_cls)
    rows = []
    for f in dataclasses.fields(params_cls):
        if f.default is not dataclasses.MISSING:
            default = repr(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            default = repr(f.default_factory())
        else:
            default = "(required)"
        rows.append((f.name, type_name(hints.get(f.name, f.type)), default, meanings.get(f.name, "")))
    return rows

