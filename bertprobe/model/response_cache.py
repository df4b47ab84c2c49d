"""An endpoint's answers per input, kept in the run folder: a resumed or repeated audit never sends an input twice.

A key is the sha256 of the endpoint's URL, the served model's name and version, the protocol, the routing headers'
digest and the input's canonical JSON (sorted keys, no spaces): two probes or two runs asking the same input of
the same served model share one answer; a new served version asks anew; two entries at one URL whose headers route
to different models (``Host:``, ``x-model-version``) never share one. The headers enter as one sha256 of their
lower-cased names and expanded values (``headers_digest``; credentials such as ``Authorization`` are left out by
the caller: they authenticate, they do not route, and a rotated token keeps the cache), so no header value, token
or digest of a token is stored: the file holds keys and answers only. Values are JSON text (never pickle) in one sqlite3 table; each ``put_many`` is committed before it
returns, so a run killed right after loses nothing it was answered. One connection behind a lock: safe to share
between threads (``EndpointClient.post_all``'s workers).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Self

from bertprobe.errors import TargetError, first_line

CHUNK = 500  # keys per SELECT (under sqlite's limit on bound parameters)
SCHEMA = "CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, value TEXT NOT NULL)"


def canonical_json(value: Any) -> str:
    """One text per JSON value: sorted keys, no spaces, non-ASCII kept as it is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def headers_digest(headers: Mapping[str, str]) -> str:
    """One sha256 of ``headers``' lower-cased names and their values as sent (empty for no headers): what routes a
    request, in a key, without the values themselves."""
    if not headers:
        return ""
    pairs = sorted((str(name).strip().lower(), str(value)) for name, value in headers.items())
    return hashlib.sha256(canonical_json(pairs).encode("utf-8")).hexdigest()


class ResponseCache:
    """Answers per input, keyed by sha256 of (endpoint URL, model name, served version, protocol, canonical input,
    and the routing headers' digest where there are any)."""

    def __init__(self, file: Path | None) -> None:
        self.file = Path(file) if file is not None else None
        self._lock = threading.Lock()
        where = ":memory:"
        if self.file is not None:
            try:
                self.file.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise TargetError(f"response cache {self.file}: cannot create its folder ({first_line(exc)})") from None
            where = str(self.file)
        try:
            self._db = sqlite3.connect(where, check_same_thread=False, timeout=30.0)
            with self._db:
                self._db.execute(SCHEMA)
        except sqlite3.Error as exc:
            raise TargetError(f"response cache {self.file}: not a readable cache ({first_line(exc)}); "
                              "delete it to start afresh") from None

    @staticmethod
    def key(endpoint: str, model: str, version: str, protocol: str, item: Any, headers: str = "") -> str:
        """The key of one input's answer (``endpoint`` should carry no secrets: it is hashed, never stored);
        ``headers`` is ``headers_digest`` of the routing headers (empty: none, and the key is as before they counted)."""
        parts = [str(endpoint), str(model), str(version), str(protocol), item]
        if headers:
            parts.append(str(headers))
        try:
            text = canonical_json(parts)
        except (TypeError, ValueError) as exc:
            raise TargetError(f"response cache: an input is not JSON ({first_line(exc)})") from None
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    @staticmethod
    def scoped_key(scope: Sequence[str], item: Any) -> str:
        """``key`` for a scope of (endpoint, model, version, protocol[, headers digest]): what a runner holds."""
        return ResponseCache.key(*scope[:4], item, headers=scope[4] if len(scope) > 4 else "")

    def get_many(self, keys: Sequence[str]) -> dict[str, Any]:
        """The answers held for ``keys`` (keys without one are absent)."""
        wanted = list(dict.fromkeys(keys))
        found: dict[str, Any] = {}
        with self._lock:
            try:
                for start in range(0, len(wanted), CHUNK):
                    chunk = wanted[start:start + CHUNK]
                    marks = ",".join("?" * len(chunk))
                    rows = self._db.execute(f"SELECT key, value FROM answers WHERE key IN ({marks})", chunk)
                    found.update((k, json.loads(v)) for k, v in rows)
            except (sqlite3.Error, ValueError) as exc:
                raise TargetError(f"response cache {self.file}: unreadable ({first_line(exc)}); "
                                  "delete it to start afresh") from None
        return found

    def put_many(self, items: Mapping[str, Any]) -> None:
        """Store answers by key, committed before returning (TargetError for a value that is not JSON)."""
        if not items:
            return
        try:
            rows = [(str(k), canonical_json(v)) for k, v in items.items()]
        except (TypeError, ValueError) as exc:
            raise TargetError(f"response cache: an answer is not JSON ({first_line(exc)})") from None
        with self._lock:
            try:
                with self._db:
                    self._db.executemany("INSERT OR REPLACE INTO answers (key, value) VALUES (?, ?)", rows)
            except sqlite3.Error as exc:
                raise TargetError(f"response cache {self.file}: cannot write ({first_line(exc)})") from None

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM answers").fetchone()[0])

    def close(self) -> None:
        """Close the file (what was put is already committed)."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
