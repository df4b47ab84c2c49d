"""A reverse proxy that injects faults in front of an inference server, and counts what it forwards.

    python examples/serving/fault_proxy.py --upstream http://127.0.0.1:8080 --port 8090 --fail-503 0.2 --seed 1

In-process (tests)::

    with FaultProxy("http://127.0.0.1:8080", Faults(fail_503=0.2, seed=1)) as proxy:
        url = proxy.url           # http://127.0.0.1:<free port>
        ...
        proxy.requests_forwarded, proxy.inputs_forwarded, proxy.stats()

Faults apply to POST requests (inference); GETs (metadata, readiness) pass through unless ``on_get``. Each POST
draws one number from a ``random.Random(seed)`` under a lock, so the n-th POST to arrive always meets the same fault;
the shares are cumulative (their sum at most 1):

- ``fail_503``: answered 503 without forwarding; ``fail_429``: 429 with ``Retry-After: 1``, not forwarded;
- ``stall``: held ``stall_s`` seconds (longer than the client's timeout), then forwarded and answered;
- ``drop``: the connection closed without an answer, not forwarded;
- ``malformed``: forwarded, and the body cut in half (invalid JSON) with status 200;
- ``short``: forwarded, and the last output removed (v1 predictions, v2 outputs' first dimension, TEI/pipeline lists);
- ``relabel``: forwarded, and every label name rewritten (``label_map``, else ``"unknown-" + name``): v2 output
  ``parameters.labels``, v1 label strings, TEI ``label`` fields.
``fail_from=N``: every POST from the N-th on (1-based) is answered 503: a server that goes down for good.

Counts: ``requests_received`` (every request, GETs included), ``requests_forwarded`` / ``inputs_forwarded`` (POSTs
that reached the upstream, and their inputs: v1 ``instances``, v2 the first input's first dimension, TEI and pipeline
``inputs``), ``faults`` (per kind); at ``GET /_proxy/stats``. ``POST /_proxy/reset`` zeroes the counts and reseeds.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import socket
import threading
import urllib.parse
from dataclasses import asdict, dataclass, field, fields
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailers",
              "transfer-encoding", "upgrade", "content-length", "host"}
KINDS = ("fail_503", "fail_429", "stall", "drop", "malformed", "short", "relabel")


@dataclass
class Faults:
    """Shares of POST requests that meet each fault (see the module's docstring)."""

    seed: int = 0
    fail_503: float = 0.0
    fail_429: float = 0.0
    stall: float = 0.0
    drop: float = 0.0
    malformed: float = 0.0
    short: float = 0.0
    relabel: float = 0.0
    stall_s: float = 5.0
    label_map: dict[str, str] = field(default_factory=dict)
    fail_from: int | None = None
    on_get: bool = False

    def __post_init__(self) -> None:
        total = sum(getattr(self, k) for k in KINDS)
        if any(getattr(self, k) < 0 for k in KINDS) or total > 1 + 1e-9:
            raise ValueError(f"fault shares must be >= 0 and sum to at most 1 (they sum to {total:g})")


def count_inputs(body: Any) -> int:
    """Inputs in a request body: v1 instances, v2 the first input's first dimension, TEI / pipeline inputs."""
    if not isinstance(body, dict):
        return 0
    if isinstance(body.get("instances"), list):
        return len(body["instances"])
    if "inputs" in body:
        inputs = body["inputs"]
        if isinstance(inputs, list) and inputs and isinstance(inputs[0], dict) and "datatype" in inputs[0]:  # v2
            shape = inputs[0].get("shape") or []
            return int(shape[0]) if shape else len(inputs[0].get("data") or [])
        if isinstance(inputs, (str, dict)):
            return 1
        if isinstance(inputs, list):
            if inputs and all(isinstance(x, str) for x in inputs):
                return 1  # TEI: one text or one [text, pair]
            return len(inputs)
    return 0


def drop_last_output(body: Any) -> Any:
    """The response with one output fewer than inputs."""
    if isinstance(body, dict) and isinstance(body.get("predictions"), list):
        body["predictions"] = body["predictions"][:-1]
    elif isinstance(body, dict) and isinstance(body.get("outputs"), list):
        for out in body["outputs"]:
            shape = list(out.get("shape") or [])
            if not shape:
                continue
            per_row = 1
            for d in shape[1:]:
                per_row *= int(d)
            shape[0] = max(int(shape[0]) - 1, 0)
            out["shape"] = shape
            if isinstance(out.get("data"), list):
                out["data"] = out["data"][: shape[0] * per_row]
    elif isinstance(body, list):
        body = body[:-1]
    return body


def rewrite_labels(body: Any, label_map: dict[str, str]) -> Any:
    """Every label name in the response renamed."""
    def new(name: str) -> str:
        return label_map.get(name, "unknown-" + name)

    if isinstance(body, dict) and isinstance(body.get("outputs"), list):  # v2
        for out in body["outputs"]:
            params = out.get("parameters") or {}
            if isinstance(params.get("labels"), str):
                params["labels"] = ",".join(new(x) for x in params["labels"].split(","))
            if out.get("datatype") == "BYTES" and isinstance(out.get("data"), list):
                out["data"] = [new(x) if isinstance(x, str) else x for x in out["data"]]
    elif isinstance(body, dict) and isinstance(body.get("predictions"), list):  # v1
        body["predictions"] = [new(x) if isinstance(x, str) else x for x in body["predictions"]]
    elif isinstance(body, list):  # TEI: [{"label", "score"}] or a batch of them
        for item in body:
            rows = item if isinstance(item, list) else [item]
            for row in rows:
                if isinstance(row, dict) and isinstance(row.get("label"), str):
                    row["label"] = new(row["label"])
    return body


class FaultProxy:
    """The proxy: ``start()`` binds 127.0.0.1 (``port`` 0: a free port) and serves in a thread; ``stop()``."""

    def __init__(self, upstream: str, faults: Faults | None = None, host: str = "127.0.0.1", port: int = 0,
                 upstream_timeout_s: float = 120.0) -> None:
        parsed = urllib.parse.urlsplit(upstream)
        if parsed.scheme != "http" or not parsed.hostname:
            raise ValueError(f"upstream must be an http://host:port URL, not {upstream!r}")
        self.upstream_host = parsed.hostname
        self.upstream_port = parsed.port or 80
        self.upstream_timeout_s = upstream_timeout_s
        self.faults = faults or Faults()
        self.host = host
        self._port = port
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.reset()

    # -- counts ---------------------------------------------------------------------------------------------------
    def reset(self, faults: Faults | None = None) -> None:
        """Zero the counts and reseed (with new faults, if given)."""
        with self._lock:
            if faults is not None:
                self.faults = faults
            self._rng = random.Random(self.faults.seed)
            self.requests_received = 0
            self.posts_received = 0
            self.requests_forwarded = 0
            self.inputs_forwarded = 0
            self.faults_injected = {k: 0 for k in (*KINDS, "fail_from")}

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {"requests_received": self.requests_received, "posts_received": self.posts_received,
                    "requests_forwarded": self.requests_forwarded, "inputs_forwarded": self.inputs_forwarded,
                    "faults": dict(self.faults_injected), "config": asdict(self.faults)}

    def _draw(self, is_post: bool) -> str | None:
        """The fault for this request (None: pass through), counted."""
        with self._lock:
            self.requests_received += 1
            if not (is_post or self.faults.on_get):
                return None
            self.posts_received += is_post
            u = self._rng.random()  # drawn for every eligible request, so the order is fixed by the seed
            n = self.posts_received
            if self.faults.fail_from is not None and is_post and n >= self.faults.fail_from:
                self.faults_injected["fail_from"] += 1
                return "fail_from"
            edge = 0.0
            for kind in KINDS:
                edge += getattr(self.faults, kind)
                if u < edge:
                    self.faults_injected[kind] += 1
                    return kind
            return None

    def _forwarded(self, inputs: int) -> None:
        with self._lock:
            self.requests_forwarded += 1
            self.inputs_forwarded += inputs

    # -- life -----------------------------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._server.server_address[1] if self._server else self._port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> Self:
        proxy = self

        class Handler(ProxyHandler):
            owner = proxy

        self._stopping.clear()
        self._server = ThreadingHTTPServer((self.host, self._port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fault-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes stalled handlers
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ProxyHandler(BaseHTTPRequestHandler):
    owner: FaultProxy
    protocol_version = "HTTP/1.1"  # keep-alive towards the client

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None,
              content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def do_GET(self) -> None:
        if self.path == "/_proxy/stats":
            self._send(200, json.dumps(self.owner.stats()).encode())
            return
        self._handle(b"")

    def do_POST(self) -> None:
        body = self._body()
        if self.path == "/_proxy/reset":
            self.owner.reset()
            self._send(200, b"{}")
            return
        self._handle(body)

    def _handle(self, body: bytes) -> None:
        owner = self.owner
        is_post = self.command == "POST"
        fault = owner._draw(is_post)
        if fault in ("fail_503", "fail_from"):
            self._send(503, b'{"error": "injected: service unavailable"}')
            return
        if fault == "fail_429":
            self._send(429, b'{"error": "injected: too many requests"}', {"Retry-After": "1"})
            return
        if fault == "drop":
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        if fault == "stall" and owner._stopping.wait(owner.faults.stall_s):
            return  # stopping
        try:
            status, headers, answer = self._forward(body)
        except OSError as e:
            self._send(502, json.dumps({"error": f"upstream: {e}"}).encode())
            return
        if is_post:
            try:
                inputs = count_inputs(json.loads(body)) if body else 0
            except ValueError:
                inputs = 0
            owner._forwarded(inputs)
        if fault == "malformed":
            answer = answer[: len(answer) // 2]
            status = 200
        elif fault in ("short", "relabel") and status == 200:
            try:
                parsed = json.loads(answer)
            except ValueError:
                parsed = None
            if parsed is not None:
                parsed = drop_last_output(parsed) if fault == "short" else rewrite_labels(parsed, owner.faults.label_map)
                answer = json.dumps(parsed).encode()
        keep = {k: v for k, v in headers if k.lower() not in HOP_BY_HOP and k.lower() != "content-type"}
        try:
            self._send(status, answer, keep, dict(headers).get("content-type", "application/json"))
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (a stall past its timeout)
            self.close_connection = True

    def _forward(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        owner = self.owner
        conn = http.client.HTTPConnection(owner.upstream_host, owner.upstream_port, timeout=owner.upstream_timeout_s)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            headers["Content-Length"] = str(len(body))
            conn.request(self.command, self.path, body=body or None, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, [(k.lower(), v) for k, v in resp.getheaders()], data
        finally:
            conn.close()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], allow_abbrev=False)
    p.add_argument("--upstream", required=True, help="http://host:port of the server behind")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8090)
    for f in fields(Faults):
        if f.name in KINDS:
            p.add_argument("--" + f.name.replace("_", "-"), type=float, default=0.0, help=f"share of POSTs: {f.name}")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--stall-s", type=float, default=5.0)
    p.add_argument("--fail-from", type=int, default=None)
    p.add_argument("--on-get", action="store_true")
    p.add_argument("--label-map", default="", help="old=new,old=new (default: unknown-<old>)")
    a = p.parse_args(argv)
    label_map = dict(kv.split("=", 1) for kv in a.label_map.split(",") if kv)
    faults = Faults(seed=a.seed, stall_s=a.stall_s, fail_from=a.fail_from, on_get=a.on_get, label_map=label_map,
                    **{k: getattr(a, k) for k in KINDS})
    proxy = FaultProxy(a.upstream, faults, host=a.host, port=a.port).start()
    print(f"fault_proxy: {proxy.url} -> {a.upstream}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        proxy.stop()


if __name__ == "__main__":
    main()
