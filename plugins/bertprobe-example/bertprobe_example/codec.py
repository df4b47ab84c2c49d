"""A codec plugin: how bertprobe talks to a served model whose wire shape is none of the built-in ones.

This one speaks a plain JSON API of the kind teams write in FastAPI: ``POST /classify`` with
``{"texts": [...], "pairs": [...]}`` (pairs optional) answered by ``{"results": [{"probabilities": {NAME: p, ...}},
...]}``, one result per text. Register it through the hook and name it in a suite:

    model: {endpoint: "http://127.0.0.1:9000", protocol: example-json, labels: [negative, positive]}

A codec never executes or unpickles what a response holds: it reads JSON and raises ``CodecError`` (one line) for a
response that does not fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bertprobe import hookimpl
from bertprobe.errors import CodecError  # not bertprobe.model: listing plugins imports no torch


@dataclass
class ExampleJsonCodec:
    """``POST /classify``: texts in, a probability per class name out."""

    model: str = ""
    labels: tuple[str, ...] = ()
    name: str = "example-json"

    def infer_path(self, model: str | None = None) -> str:
        return "/classify"

    def request(self, items: Sequence[dict[str, Any]]) -> Any:
        body: dict[str, Any] = {"texts": [i["text"] for i in items]}
        if any(i.get("text_pair") is not None for i in items):
            body["pairs"] = [i.get("text_pair") or "" for i in items]
        return body

    def response(self, body: Any, items: Sequence[dict[str, Any]]) -> list[Any]:
        results = body.get("results") if isinstance(body, dict) else None
        if not isinstance(results, list) or len(results) != len(items):
            raise CodecError(f"example-json: expected 'results', one per text ({len(items)}), got {str(body)[:80]!r}")
        out = []
        for r in results:
            probs = r.get("probabilities") if isinstance(r, dict) else None
            if not isinstance(probs, dict) or set(probs) != set(self.labels):
                raise CodecError(f"example-json: a result's classes {sorted(probs or {})} are not the model's "
                                 f"({', '.join(self.labels)}); set model.labels")
            out.append({"scores": [float(probs[name]) for name in self.labels], "kind": "probabilities"})
        return out


@hookimpl
def bertprobe_register_codecs(registry: Any) -> None:
    registry.add(ExampleJsonCodec)
