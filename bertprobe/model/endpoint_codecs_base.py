"""What a wire codec is (``Codec``) and how a response that does not fit is refused (``CodecError``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from bertprobe.errors import TargetError


class CodecError(TargetError):
    """A response whose shape does not fit the protocol: malformed, the wrong number of outputs, unknown labels."""


class Codec(Protocol):
    name: str

    def infer_path(self, model: str) -> str: ...

    def request(self, items: Sequence[dict[str, Any]]) -> Any: ...

    def response(self, body: Any, items: Sequence[dict[str, Any]]) -> list[Any]: ...
