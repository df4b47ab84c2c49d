"""Before a run folder exists: does a served model answer? (``readiness_problem``; the preflight's
``bertprobe.suite.validate.check_endpoints`` asks it of each served model of the suite, all at once in threads.)

Each distinct endpoint is asked once, as its codec asks when it loads (v2: ``GET /v2/health/ready`` and the model's
metadata; v1: the model's metadata; hf: ``GET /info``; a plugin codec without ``metadata``: any HTTP answer at its
base URL), with a short timeout (``READY_TIMEOUT_S``) and no retries. An endpoint that does
not answer, or answers what its codec refuses (a wrong ``served_name:`` or protocol), is one problem naming its URL
and the fix; a server that answers 429 or 503 (warming up) passes: the run's retries wait for it. Nothing imports this
module (nor httpx) unless a model is served.
"""

from __future__ import annotations

from typing import Any

from bertprobe.errors import CodecError, TargetError, first_line
from bertprobe.model.spec import ModelSpec

READY_TIMEOUT_S = 5.0  # per request of the check: a server that does not answer in this is not up
RETRY_LATER = frozenset({429, 503})  # a server that says "not now": the run's retries and backoff wait for it


def readiness_problem(spec: ModelSpec, codecs: Any = None, label_sets: bool = False, reader: bool = False,
                      timeout_s: float = READY_TIMEOUT_S) -> str | None:
    """What stops ``spec``'s endpoint from being audited now (one line, no secrets), or None when it answers;
    ``codecs`` is the plugins' codec registry, ``label_sets`` and ``reader`` the task's shape where known."""
    from bertprobe.model.endpoint import INSTALL, headers_from_env
    from bertprobe.model.endpoint_codecs import make_codec

    url = str(spec.endpoint).rstrip("/")
    try:
        from bertprobe.model.http_client import AUTH_STATUSES, ClientSettings, EndpointClient, EndpointError
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
    try:
        if hasattr(codec, "metadata"):
            codec.metadata(lambda path: client.get_json(path, retry=False))
        else:
            client.get_json("/", retry=False)
    except EndpointError as exc:
        if exc.last and exc.status is None:
            return (f"{where} does not answer ({exc.last}; asked once, {settings.timeout_s:g} s timeout): start the "
                    "server, or check the URL")
        if exc.status in RETRY_LATER or (exc.status is not None and not hasattr(codec, "metadata")):
            return None  # it answered: busy or warming up (the run retries), or a plugin codec's base URL
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
    finally:
        client.close()
    return None

