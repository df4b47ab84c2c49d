"""What a served endpoint's protocol is to the runner: the ``Codec`` protocol and the ``CodecError`` it raises.

A codec turns a batch of inputs (JSON-able dicts: ``{"text": ..., "text_pair": ...}`` or ``{"question": ...,
"context": ...}``) into the JSON body of one request, and the JSON body of the answer into one JSON-able output
per input. The protocols themselves (v1, v2, hf, plugins) live in ``endpoint_codecs``; ``EndpointRunner`` only
needs this shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from bertprobe.errors import CodecError

__all__ = ["Codec", "CodecError"]  # CodecError lives in bertprobe.errors: a codec plugin imports it without torch


@runtime_checkable
class Codec(Protocol):
    """A protocol's request and response shapes (``batch_size``, optional: the most inputs one request may carry;
    ``expects``, optional: the response shape in a few words, quoted when an answer does not fit it). A response
    that trips the codec (a KeyError, TypeError, IndexError, ValueError) reaches the user as a one-line CodecError
    naming the endpoint, ``expects`` and what came (``EndpointRunner``), as a CodecError the codec raises does."""

    name: str

    def infer_path(self, model: str) -> str:
        """The path inference requests are posted to, for the served model ``model``."""
        ...

    def request(self, items: Sequence[dict]) -> Any:
        """The JSON body of one request carrying ``items``."""
        ...

    def response(self, body: Any, items: Sequence[dict]) -> list[Any]:
        """One JSON-able output per item of ``items``, read from the answer's ``body`` (CodecError if it cannot be)."""
        ...
