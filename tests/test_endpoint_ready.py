"""The readiness check of served models (bertprobe.model.endpoint_ready): what passes is what the run's client
retries, a server trickling its answer is held to one deadline, and an hf reader's health route is asked."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

pytest.importorskip("httpx")

from bertprobe import ModelSpec
from bertprobe.model.endpoint_ready import readiness_problem
from bertprobe.model.http_client import RETRY_STATUSES

Reply = Callable[[BaseHTTPRequestHandler, threading.Event], None]


@contextmanager
def serving(reply: Reply) -> Iterator[tuple[str, list[str]]]:
    """A loopback server answering every GET with ``reply``; yields its URL and the paths asked."""
    asked: list[str] = []
    stop = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            asked.append(self.path)
            reply(self, stop)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        stop.set()
        server.shutdown()
        server.server_close()


def status(code: int, body: bytes = b'{"error": "x"}', kind: str = "application/json") -> Reply:
    def reply(handler: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        handler.send_response(code)
        handler.send_header("Content-Type", kind)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    return reply


def v2(url: str) -> ModelSpec:
    return ModelSpec(path=url, endpoint=url, served_name="m", protocol="v2")


@pytest.mark.parametrize("code", sorted(RETRY_STATUSES))
def test_a_status_the_run_retries_passes_readiness(code: int) -> None:
    with serving(status(code)) as (url, asked):
        assert readiness_problem(v2(url)) is None
    assert asked == ["/v2/health/ready"]


@pytest.mark.parametrize("code", [400, 404, 501])
def test_a_status_the_run_does_not_retry_is_a_problem(code: int) -> None:
    with serving(status(code)) as (url, _):
        problem = readiness_problem(v2(url))
    assert problem is not None and f"HTTP {code}" in problem and url in problem


def test_a_server_trickling_its_answer_is_held_to_the_deadline_not_the_read_timeout() -> None:
    def trickle(handler: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", "4000")
        handler.end_headers()
        ends = time.monotonic() + 20  # a byte every 50 ms for 20 s: each read well within the 5 s timeout
        try:
            while not stop.is_set() and time.monotonic() < ends:
                handler.wfile.write(b" ")
                handler.wfile.flush()
                time.sleep(0.05)
            handler.wfile.write(b'{"ready": true}'.ljust(4000 - int(20 / 0.05)))
        except OSError:  # the check gave up and closed the connection
            pass

    with serving(trickle) as (url, _):
        problem = readiness_problem(v2(url), deadline_s=0.5)
    assert problem is not None and "did not finish answering within 0.5 s" in problem and url in problem


def test_an_hf_reader_asks_its_health_route_and_a_dead_one_is_named() -> None:
    reader = {"protocol": "hf", "task": "question-answering"}
    with serving(status(200, b"Ok", "text/plain")) as (url, asked):  # the Inference Toolkit's GET /health
        assert readiness_problem(ModelSpec(path=url, endpoint=url, **reader), reader=True) is None
    assert asked == ["/health"]
    with serving(status(404)) as (url, _):
        problem = readiness_problem(ModelSpec(path=url, endpoint=url, **reader), reader=True)
    assert problem is not None and "HTTP 404" in problem and "/health" in problem
    import socket

    with socket.socket() as s:  # bound, then closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    problem = readiness_problem(ModelSpec(path=dead, endpoint=dead, **reader), reader=True)
    assert problem is not None and "does not answer" in problem and dead in problem
