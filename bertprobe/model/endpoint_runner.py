"""Inputs to per-input outputs of a served model: the response cache, deduplication, batches, the client, a codec.

``EndpointRunner.run(items)`` answers what the cache holds from it; the rest is deduplicated (an input asked twice
is sent once), cut into batches of the codec's ``batch_size`` (or the client's ``settings.batch_size``), posted
``concurrency`` at a time (``EndpointClient.post_all``), decoded by the codec (one output per input, or a
``CodecError``) and cached as each batch returns: an audit killed halfway keeps every answer it was given, and
resumed sends none of them again.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from bertprobe.model.endpoint_codecs_base import Codec, CodecError
from bertprobe.model.http_client import EndpointClient
from bertprobe.model.response_cache import ResponseCache

_DONE = object()


class EndpointRunner:
    """Inputs -> per-input outputs through a codec, the cache and the client.

    ``cache_scope`` is (endpoint URL, model name, served version, protocol[, routing headers' digest]): what, with
    the input, keys an answer (``ResponseCache.scoped_key``).
    ``progress``, optional, is called like ``bertprobe.progress.progress``: ``progress(iterable, total=, desc=)``
    over the batches as they are answered.
    """

    def __init__(self, client: EndpointClient, codec: Codec, cache: ResponseCache, cache_scope: tuple[str, ...],
                 progress: Callable[..., Any] | None = None) -> None:
        self.client = client
        self.codec = codec
        self.cache = cache
        self.cache_scope = tuple(str(part) for part in cache_scope)
        self.progress = progress
        self.sent_inputs = 0  # inputs sent over HTTP (and answered) by this runner
        self._lock = threading.Lock()

    @property
    def batch_size(self) -> int:
        """Inputs per request: the codec's ``batch_size`` where it has one, else the client's setting."""
        size = getattr(self.codec, "batch_size", None)
        return int(size) if size else self.client.settings.batch_size

    def run(self, items: Sequence[dict]) -> list[Any]:
        """One output per item, in order: from the cache where answered before, else from the endpoint."""
        scope = self.cache_scope
        keys = [ResponseCache.scoped_key(scope, item) for item in items]
        answers = self.cache.get_many(keys)
        todo: dict[str, dict] = {}
        for key, item in zip(keys, items):
            if key not in answers and key not in todo:
                todo[key] = item
        if todo:
            answers.update(self._send(list(todo.items())))
        return [answers[key] for key in keys]

    def _send(self, todo: list[tuple[str, dict]]) -> dict[str, Any]:
        """Post the unanswered inputs in batches; cache and return each batch's outputs as it comes back."""
        size = self.batch_size
        batches = [todo[start:start + size] for start in range(0, len(todo), size)]
        bodies = [self.codec.request([item for _, item in batch]) for batch in batches]
        path = self.codec.infer_path(self.cache_scope[1])
        fresh: dict[str, Any] = {}
        answered: queue.Queue[Any] = queue.Queue()

        def on_done(i: int, body: Any) -> None:
            batch = batches[i]
            inputs = [item for _, item in batch]
            outputs = self._decode(body, inputs)
            if not isinstance(outputs, list) or len(outputs) != len(batch):
                count = len(outputs) if isinstance(outputs, list) else f"a {type(outputs).__name__}, not a list, of"
                raise CodecError(f"endpoint {self.client.url}: the {self.codec.name} answer holds {count} outputs "
                                 f"for {len(batch)} inputs; the server must answer each input of a request once")
            done = {key: output for (key, _), output in zip(batch, outputs)}
            self.cache.put_many(done)  # committed now: a kill from here on loses none of this batch
            with self._lock:
                fresh.update(done)
                self.sent_inputs += len(batch)
            answered.put(i)

        if self.progress is None:
            self.client.post_all(path, bodies, on_done)
            return fresh
        return self._send_with_progress(path, bodies, on_done, answered, fresh)

    def _decode(self, body: Any, inputs: list[dict]) -> Any:
        """The codec's outputs for one answer; a shape it trips over (KeyError, TypeError...) is a one-line CodecError
        naming the endpoint, what the protocol expects and what came, as its own refusals are."""
        try:
            return self.codec.response(body, inputs)
        except CodecError as exc:
            text = self.client.scrub(_short(str(exc), 400)) if str(exc).strip() else type(exc).__name__
            raise CodecError(text if self.client.url in text else f"endpoint {self.client.url}: {text}") from None
        except (KeyError, TypeError, IndexError, ValueError, AttributeError) as exc:
            expected = getattr(self.codec, "expects", "") or "the protocol's response shape"
            raise CodecError(f"endpoint {self.client.url}: the {self.codec.name} answer to {len(inputs)} input(s) does "
                             f"not fit the protocol ({type(exc).__name__}: {_short(str(exc), 60)}): expected {expected}; "
                             f"got {_short(self.client.scrub(_json_text(body)), 120)}; check protocol: and outputs:") from None

    def _send_with_progress(self, path: str, bodies: list[Any], on_done: Callable[[int, Any], None],
                            answered: queue.Queue[Any], fresh: dict[str, Any]) -> dict[str, Any]:
        """``post_all`` in a helper thread while this one reports each batch answered through ``progress``."""
        failure: list[BaseException] = []
        cancel = threading.Event()

        def post() -> None:
            try:
                self.client.post_all(path, bodies, on_done, cancel=cancel)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, raised there
                failure.append(exc)
            finally:
                answered.put(_DONE)

        def arrivals() -> Iterator[int]:
            while (i := answered.get()) is not _DONE:
                yield i

        worker = threading.Thread(target=post, name="bertprobe-endpoint-post", daemon=True)
        worker.start()
        try:
            for _ in self.progress(arrivals(), total=len(bodies), desc=f"{self.codec.name} requests"):  # type: ignore[misc]
                pass
        except BaseException:
            cancel.set()
            worker.join()
            raise
        worker.join()
        if failure:
            raise failure[0]
        return fresh


def _json_text(body: Any) -> str:
    """A response body as one line of JSON (its repr where it is not JSON)."""
    import json

    try:
        return json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return repr(body)


def _short(text: str, limit: int) -> str:
    """``text`` on one line, cut at ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else f"{flat[:limit]}..."
