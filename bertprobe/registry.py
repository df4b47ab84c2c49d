"""A named registry with collision checks and did-you-mean errors."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from bertprobe.errors import PluginError, SuiteError

T = TypeVar("T")


def did_you_mean(word: str, choices: list[str] | tuple[str, ...] | set[str]) -> str:
    """Return ' (did you mean 'x'?)' for the closest choice, or '' when nothing is close."""
    close = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    if not close and len(word) >= 4:  # 'trigger' -> 'universal-trigger': a part of exactly one name
        close = [c for c in sorted(choices) if word.lower() in c.lower()]
        close = close if len(close) == 1 else []
    return f" (did you mean '{close[0]}'?)" if close else ""


def check_keys(mapping: Any, allowed: tuple[str, ...], where: str, error: type[Exception], prefix: str = "") -> None:
    """Raise ``error`` naming the first key of ``mapping`` that is not ``allowed``, with a did-you-mean."""
    for key in mapping:
        if key not in allowed:
            raise error(f"{where}: unknown key '{prefix}{key}'{did_you_mean(str(key), allowed)}; "
                        f"keys: {', '.join(allowed)}")


class Registry(Generic[T]):
    """Maps names to items of one kind ("probe", "reporter", "dataset loader")."""

    def __init__(self, kind: str, check: Callable[[T, str], None] | None = None) -> None:
        self.kind = kind
        self.check = check  # called with (item, plugin name) before an item is registered
        self._items: dict[str, T] = {}
        self._origin: dict[str, str] = {}
        self.current_plugin: str = "?"

    def add(self, item: T, name: str | None = None) -> T:
        """Register ``item`` under ``name`` (default: its ``name`` attribute)."""
        key = name or getattr(item, "name", None)
        if not key or not isinstance(key, str):
            raise PluginError(f"{self.kind} {item!r} from plugin '{self.current_plugin}' has no name")
        if key in self._items:
            raise PluginError(
                f"{self.kind} '{key}' is registered twice: by plugin '{self._origin[key]}' "
                f"and by plugin '{self.current_plugin}'; disable one with BERTPROBE_DISABLE_PLUGINS"
            )
        if self.check is not None:
            self.check(item, self.current_plugin)
        self._items[key] = item
        self._origin[key] = self.current_plugin
        return item

    def get(self, name: str) -> T:
        """Return the item, or raise SuiteError naming the closest registered name."""
        try:
            return self._items[name]
        except KeyError:
            known = ", ".join(sorted(self._items)) or "none"
            raise SuiteError(
                f"unknown {self.kind} '{name}'{did_you_mean(name, list(self._items))}; known: {known}"
            ) from None

    def origin(self, name: str) -> str:
        """The plugin that registered ``name``."""
        return self._origin[name]

    def names(self) -> list[str]:
        return sorted(self._items)

    def in_order(self) -> list[T]:
        """The items in the order they were registered (the built-in plugins' first)."""
        return list(self._items.values())

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._items)
