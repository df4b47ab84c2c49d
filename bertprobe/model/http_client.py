"""The HTTP transport to a served model: JSON over httpx, with keep-alive, concurrency, retries and a budget.

``EndpointClient`` knows nothing of protocols or tasks: it GETs and POSTs JSON under one base URL. One
``httpx.Client`` (so one pool of kept-alive connections) serves a thread pool of ``concurrency`` workers
(``post_all``). A request is retried (``retries`` times after the first) on 429, 500, 502, 503 and 504, on
connection errors and on timeouts, after an exponential backoff with full jitter (``backoff_s * 2**attempt``,
capped by ``max_backoff_s``), or after the server's ``Retry-After`` (seconds or an HTTP date, capped the same).
Every request sent counts against ``max_requests`` (retries included), checked before sending.

What a serving team would ask of it: ``http``/``https`` only; redirects are never followed (one is an error
naming the host it pointed at); an answer larger than ``max_response_bytes`` is refused while it streams;
TLS verification is on unless ``verify_tls=False`` (said once); no header's value appears in any message or
repr (error texts are scrubbed of them); answers are parsed as JSON, never executed or unpickled.
"""

from __future__ import annotations

import email.utils
import json
import math
import random
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Self

import httpx

from bertprobe.errors import TargetError, first_line
from bertprobe.model.credentials import credential_words, is_credential_header

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
RETRY_AFTER_STATUSES = frozenset({429, 503})
AUTH_STATUSES = frozenset({401, 403})  # refused credentials: the token, not the URL, is what to check
AUTH_HINT = ("; the server refused the credentials: check the model's headers: and that the ${VAR}s they name "
             "hold a valid token")
SNIPPET = 160  # characters of an error answer's body quoted in a message
SECRET_WORD = 8  # a header value's words this long or longer are scrubbed on their own too


@dataclass(frozen=True)
class ClientSettings:
    """How an endpoint is called (a model entry's ``client:`` settings)."""

    batch_size: int = 32  # inputs per request (used by the caller: EndpointRunner)
    concurrency: int = 4  # requests in flight
    timeout_s: float = 30.0  # per request (connect + read)
    retries: int = 5  # attempts after the first, on 429, 5xx (500/502/503/504), connection errors, timeouts
    backoff_s: float = 0.5  # base of exponential backoff with full jitter, capped by max_backoff_s
    max_backoff_s: float = 30.0
    max_requests: int | None = None  # a budget of HTTP requests (paid APIs): exceeded -> EndpointError, before sending
    verify_tls: bool = True
    max_response_bytes: int = 64 * 2**20

    def __post_init__(self) -> None:
        for name in ("batch_size", "concurrency"):
            if getattr(self, name) < 1:
                raise TargetError(f"client setting {name} must be at least 1, not {getattr(self, name)}")
        for name in ("timeout_s", "max_response_bytes"):
            if getattr(self, name) <= 0:
                raise TargetError(f"client setting {name} must be positive, not {getattr(self, name)}")
        for name in ("retries", "backoff_s", "max_backoff_s"):
            if getattr(self, name) < 0:
                raise TargetError(f"client setting {name} must not be negative, not {getattr(self, name)}")
        if self.max_requests is not None and self.max_requests < 0:
            raise TargetError(f"client setting max_requests must not be negative, not {self.max_requests}")


class EndpointError(TargetError):
    """An endpoint could not be used: one line naming its URL (no secrets) and the last error.

    ``last`` is the last attempt's error alone and ``status`` its HTTP status (None: no HTTP answer at all, the
    server unreachable), where the request failed after its attempts."""

    def __init__(self, message: str, last: str = "", status: int | None = None) -> None:
        super().__init__(message)
        self.last, self.status = last, status


class _Retryable(Exception):
    """A failed attempt worth another: its one-line description and the server's Retry-After, if any."""

    def __init__(self, text: str, retry_after: float | None = None, status: int | None = None) -> None:
        super().__init__(text)
        self.text = text
        self.retry_after = retry_after
        self.status = status  # the HTTP status answered (None: no answer: a connection error, a timeout)


def public_url(url: str | httpx.URL) -> str:
    """``scheme://host[:port]/path`` of a URL: no user info, query or fragment (where secrets may sit)."""
    u = httpx.URL(str(url))
    port = f":{u.port}" if u.port is not None else ""
    host = f"[{u.host}]" if ":" in u.host else u.host
    return f"{u.scheme}://{host}{port}{u.path}".rstrip("/")


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delay-seconds or an HTTP date (None when absent or unreadable)."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        current = datetime.now(timezone.utc).timestamp() if now is None else now
        seconds = when.timestamp() - current
    if math.isnan(seconds):
        return None
    return max(0.0, seconds)


def secrets_of(headers: Mapping[str, str] | None) -> list[str]:
    """What to scrub from texts: each header's value; each long word of it; and each word of a credential's value
    but its scheme (the token of ``Bearer TOKEN``, however short, down to ``MIN_SECRET_WORD`` characters)."""
    found: set[str] = set()
    for name, value in (headers or {}).items():
        if value:
            found.add(str(value))
            found.update(word for word in str(value).split() if len(word) >= SECRET_WORD)
            if is_credential_header(name):
                found.update(credential_words(str(value)))
    return sorted(found, key=len, reverse=True)


def scrub_text(text: str, secrets: Sequence[str]) -> str:
    """``text`` with each of ``secrets`` replaced by ``***``: a long one wherever it stands, a short one (under
    ``SECRET_WORD`` characters) only as a whole word, so that a token ``test`` leaves ``latest`` whole."""
    for secret in secrets:
        if len(secret) >= SECRET_WORD:
            text = text.replace(secret, "***")
        else:
            # "=" may precede it (api_key=ab12 echoed back), not follow it (base64 padding of a longer token)
            text = re.sub(rf"(?<![\w.~+/-]){re.escape(secret)}(?![\w.~+/=-])", "***", text)
    return text


class EndpointClient:
    """JSON requests to one endpoint's base URL, with keep-alive, concurrency, retries, a budget and limits."""

    def __init__(self, base_url: str, headers: Mapping[str, str] | None, settings: ClientSettings,
                 say: Callable[[str], None] | None = None, transport: httpx.BaseTransport | None = None,
                 sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None) -> None:
        self.settings = settings
        self._secrets = secrets_of(headers)
        try:
            url = httpx.URL(base_url)
        except (httpx.InvalidURL, TypeError, ValueError) as exc:
            raise EndpointError(f"endpoint {self._scrub(str(base_url))!r} is not a URL ({self._scrub(first_line(exc))}); "
                                "give an http:// or https:// URL") from None
        if url.scheme not in ("http", "https"):
            raise EndpointError(f"endpoint {public_url(url) if url.host else self._scrub(str(base_url))}: scheme "
                                f"{url.scheme or '(none)'!r} is not allowed; give an http:// or https:// URL")
        if not url.host:
            raise EndpointError(f"endpoint {self._scrub(str(base_url))!r} names no host; give http://HOST[:PORT]/...")
        self.url = public_url(url)
        self.header_names = tuple(sorted((headers or {}).keys()))
        self.requests_sent = 0
        self._lock = threading.Lock()
        self._sleep = sleep
        self._rng = rng or random.Random()
        if not settings.verify_tls and say is not None:
            say(f"warning: TLS verification is off for {self.url} (verify_tls: false): the server's identity is not "
                "checked; turn it back on outside a test setup")
        self._http = httpx.Client(
            base_url=url, headers=dict(headers or {}), timeout=httpx.Timeout(settings.timeout_s),
            verify=settings.verify_tls, follow_redirects=False, transport=transport,
            limits=httpx.Limits(max_connections=settings.concurrency, max_keepalive_connections=settings.concurrency),
        )

    def __repr__(self) -> str:
        return f"EndpointClient({self.url!r}, headers={list(self.header_names)!r})"

    # -- requests ---------------------------------------------------------------------------------------------------

    def get_json(self, path: str, *, retry: bool = True) -> Any:
        """GET ``path`` and parse its JSON (None for an empty body): metadata, readiness."""
        return self._request("GET", path, None, retry=retry)

    def get_ok(self, path: str, *, retry: bool = True) -> None:
        """GET ``path`` and accept any 2xx answer whatever its body (a health route: TEI's empty ``/health``, the
        Inference Toolkit's plain-text ``Ok``); other answers fail as ``get_json``'s do."""
        self._request("GET", path, None, retry=retry, parse=False)

    def post_json(self, path: str, body: Any) -> Any:
        """POST ``body`` as JSON to ``path`` and parse the answer's JSON, with retries."""
        return self._request("POST", path, body, retry=True)

    def post_all(self, path: str, bodies: Sequence[Any], on_done: Callable[[int, Any], None] | None = None,
                 *, cancel: threading.Event | None = None) -> list[Any]:
        """POST every body, ``concurrency`` at a time, and return the answers in order.

        ``on_done(i, answer)`` is called (in a worker thread) as each answer arrives, so a caller can keep what
        was answered. A permanent failure (or an error raised by ``on_done``) stops new requests; the ones in
        flight finish (and reach ``on_done``), then the first error is raised. Setting ``cancel`` stops the same way.
        """
        results: list[Any] = [None] * len(bodies)
        stop = cancel or threading.Event()

        def one(i: int) -> None:
            if stop.is_set():
                return
            try:
                answer = self.post_json(path, bodies[i])
                results[i] = answer
                if on_done is not None:
                    on_done(i, answer)
            except BaseException:
                stop.set()
                raise

        if self.settings.concurrency == 1 or len(bodies) <= 1:
            for i in range(len(bodies)):
                one(i)
        else:
            with ThreadPoolExecutor(max_workers=min(self.settings.concurrency, len(bodies)),
                                    thread_name_prefix="bertprobe-endpoint") as pool:
                futures: list[Future] = [pool.submit(one, i) for i in range(len(bodies))]
                try:
                    wait(futures, return_when=FIRST_EXCEPTION)
                    wait(futures)
                except BaseException:  # KeyboardInterrupt in the waiting thread: let the in-flight ones finish
                    stop.set()
                    raise
                for future in futures:
                    error = future.exception()
                    if error is not None:
                        raise error
        if stop.is_set() and cancel is not None:
            raise EndpointError(f"endpoint {self.url}: cancelled before every request was answered")
        return results

    def close(self) -> None:
        """Close the kept-alive connections."""
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- one request, its retries -----------------------------------------------------------------------------------

    def _request(self, method: str, path: str, body: Any, retry: bool, parse: bool = True) -> Any:
        attempts = 1 + (self.settings.retries if retry else 0)
        where = f"{method} {self.url}/{path.lstrip('/')}"
        last, status = "", None
        for attempt in range(attempts):
            self._spend(where)
            try:
                return self._attempt(method, path, body, where, parse)
            except _Retryable as failure:
                last, status = failure.text, failure.status
                if attempt + 1 < attempts:
                    self._sleep(self._delay(attempt, failure.retry_after))
        tries = f"after {attempts} attempts" if attempts > 1 else "(no retries)"
        raise EndpointError(f"endpoint {self.url}: {where} failed {tries}; last error: {last}", last, status)

    def _spend(self, where: str) -> None:
        """Count one request against the budget (EndpointError, before sending, when it is spent)."""
        with self._lock:
            budget = self.settings.max_requests
            if budget is not None and self.requests_sent >= budget:
                raise EndpointError(f"endpoint {self.url}: request budget spent ({budget} requests, max_requests) "
                                    f"before {where}; raise client.max_requests or send fewer inputs")
            self.requests_sent += 1

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds before the next attempt: the server's Retry-After, or full jitter over the exponential backoff."""
        cap = self.settings.max_backoff_s
        if retry_after is not None:
            return min(cap, retry_after)
        with self._lock:
            return self._rng.uniform(0.0, min(cap, self.settings.backoff_s * 2 ** attempt))

    def _attempt(self, method: str, path: str, body: Any, where: str, parse: bool = True) -> Any:
        """One request: the parsed answer (None unless ``parse``), a _Retryable failure, or an EndpointError that
        retrying cannot mend."""
        kwargs: dict[str, Any] = {} if body is None and method == "GET" else {"json": body}
        try:
            with self._http.stream(method, path, **kwargs) as response:
                status = response.status_code
                if 300 <= status < 400:
                    raise EndpointError(self._redirect(where, status, response.headers.get("location")))
                content = self._read_capped(response, where)
                if status in RETRY_STATUSES:
                    wait_s = (parse_retry_after(response.headers.get("retry-after"))
                              if status in RETRY_AFTER_STATUSES else None)
                    raise _Retryable(f"HTTP {status}{self._snippet(content)}", wait_s, status)
                if status >= 400:
                    hint = AUTH_HINT if status in AUTH_STATUSES else ""
                    raise EndpointError(f"endpoint {self.url}: {where} answered HTTP {status}{self._snippet(content)}"
                                        f"{hint}", f"HTTP {status}", status)
        except (httpx.LocalProtocolError, httpx.UnsupportedProtocol) as exc:  # ours to mend: retrying cannot
            raise EndpointError(f"endpoint {self.url}: {where} could not be sent ({type(exc).__name__}); "
                                "check the endpoint URL and the headers' values") from None
        except httpx.TimeoutException as exc:
            raise _Retryable(f"timed out after {self.settings.timeout_s:g} s ({type(exc).__name__})") from None
        except httpx.TransportError as exc:
            raise _Retryable(f"{type(exc).__name__}: {self._scrub(first_line(exc, type(exc).__name__))}") from None
        except httpx.HTTPError as exc:  # an undecodable body (DecodingError), a broken stream
            raise EndpointError(f"endpoint {self.url}: {where} failed ({type(exc).__name__}: "
                                f"{self._scrub(first_line(exc, type(exc).__name__))})") from None
        if not parse or not content.strip():
            return None
        try:
            return json.loads(content)
        except (UnicodeDecodeError, ValueError) as exc:
            raise EndpointError(f"endpoint {self.url}: {where} answered HTTP {status} with malformed JSON "
                                f"({self._scrub(first_line(exc))}){self._snippet(content)}") from None

    def _read_capped(self, response: httpx.Response, where: str) -> bytes:
        """The answer's body, refused once it grows past ``max_response_bytes`` (Content-Length is not trusted alone)."""
        cap = self.settings.max_response_bytes
        declared = response.headers.get("content-length")
        if declared is not None and declared.strip().isdigit() and int(declared) > cap:
            raise EndpointError(f"endpoint {self.url}: {where} answered {int(declared)} bytes, over max_response_bytes "
                                f"({cap}); raise client.max_response_bytes or lower batch_size")
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > cap:
                raise EndpointError(f"endpoint {self.url}: {where} answered over max_response_bytes ({cap} bytes); "
                                    "raise client.max_response_bytes or lower batch_size")
            chunks.append(chunk)
        return b"".join(chunks)

    def _redirect(self, where: str, status: int, location: str | None) -> str:
        if location:
            try:
                host = httpx.URL(self.url).join(location).host or "?"
            except (httpx.InvalidURL, ValueError):
                host = "an unreadable Location"
            target = f"a redirect to host {self._scrub(host)}"
        else:
            target = "a redirect without a Location"
        return (f"endpoint {self.url}: {where} answered HTTP {status}, {target}; redirects are not followed: "
                "give the endpoint's final URL")

    def _snippet(self, content: bytes) -> str:
        """The first line of an answer's body, short and scrubbed, for a message (empty for an empty body)."""
        text = first_line(content.decode("utf-8", errors="replace"))
        if not text:
            return ""
        text = self._scrub(text)
        return f": {text[:SNIPPET]}{'...' if len(text) > SNIPPET else ''}"

    def scrub(self, text: str) -> str:
        """``text`` with every header value replaced by ``***`` (what a message quoting an answer must go through)."""
        return self._scrub(text)

    def _scrub(self, text: str) -> str:
        """``text`` with every header value replaced by ``***``."""
        return scrub_text(text, self._secrets)
