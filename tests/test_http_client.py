"""The endpoint transport: EndpointClient (retries, budget, limits, secrets), ResponseCache and EndpointRunner.

Everything but the last test runs over ``httpx.MockTransport`` (no sockets); the last one serves over loopback
to show keep-alive and concurrency. The injected ``sleep`` records the waits: no test waits for real.
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Sequence
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from bertprobe.errors import TargetError
from bertprobe.model.endpoint_codecs_base import Codec, CodecError
from bertprobe.model.endpoint_runner import EndpointRunner
from bertprobe.model.http_client import ClientSettings, EndpointClient, EndpointError, parse_retry_after
from bertprobe.model.response_cache import ResponseCache

URL = "http://serving.test:8080/base"
TOKEN = "s3cret-token-0123456789"


class Sleeps(list):
    """An injected sleep: records what it was asked to wait."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


class Server:
    """A MockTransport handler: ``outputs`` doubles each input's number; ``faults`` answers some attempts otherwise."""

    def __init__(self, faults: Any = None) -> None:
        self.faults = faults  # callable(request, attempt_no, body) -> httpx.Response | None (None: answer normally)
        self.requests = 0
        self.inputs: list[Any] = []
        self.headers: list[httpx.Headers] = []
        self.lock = threading.Lock()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        with self.lock:
            self.requests += 1
            n = self.requests
            self.headers.append(request.headers)
        body = json.loads(request.content) if request.content else None
        if self.faults is not None:
            response = self.faults(request, n, body)
            if response is not None:
                return response
        if body is None:
            return httpx.Response(200, json={"ready": True})
        with self.lock:
            self.inputs.extend(body["inputs"])
        return httpx.Response(200, json={"outputs": [x["n"] * 2 for x in body["inputs"]]})


def client(server: Server, sleep: Sleeps | None = None, headers: dict | None = None, **settings: Any) -> EndpointClient:
    settings.setdefault("concurrency", 1)
    return EndpointClient(URL, headers, ClientSettings(**settings), transport=httpx.MockTransport(server),
                          sleep=sleep if sleep is not None else Sleeps(), rng=random.Random(0))


def bodies(n: int, per: int = 1) -> list[dict]:
    return [{"inputs": [{"n": i * per + j} for j in range(per)]} for i in range(n)]


class ToyCodec:
    """A protocol for the tests: ``{"inputs": [...]}`` -> ``{"outputs": [...]}``."""

    name = "toy"

    def __init__(self, batch_size: int | None = None) -> None:
        self.batch_size = batch_size

    def infer_path(self, model: str) -> str:
        return f"/models/{model}/infer"

    def request(self, items: Sequence[dict]) -> Any:
        return {"inputs": list(items)}

    def response(self, body: Any, items: Sequence[dict]) -> list[Any]:
        if not isinstance(body, dict) or not isinstance(body.get("outputs"), list):
            raise CodecError("endpoint answer has no 'outputs' list; is the protocol right? (protocol: toy)")
        return body["outputs"]


SCOPE = (URL, "sst2", "1", "toy")


def runner(server: Server, cache: ResponseCache, batch_size: int = 4, **settings: Any) -> EndpointRunner:
    return EndpointRunner(client(server, batch_size=batch_size, **settings), ToyCodec(), cache, SCOPE)


def items(n: int, start: int = 0) -> list[dict]:
    return [{"n": i} for i in range(start, start + n)]


def one_line(error: BaseException) -> str:
    text = str(error)
    assert "\n" not in text and text.strip() == text
    return text


# -- retries ------------------------------------------------------------------------------------------------------


def test_transient_failures_are_retried_and_the_answers_are_unchanged():
    clean = client(Server(), concurrency=3).post_all("/infer", bodies(10, per=2))

    def faults(request, n, body):  # every third attempt fails, in turn 503, 500, 502, 504, 429, dropped, timeout
        if n % 3:
            return None
        kind = (n // 3) % 7
        if kind == 5:
            raise httpx.ConnectError("connection refused", request=request)
        if kind == 6:
            raise httpx.ReadTimeout("timed out", request=request)
        return httpx.Response([503, 500, 502, 504, 429][kind], text="busy")

    sleeps = Sleeps()
    server = Server(faults)
    c = client(server, sleeps, concurrency=3)
    assert c.post_all("/infer", bodies(10, per=2)) == clean
    failed = server.requests - 10
    assert failed >= 3 and len(sleeps) == failed and c.requests_sent == server.requests
    assert all(0 <= s <= 0.5 * 2 ** 5 for s in sleeps)


def test_backoff_is_exponential_with_full_jitter_and_capped():
    sleeps = Sleeps()
    c = client(Server(lambda r, n, b: httpx.Response(503)), sleeps, retries=8, backoff_s=1.0, max_backoff_s=10.0)
    with pytest.raises(EndpointError):
        c.post_json("/infer", {"inputs": []})
    assert len(sleeps) == 8
    assert all(0 <= s <= min(10.0, 2 ** i) for i, s in enumerate(sleeps))
    assert len(set(sleeps)) == 8  # jittered, not a fixed ladder


def test_retry_after_is_honoured_in_seconds_and_as_a_date_and_capped():
    answers = iter([httpx.Response(429, headers={"Retry-After": "7"}),
                    httpx.Response(503, headers={"Retry-After": "1000"}),
                    httpx.Response(429, headers={"Retry-After": formatdate(usegmt=True)})])
    sleeps = Sleeps()
    server = Server(lambda r, n, b: next(answers, None))
    assert client(server, sleeps, max_backoff_s=30.0).post_json("/infer", {"inputs": [{"n": 1}]}) == {"outputs": [2]}
    assert sleeps[0] == 7.0 and sleeps[1] == 30.0 and 0.0 <= sleeps[2] <= 1.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0
    assert parse_retry_after("soon") is None and parse_retry_after("-3") == 0.0


def test_a_permanent_failure_names_the_url_and_the_last_status():
    server = Server(lambda r, n, b: httpx.Response(503, text="overloaded"))
    with pytest.raises(EndpointError) as caught:
        client(server, retries=3).post_json("/v2/models/m/infer", {"inputs": []})
    text = one_line(caught.value)
    assert "http://serving.test:8080/base/v2/models/m/infer" in text and "HTTP 503" in text and "4 attempts" in text
    assert server.requests == 4


def test_client_errors_and_malformed_json_are_not_retried():
    server = Server(lambda r, n, b: httpx.Response(404, text="model m not found"))
    with pytest.raises(EndpointError, match="HTTP 404: model m not found"):
        client(server).post_json("/infer", {})
    assert server.requests == 1
    server = Server(lambda r, n, b: httpx.Response(200, text="{not json"))
    with pytest.raises(EndpointError, match="malformed JSON"):
        client(server).post_json("/infer", {})
    assert server.requests == 1
    answers = iter([httpx.Response(502, text="<html>bad gateway</html>")])  # a 5xx's non-JSON page is retried
    assert client(Server(lambda r, n, b: next(answers, None))).post_json("/infer", {"inputs": []}) == {"outputs": []}


def test_a_permanent_failure_hands_the_in_flight_answers_to_on_done_first():
    failed = threading.Event()

    def faults(request, n, body):
        first = body["inputs"][0]["n"]
        if first == 3:
            failed.set()
            return httpx.Response(400, text="bad request")
        if first < 3:  # in flight while input 3 fails
            assert failed.wait(30)
        return None

    done: dict[int, Any] = {}
    c = client(Server(faults), concurrency=4)
    with pytest.raises(EndpointError, match="HTTP 400"):
        c.post_all("/infer", bodies(12), on_done=lambda i, answer: done.__setitem__(i, answer))
    assert {0, 1, 2} <= set(done) and 3 not in done
    assert done[1] == {"outputs": [2]}


def test_after_a_permanent_failure_nothing_more_is_sent():
    server = Server(lambda r, n, b: httpx.Response(401, text="no") if b["inputs"][0]["n"] == 2 else None)
    done: list[int] = []
    with pytest.raises(EndpointError, match="HTTP 401"):
        client(server, concurrency=1).post_all("/infer", bodies(6), on_done=lambda i, a: done.append(i))
    assert done == [0, 1] and server.requests == 3


# -- budget and limits ----------------------------------------------------------------------------------------------


def test_the_request_budget_stops_before_sending_and_counts_retries():
    server = Server()
    c = client(server, max_requests=2)
    with pytest.raises(EndpointError, match="budget") as caught:
        c.post_all("/infer", bodies(3))
    assert server.requests == 2 and c.requests_sent == 2 and "max_requests" in one_line(caught.value)
    server = Server(lambda r, n, b: httpx.Response(503) if n == 1 else None)
    c = client(server, max_requests=2)
    c.post_json("/infer", bodies(1)[0])  # one retry: both requests spent
    with pytest.raises(EndpointError, match="budget"):
        c.post_json("/infer", bodies(1)[0])
    assert server.requests == 2


def test_a_redirect_is_refused_naming_its_host_only():
    server = Server(lambda r, n, b: httpx.Response(302, headers={"Location": "https://elsewhere.example/x?key=abc123"}))
    with pytest.raises(EndpointError) as caught:
        client(server).post_json("/infer", {})
    text = one_line(caught.value)
    assert "elsewhere.example" in text and "redirect" in text and "abc123" not in text
    assert server.requests == 1


@pytest.mark.parametrize("declared", [True, False])
def test_an_oversize_answer_is_refused(declared):
    big = b"[" + b"1," * 5000 + b"1]"

    def faults(request, n, body):
        if declared:
            return httpx.Response(200, content=big)
        return httpx.Response(200, content=iter([big[i:i + 1000] for i in range(0, len(big), 1000)]))

    with pytest.raises(EndpointError, match="max_response_bytes") as caught:
        client(Server(faults), max_response_bytes=4096).post_json("/infer", {})
    one_line(caught.value)
    assert client(Server(faults), max_response_bytes=len(big)).post_json("/infer", {}) == [1] * 5001


@pytest.mark.parametrize("url", ["ftp://serving.test/models", "file:///etc/passwd", "serving.test:8080"])
def test_only_http_and_https_urls_are_allowed(url):
    with pytest.raises(EndpointError, match="http:// or https://") as caught:
        EndpointClient(url, None, ClientSettings())
    one_line(caught.value)


def test_urls_in_messages_carry_no_user_info_or_query():
    c = EndpointClient("https://user:pw1234@[::1]:8443/api/?key=abc123", None, ClientSettings(),
                       transport=httpx.MockTransport(lambda r: httpx.Response(404)))
    assert c.url == "https://[::1]:8443/api"
    with pytest.raises(EndpointError) as caught:
        c.get_json("/v2/health/ready")
    assert "pw1234" not in str(caught.value) and "abc123" not in str(caught.value)


def test_an_undecodable_body_is_one_endpoint_error():
    server = Server(lambda r, n, b: httpx.Response(200, content=b"not gzip", headers={"Content-Encoding": "gzip"}))
    with pytest.raises(EndpointError, match="DecodingError") as caught:
        client(server).post_json("/infer", {})
    one_line(caught.value)
    assert server.requests == 1


def test_turning_tls_verification_off_is_said_once():
    said: list[str] = []
    c = EndpointClient("https://serving.test", None, ClientSettings(verify_tls=False), say=said.append,
                       transport=httpx.MockTransport(Server()))
    c.get_json("/v2/health/ready")
    c.get_json("/v2/health/ready")
    assert len(said) == 1 and "TLS verification is off" in said[0]


def test_bad_settings_are_one_line_errors():
    with pytest.raises(TargetError, match="concurrency must be at least 1"):
        ClientSettings(concurrency=0)


# -- secrets ------------------------------------------------------------------------------------------------------


def test_a_header_token_appears_in_no_error_repr_or_cache_file(tmp_path):
    headers = {"Authorization": f"Bearer {TOKEN}"}

    def echo(request, n, body):  # a server that echoes the token back in its errors
        if body is not None and body["inputs"][0]["n"] == 99:
            return httpx.Response(403, text=f"token {request.headers['authorization']} refused")
        return None

    server = Server(echo)
    c = client(server, headers=headers, batch_size=2)
    assert TOKEN not in repr(c) and "Authorization" in repr(c)
    cache = ResponseCache(tmp_path / "cache.sqlite")
    run = EndpointRunner(c, ToyCodec(), cache, SCOPE)
    assert run.run(items(5)) == [0, 2, 4, 6, 8]
    assert all(h["authorization"] == f"Bearer {TOKEN}" for h in server.headers)  # it was sent
    with pytest.raises(EndpointError) as caught:
        run.run([{"n": 99}])
    assert "HTTP 403" in str(caught.value) and TOKEN not in str(caught.value) and "***" in str(caught.value)
    broken = Server(lambda r, n, b: (_ for _ in ()).throw(httpx.ConnectError(f"refused {TOKEN}", request=r)))
    with pytest.raises(EndpointError) as caught:
        client(broken, headers=headers, retries=1).post_json("/infer", {})
    assert TOKEN not in str(caught.value)
    cache.close()
    assert TOKEN.encode() not in (tmp_path / "cache.sqlite").read_bytes()
    assert b"Bearer" not in (tmp_path / "cache.sqlite").read_bytes()


# -- cache and runner ---------------------------------------------------------------------------------------------


def test_cache_keys_depend_on_scope_and_canonical_input_only():
    key = ResponseCache.key(*SCOPE, {"text": "a", "text_pair": "b"})
    assert key == ResponseCache.key(*SCOPE, {"text_pair": "b", "text": "a"})
    assert key != ResponseCache.key(URL, "sst2", "2", "toy", {"text": "a", "text_pair": "b"})
    assert key != ResponseCache.key(*SCOPE, {"text": "a", "text_pair": "c"})
    assert len(key) == 64


def test_the_cache_keeps_json_values_across_instances(tmp_path):
    file = tmp_path / "run" / "responses.sqlite"
    with ResponseCache(file) as cache:
        cache.put_many({"a": {"scores": [0.1, 0.9]}, "b": [1, "x"]})
    with ResponseCache(file) as cache:
        assert cache.get_many(["a", "b", "c"]) == {"a": {"scores": [0.1, 0.9]}, "b": [1, "x"]}
    with pytest.raises(TargetError, match="not JSON"):
        ResponseCache(None).put_many({"a": object()})
    (tmp_path / "junk.sqlite").write_bytes(b"this is not a database" * 100)
    with pytest.raises(TargetError, match="delete it"):
        ResponseCache(tmp_path / "junk.sqlite").get_many(["a"])


def test_a_runner_sends_only_what_the_cache_lacks_and_a_resumed_run_sends_nothing(tmp_path):
    file = tmp_path / "responses.sqlite"
    server = Server()
    first = runner(server, ResponseCache(file))
    assert first.run(items(10)) == [2 * i for i in range(10)]
    assert first.sent_inputs == 10 and server.requests == 3  # batches of 4
    server = Server()
    half = runner(server, ResponseCache(file))
    assert half.run(items(20)) == [2 * i for i in range(20)]
    assert half.sent_inputs == 10 and sorted(x["n"] for x in server.inputs) == list(range(10, 20))
    server = Server()
    resumed = runner(server, ResponseCache(file))  # a second runner over the same file
    assert resumed.run(items(20)) == [2 * i for i in range(20)]
    assert resumed.sent_inputs == 0 and server.requests == 0


def test_a_run_killed_halfway_keeps_what_was_answered(tmp_path):
    file = tmp_path / "responses.sqlite"
    server = Server(lambda r, n, b: httpx.Response(500) if b["inputs"][0]["n"] >= 8 else None)
    with pytest.raises(EndpointError, match="HTTP 500"):
        runner(server, ResponseCache(file), retries=1).run(items(12))
    server = Server()
    resumed = runner(server, ResponseCache(file))
    assert resumed.run(items(12)) == [2 * i for i in range(12)]
    assert sorted(x["n"] for x in server.inputs) == [8, 9, 10, 11]


def test_duplicate_inputs_are_sent_once():
    server = Server()
    run = runner(server, ResponseCache(None))
    asked = [{"n": 1}, {"n": 2}, {"n": 1}, {"n": 3}, {"n": 2}, {"n": 1}]
    assert run.run(asked) == [2, 4, 2, 6, 4, 2]
    assert sorted(x["n"] for x in server.inputs) == [1, 2, 3] and run.sent_inputs == 3


def test_the_codec_batch_size_wins_and_concurrent_batches_come_back_in_order():
    server = Server()
    run = EndpointRunner(client(server, batch_size=50, concurrency=4), ToyCodec(batch_size=3), ResponseCache(None), SCOPE)
    assert run.run(items(20)) == [2 * i for i in range(20)]
    assert server.requests == 7
    assert isinstance(ToyCodec(), Codec)


def test_a_malformed_answer_and_a_wrong_output_count_are_one_line_codec_errors():
    server = Server(lambda r, n, b: httpx.Response(200, json={"predictions": []}))
    with pytest.raises(CodecError, match="no 'outputs' list") as caught:
        runner(server, ResponseCache(None)).run(items(3))
    one_line(caught.value)
    server = Server(lambda r, n, b: httpx.Response(200, json={"outputs": [1]}))
    cache = ResponseCache(None)
    with pytest.raises(CodecError, match="1 outputs for 3 inputs") as caught:
        runner(server, cache).run(items(3))
    assert URL.split("/base")[0] in one_line(caught.value) and len(cache) == 0


def test_progress_sees_every_batch():
    seen: list[Any] = []

    def progress(iterable, total=None, desc=""):
        seen.append((total, desc))
        for x in iterable:
            seen.append(x)
            yield x

    run = EndpointRunner(client(Server(), batch_size=2, concurrency=3), ToyCodec(), ResponseCache(None), SCOPE,
                         progress=progress)
    assert run.run(items(9)) == [2 * i for i in range(9)]
    assert seen[0] == (5, "toy requests") and sorted(seen[1:]) == [0, 1, 2, 3, 4]
    failing = EndpointRunner(client(Server(lambda r, n, b: httpx.Response(404)), batch_size=2, concurrency=3), ToyCodec(),
                             ResponseCache(None), SCOPE, progress=progress)
    with pytest.raises(EndpointError, match="HTTP 404"):
        failing.run(items(9))


# -- over sockets -------------------------------------------------------------------------------------------------


def test_keep_alive_and_concurrency_over_loopback():
    concurrency = 4
    barrier = threading.Barrier(concurrency, timeout=30)  # the first requests pass only if that many are in flight
    state = {"connections": 0, "requests": 0, "in_flight": 0, "most": 0}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive

        def setup(self) -> None:
            super().setup()
            with lock:
                state["connections"] += 1

        def do_POST(self) -> None:
            with lock:
                state["requests"] += 1
                n = state["requests"]
                state["in_flight"] += 1
                state["most"] = max(state["most"], state["in_flight"])
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if n <= concurrency:
                barrier.wait()
            data = json.dumps({"outputs": [x["n"] * 2 for x in body["inputs"]]}).encode()
            with lock:
                state["in_flight"] -= 1
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with EndpointClient(url, {"Authorization": f"Bearer {TOKEN}"},
                            ClientSettings(batch_size=2, concurrency=concurrency, timeout_s=60, retries=0)) as c:
            run = EndpointRunner(c, ToyCodec(), ResponseCache(None), (url, "m", "1", "toy"))
            assert run.run(items(64)) == [2 * i for i in range(64)]
            assert c.requests_sent == 32
    finally:
        server.shutdown()
        server.server_close()
    assert state["requests"] == 32 and state["most"] == concurrency
    assert state["connections"] <= concurrency < state["requests"]
