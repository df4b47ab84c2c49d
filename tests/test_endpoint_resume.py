"""Resuming a served model's run recorded by an older bertprobe, whose cache keys held no headers (or told
credentials by 5 names only): it resumes under those keys and sends nothing twice; a served model that really
changed is refused with one line saying what changed."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import sentiment_tsv
from tiny_endpoint import TinyEndpoint

pytest.importorskip("httpx")

from bertprobe.cli import main
from bertprobe.model import endpoint
from bertprobe.model.credentials import SECRET_HEADERS

HEADERS = "headers: {x-model-route: '${BP_RESUME_ROUTE:-stable}', X-Auth-Token: '${BP_RESUME_TOKEN}'}"
OLDER = {
    # before the headers joined the cache key: no routing digest at all
    "no headers in the key": ("routing_digest", lambda headers: ""),
    # before credentials were told by their names' words: X-Auth-Token's value was in the digest
    "5 credential names": ("is_credential_header", lambda name: name.lower() in SECRET_HEADERS),
}


def _suite(tmp_path: Path, url: str, headers: str = HEADERS) -> Path:
    data = sentiment_tsv(tmp_path / "d.tsv", 48)
    path = tmp_path / "resume.yaml"
    path.write_text(f"suite: resume\nmodel: {{name: served, endpoint: '{url}', served_name: tiny, batch_size: 8, "
                    f"concurrency: 1, retries: 1, {headers}}}\n"
                    f"data: {{path: '{data}', text: sentence, label: label}}\nseed: 3\n"
                    f"report: {{dir: '{tmp_path / 'reports'}', formats: [json]}}\nprobes:\n"
                    "  - probe: accuracy\n    params: {single_check: 0}\n  - probe: slices\n")
    return path


def _interrupted_run(tmp_path: Path, server: TinyEndpoint, headers: str = HEADERS) -> Path:
    """A run whose server fails for good after three batches: its run folder, to resume."""
    real = server.answer
    calls = {"n": 0}

    def dying(path: str, body: object) -> tuple[int, object]:
        if path.endswith("/infer"):
            calls["n"] += 1
            if calls["n"] > 3:
                return 503, {"error": "gone"}
        return real(path, body)

    server.answer = dying  # type: ignore[method-assign]
    first = CliRunner().invoke(main, ["run", str(_suite(tmp_path, server.url, headers))])
    server.answer = real  # type: ignore[method-assign]
    assert first.exit_code == 2 and "503" in first.output, first.output
    return next((tmp_path / "reports").iterdir())


@pytest.mark.parametrize("older", sorted(OLDER))
def test_a_run_recorded_under_an_older_key_resumes_and_sends_nothing_twice(
        tmp_path: Path, tiny_clf_dir: Path, monkeypatch: pytest.MonkeyPatch, older: str) -> None:
    monkeypatch.setenv("BP_RESUME_TOKEN", "tok-resume-4471")
    monkeypatch.delenv("BP_RESUME_ROUTE", raising=False)
    name, then = OLDER[older]
    with TinyEndpoint(tiny_clf_dir) as server:
        with monkeypatch.context() as m:  # the older bertprobe's key form, for the interrupted run only
            m.setattr(endpoint, name, then)
            m.setattr(endpoint, "CACHE_KEY_NOTE", "")  # an older bertprobe recorded no key form
            run_dir = _interrupted_run(tmp_path, server)
        answered = dict(server.inputs)
        again = CliRunner().invoke(main, ["run", "--resume", str(run_dir)])
    assert again.exit_code in (0, 1), again.output  # finished (a random model fails its expectations)
    assert "cannot resume" not in again.output and "resumed under the cache keys the run was recorded with" in again.output
    twice = [text for text, n in server.inputs.items() if n > 1]
    assert len(twice) <= 8 and all(answered.get(t, 0) >= 1 for t in twice)  # only the determinism check's sample
    assert len(server.inputs) == 48
    assert "tok-resume-4471" not in again.output


def test_a_served_model_that_changed_is_refused_naming_what_changed(tmp_path: Path, tiny_clf_dir: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BP_RESUME_TOKEN", "tok-resume-4471")
    monkeypatch.delenv("BP_RESUME_ROUTE", raising=False)
    with TinyEndpoint(tiny_clf_dir) as server:
        run_dir = _interrupted_run(tmp_path, server)
        server.version = "8"  # the server now serves another version
        again = CliRunner().invoke(main, ["run", "--resume", str(run_dir)])
    assert again.exit_code == 2, again.output
    (line,) = [line for line in again.output.splitlines() if "cannot resume" in line]
    assert "version 7" in line and "version 8" in line and "start a new run" in line


def test_routing_headers_that_changed_are_named_as_such(tmp_path: Path, tiny_clf_dir: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BP_RESUME_TOKEN", "tok-resume-4471")
    monkeypatch.delenv("BP_RESUME_ROUTE", raising=False)
    with TinyEndpoint(tiny_clf_dir) as server:
        run_dir = _interrupted_run(tmp_path, server)
        monkeypatch.setenv("BP_RESUME_ROUTE", "canary")  # the suite as it was; its header routes elsewhere now
        again = CliRunner().invoke(main, ["run", "--resume", str(run_dir)])
    assert again.exit_code == 2, again.output
    (line,) = [line for line in again.output.splitlines() if "cannot resume" in line]
    assert "routing headers" in line and "canary" not in line and "tok-resume-4471" not in line


def test_a_run_recorded_under_todays_key_form_never_adopts_an_older_one() -> None:
    """A run recorded today without routing headers has the identity the older header-less form gives: its notes
    (``CACHE_KEY_NOTE``) say which form it used, so a changed identity is never explained away as an older form."""
    from types import SimpleNamespace

    identity = {"": "id-of-no-routing", "d2": "id-of-v2"}
    served = SimpleNamespace(routing="d2", older_routing=("", "d2"), _runner=None, _identity=identity.get)
    assert endpoint.EndpointTarget.adopt_identity(served, "id-of-no-routing", [endpoint.CACHE_KEY_NOTE]) is None
    assert served.routing == "d2"
    adopted = endpoint.EndpointTarget.adopt_identity(served, "id-of-no-routing", ["served at http://x (v2)"])
    assert adopted and "without its headers" in adopted and served.routing == ""  # an older run: its keys taken


def test_a_served_models_record_holds_the_key_form(tmp_path: Path, tiny_clf_dir: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    monkeypatch.setenv("BP_RESUME_TOKEN", "tok-resume-4471")
    with TinyEndpoint(tiny_clf_dir) as server:
        run_dir = _interrupted_run(tmp_path, server)
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    (loaded,) = [e for e in events if e.get("event") == "model_loaded"]
    assert endpoint.CACHE_KEY_NOTE in loaded["info"]["notes"]
