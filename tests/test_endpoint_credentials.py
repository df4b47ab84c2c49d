"""Credentials of a served model's headers: which names carry one (not only ``Authorization``), that their values
stay out of cache keys, the served identity, the run folder and every message, and the hints a refused credential
gets; with the smaller fixes of the same review (the twin's settings, one-line codec errors, what readiness asks)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import sentiment_tsv
from tiny_endpoint import TinyEndpoint

httpx = pytest.importorskip("httpx")

from bertprobe import ModelSpec
from bertprobe.cli import main
from bertprobe.harness import run_suite
from bertprobe.model.credentials import credential_words, is_credential_header
from bertprobe.model.endpoint import check_endpoint_spec, routing_digest, twin_spec
from bertprobe.model.http_client import ClientSettings, EndpointClient, EndpointError, secrets_of
from bertprobe.model.loading import load_target
from bertprobe.plugins import build_plugins
from bertprobe.suite import load_suite

CREDENTIALS = ("X-Auth-Token", "X-Goog-Api-Key", "Ocp-Apim-Subscription-Key", "X-Amz-Security-Token",
               "X-Client-Secret", "X-Signature", "Set-Cookie", "x-session-id", "X-Password")
ROUTING = ("Host", "x-model-route", "x-model-version", "Content-Type", "Accept", "X-Request-Id",
           "X-Tokenizer-Version", "X-Author", "X-Sticky-Session", "X-Monkey")  # credential words inside other words


def _suite(tmp_path: Path, model: str, data: Path, probes: str = "  - probe: accuracy\n    params: {single_check: 0}\n",
           name: str = "creds") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"suite: {name}\n{model}\ndata: {{path: '{data}', text: sentence, label: label}}\nseed: 3\n"
                    f"report: {{dir: '{tmp_path / 'reports'}', formats: [json, markdown, html]}}\nprobes:\n{probes}")
    return path


def _files_text(folder: Path) -> str:
    return "".join(p.read_bytes().decode("utf-8", "replace") for p in folder.rglob("*") if p.is_file())


@pytest.mark.parametrize("name", CREDENTIALS + ("Authorization", "proxy-authorization", "API-KEY", "cookie"))
def test_a_header_naming_a_token_key_secret_or_auth_is_a_credential(name: str) -> None:
    assert is_credential_header(name) and is_credential_header(name.upper()) and is_credential_header(name.lower())
    assert routing_digest({"Host": "a.example", name: "tok-1"}) == routing_digest({"Host": "a.example"})
    (problem,) = check_endpoint_spec(ModelSpec(path="http://h:1", endpoint="http://h:1", headers={name: "abc123"}))
    assert problem.startswith(f"headers.{name}: ") and "${VAR}" in problem


@pytest.mark.parametrize("name", ROUTING)
def test_a_header_that_routes_is_no_credential_and_keys_the_cache(name: str) -> None:
    assert not is_credential_header(name)
    assert routing_digest({name: "a"}) != routing_digest({name: "b"})


def test_a_credential_header_of_any_such_name_stays_out_of_the_identity_the_run_folder_and_the_report(
        tmp_path: Path, tiny_clf_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tokens = {"BP_AUTH": "authtok-91c2e7", "BP_GOOG": "goog-55ad01", "BP_APIM": "apim-7e3f20"}
    for var, value in tokens.items():
        monkeypatch.setenv(var, value)
    headers = {"X-Auth-Token": "${BP_AUTH}", "X-Goog-Api-Key": "${BP_GOOG}", "Ocp-Apim-Subscription-Key": "${BP_APIM}",
               "x-model-route": "stable"}
    data = sentiment_tsv(tmp_path / "d.tsv", 12)
    with TinyEndpoint(tiny_clf_dir) as server:
        spec = ModelSpec(path=server.url, endpoint=server.url, served_name="tiny", headers=headers)
        first = load_target(spec)
        identity, scope = first.served_identity, repr(first.cache_scope)
        first.close()
        monkeypatch.setenv("BP_AUTH", "authtok-rotated-0d4b")  # a rotated token: the same model served
        rotated = load_target(spec)
        assert rotated.served_identity == identity
        rotated.close()
        model = (f"model: {{name: served, endpoint: '{server.url}', served_name: tiny, headers: "
                 "{X-Auth-Token: '${BP_AUTH}', X-Goog-Api-Key: '${BP_GOOG}', Ocp-Apim-Subscription-Key: '${BP_APIM}', "
                 "x-model-route: stable}}")
        session = run_suite(load_suite(_suite(tmp_path, model, data)), build_plugins())
        seen = server.headers_seen
    assert any(h.get("X-Goog-Api-Key") == tokens["BP_GOOG"] for h in seen)  # they were sent
    written = _files_text(session.run_dir)
    for value in [*tokens.values(), "authtok-rotated-0d4b"]:
        assert value not in written and value not in identity and value not in scope
    assert "stable" not in scope  # the routing header enters as a digest only


def test_the_token_of_a_short_credential_is_scrubbed_alone_and_common_words_are_not() -> None:
    token = "ab12cd"  # under the 8 characters a routing header's words need to be scrubbed alone

    def echo(request: httpx.Request) -> httpx.Response:  # a server that quotes the token it refuses
        return httpx.Response(401, text=f"token {token} is not valid for this model (api_key={token}); latest keys "
                                        "at /keys")

    headers = {"Authorization": f"Bearer {token}", "X-Auth-Token": "test"}
    c = EndpointClient("http://serving.test:8080", headers, ClientSettings(retries=0),
                       transport=httpx.MockTransport(echo))
    with pytest.raises(EndpointError) as caught:
        c.get_json("/info")
    text = str(caught.value)
    assert token not in text and "token *** is not valid" in text and "api_key=***" in text  # after "=" too
    assert "latest" in text and "Bearer" not in secrets_of(headers)  # "test" is scrubbed as a word, not inside one
    assert "check the model's headers:" in text and "check the URL" not in text
    assert "\n" not in text
    assert credential_words("Bearer ab12cd") == ["ab12cd"] and credential_words("Basic xy") == []


def test_readiness_of_a_refused_credential_names_the_headers_not_the_url(tmp_path: Path, tiny_clf_dir: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BP_TOK", "tok-wrong-31")
    data = sentiment_tsv(tmp_path / "d.tsv", 8)
    with TinyEndpoint(tiny_clf_dir) as server:
        real = server.answer
        server.answer = lambda path, body: (403, {"error": "forbidden"})  # type: ignore[method-assign]
        suite = _suite(tmp_path, f"model: {{endpoint: '{server.url}', served_name: tiny, "
                                 "headers: {X-Auth-Token: '${BP_TOK}'}}", data)
        result = CliRunner().invoke(main, ["validate", str(suite)])
        server.answer = real  # type: ignore[method-assign]
    assert result.exit_code == 2, result.output
    (line,) = [line for line in result.output.splitlines() if "HTTP 403" in line]
    assert "check the model's headers:" in line and "check the URL" not in line and "tok-wrong-31" not in line


def test_an_entry_refused_by_its_checks_is_not_contacted(tmp_path: Path, tiny_clf_dir: Path) -> None:
    data = sentiment_tsv(tmp_path / "d.tsv", 8)
    with TinyEndpoint(tiny_clf_dir) as server:
        suite = _suite(tmp_path, f"model: {{endpoint: '{server.url}', served_name: tiny, "
                                 "headers: {X-Api-Token: 'literal-token-123'}}", data)
        result = CliRunner().invoke(main, ["validate", str(suite)])
        sent = server.requests
    assert result.exit_code == 2 and "headers.X-Api-Token" in result.output, result.output
    assert sent == 0  # a literal token is never sent anywhere, not even to ask readiness
    assert "literal-token-123" not in result.output


def test_the_twin_loads_with_the_entrys_revision_thresholds_and_settings() -> None:
    spec = ModelSpec(path="http://h:1", endpoint="http://h:1", twin="./models/tagger", revision="v1.2",
                     threshold=0.3, thresholds={"toxic": 0.2}, stride=16, token_budget=4096,
                     allow_missing_weights=True, device="cpu", batch_size=8)
    twin = twin_spec(spec)
    assert twin is not None and twin.path == "./models/tagger" and twin.endpoint is None
    assert (twin.revision, twin.threshold, twin.thresholds, twin.stride, twin.token_budget) == (
        "v1.2", 0.3, {"toxic": 0.2}, 16, 4096)
    assert twin.allow_missing_weights and twin.device == "cpu" and twin.batch_size == 8 and twin.dtype == spec.dtype


def test_a_codec_error_of_several_lines_that_names_the_endpoint_is_one_line() -> None:
    from bertprobe.errors import CodecError
    from bertprobe.model.endpoint_runner import EndpointRunner
    from bertprobe.model.response_cache import ResponseCache

    url = "http://serving.test:8080"

    class Talkative:
        name = "talkative"

        def infer_path(self, model: str) -> str:
            return "/infer"

        def request(self, items: list) -> dict:
            return {"inputs": items}

        def response(self, body: object, items: list) -> list:
            raise CodecError(f"endpoint {url}: the answer is odd\n  first detail\n  second detail")

    c = EndpointClient(url, {}, ClientSettings(retries=0),
                       transport=httpx.MockTransport(lambda r: httpx.Response(200, json={"x": 1})))
    with pytest.raises(CodecError) as caught:
        EndpointRunner(c, Talkative(), ResponseCache(None), (url, "m", "1", "talkative")).run([{"text": "a"}])
    text = str(caught.value)
    assert "\n" not in text and "first detail" in text and text.count(f"endpoint {url}") == 1
