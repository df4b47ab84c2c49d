"""Before a run folder exists: does a served model answer? (``readiness_problem``; the preflight's
``bertprobe.suite.validate.check_endpoints`` asks it of each served model of the suite, all at once in threads.)

Each distinct endpoint is asked once, as its codec asks when it loads (v2: ``GET /v2/health/ready`` and the model's
metadata; v1: the model's metadata; hf: ``GET /info``; an hf reader, whose metadata sends nothing: ``GET /health``,
any 2xx; a plugin codec without ``metadata``: any HTTP answer at its base URL), with a short timeout per read
(``READY_TIMEOUT_S``), no retries, and a deadline for the whole check (``READY_DEADLINE_S``: a server trickling
bytes, each read within the timeout, does not hold it longer). An endpoint that does not answer, or answers what
its codec refuses (a wrong ``served_name:`` or protocol), is one problem naming its URL and the fix; a server that
answers what the run's client retries (``http_client.RETRY_STATUSES``: 429, 500, 502, 503, 504) passes: the run's
retries and backoff wait for it. Nothing imports this module (nor httpx) unless a model is served.
"""

from __future__ import annotations

import threading
from typing import Any

from bertprobe.errors import CodecError, TargetError, first_line
from bertprobe.model.spec import ModelSpec

READY_TIMEOUT_S = 5.0  # per read of the check: a server that does not answer in this is not up
READY_DEADLINE_S = 15.0  # the whole check of one endpoint (its two or three requests), however the bytes trickle


def readiness_problem(spec: ModelSpec, codecs: Any = None, label_sets: bool = False, reader: bool = False,
                      timeout_s: float = READY_TIMEOUT_S, deadline_s: float = READY_DEADLINE_S) -> str | None:
    """What stops ``spec``'s endpoint from being audited now (one line, no secrets), or None when it answers;
    ``codecs`` is the plugins' codec registry, ``label_sets`` and ``reader`` the task's shape where known. The
    requests run in a daemon thread given ``deadline_s`` in all: past it the client is closed and the problem says so."""
    from bertprobe.model.endpoint import INSTALL, headers_from_env
    from bertprobe.model.endpoint_codecs import make_codec

    url = str(spec.endpoint).rstrip("/")
    try:
        from bertprobe.model.http_client import ClientSettings, EndpointClient
    except ImportError:
        return f"model {spec.label} is served at {url}; auditing an endpoint needs httpx: {INSTALL}"
    try:
        headers = headers_from_env(dict(spec.headers))
        factories = {name: codecs.get(name) for name in codecs.names()} if codecs is not None else {}
        codec = make_codec(spec.protocol, factories, model=spec.served_model, labels=tuple(spec.labels),
                           outputs=spec.outputs, label_sets=label_sets, reader=reader)
        settings = ClientSettings(concurrency=1, timeout_s=min(timeout_s, spec.timeout_s), retries=0,
                                  verify_tls=spec.verify_tls)
        client = EndpointClient(url, headers, settings)
    except TargetError as exc:
        return f"model {spec.label}: {first_line(exc)}"
    where = f"endpoint {client.url} (model {spec.label}, protocol {codec.name})"
    found: list[str | None] = []
    asking = threading.Thread(target=lambda: found.append(_ask(client, codec, where, settings.timeout_s)),
                              name="bertprobe-ready-ask", daemon=True)
    asking.start()
    asking.join(deadline_s)
    if asking.is_alive():  # each read came within the timeout, but the answer never ended
        client.close()
        return (f"{where} did not finish answering within {deadline_s:g} s (asked once; each read under "
                f"{settings.timeout_s:g} s): a server trickling its answer, or one overloaded; check the server")
    return found[0] if found else f"{where}: the readiness check stopped without an answer"


def _ask(client: Any, codec: Any, where: str, timeout_s: float) -> str | None:
    """The readiness requests of ``codec`` through ``client`` (closed after): None when the endpoint answers."""
    from bertprobe.model.http_client import AUTH_STATUSES, RETRY_STATUSES, EndpointError

    try:
        if hasattr(codec, "metadata"):
            codec.metadata(lambda path: client.get_json(path, retry=False))
        else:
            client.get_json("/", retry=False)
        ready_path = getattr(codec, "ready_path", None)
        if ready_path:  # what the metadata does not ask (an hf reader's): a health route, any 2xx
            client.get_ok(ready_path, retry=False)
    except EndpointError as exc:
        if exc.last and exc.status is None:
            return (f"{where} does not answer ({exc.last}; asked once, {timeout_s:g} s timeout): start the "
                    "server, or check the URL")
        if exc.status in RETRY_STATUSES or (exc.status is not None and not hasattr(codec, "metadata")):
            return None  # it answered: what the run retries (busy, warming up), or a plugin codec's base URL
        text = first_line(exc).removeprefix(f"endpoint {client.url}: ")
        if exc.status in AUTH_STATUSES:  # the message already says: check the headers and their variables
            return f"{where}: {text}"
        return f"{where}: {text}; check the URL, served_name: and protocol:"
    except CodecError as exc:
        return f"{where}: {first_line(exc)}; check served_name: and protocol:"
    except TargetError as exc:
        return f"{where}: {first_line(exc)}"
    except (ValueError, TypeError, KeyError, AttributeError, IndexError) as exc:  # a metadata shape the codec misread
        return (f"{where}: its metadata does not fit the protocol ({type(exc).__name__}: {first_line(exc)}); "
                "check protocol: and served_name:")
    except Exception as exc:  # noqa: BLE001 - the client closed under it past the deadline: reported by the caller
        return f"{where}: {type(exc).__name__}: {client.scrub(first_line(exc))}"
    finally:
        client.close()
    return None
