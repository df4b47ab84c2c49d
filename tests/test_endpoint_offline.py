"""Preflight without contacting served models: ``validate --offline``, and a suite whose executor joins a running
Ray cluster (its workers, not this machine, reach the endpoints); either way the output says what was skipped."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import sentiment_tsv
from tiny_endpoint import TinyEndpoint

pytest.importorskip("httpx")

from bertprobe.cli import main
from bertprobe.errors import Problems
from bertprobe.plugins import build_plugins
from bertprobe.suite import load_suite
from bertprobe.suite.validate import check_endpoints


def _suite(tmp_path: Path, model: str, extra: str = "") -> Path:
    data = sentiment_tsv(tmp_path / "d.tsv", 8)
    path = tmp_path / "offline.yaml"
    path.write_text(f"suite: offline\n{model}\ndata: {{path: '{data}', text: sentence, label: label}}\n{extra}"
                    f"report: {{dir: '{tmp_path / 'reports'}', formats: [json]}}\nprobes:\n  - probe: accuracy\n")
    return path


def _dead() -> str:
    import socket

    with socket.socket() as s:  # bound, then closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_validate_offline_contacts_no_server_and_needs_no_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BP_OFFLINE_TOKEN", raising=False)
    url = _dead()
    suite = _suite(tmp_path, f"model: {{name: served, endpoint: '{url}', served_name: tiny, labels: [negative, positive], "
                             "headers: {Authorization: 'Bearer ${BP_OFFLINE_TOKEN}'}}")
    online = CliRunner().invoke(main, ["validate", str(suite)])
    assert online.exit_code == 2 and "BP_OFFLINE_TOKEN" in online.output, online.output
    offline = CliRunner().invoke(main, ["validate", "--offline", str(suite)])
    assert offline.exit_code == 0, offline.output
    assert "served model not contacted (--offline): served" in offline.output and "ok (1 probe" in offline.output


def test_validate_offline_still_refuses_what_it_can_tell_without_a_server(tmp_path: Path) -> None:
    suite = _suite(tmp_path, f"model: {{endpoint: '{_dead()}', labels: [a, b], headers: {{X-Auth-Token: 'literal-123'}}}}")
    result = CliRunner().invoke(main, ["validate", "--offline", str(suite)])
    assert result.exit_code == 2 and "headers.X-Auth-Token" in result.output, result.output


def test_a_joined_ray_cluster_skips_the_readiness_contact_and_says_so(tmp_path: Path, tiny_clf_dir: Path) -> None:
    with TinyEndpoint(tiny_clf_dir) as server:
        joined = _suite(tmp_path, f"model: {{name: served, endpoint: '{server.url}', served_name: tiny}}",
                        "executor: {name: ray, address: 'ray://10.0.0.7:10001'}\n")
        problems = Problems()
        note = check_endpoints(load_suite(joined), build_plugins(), problems)
        assert server.requests == 0 and not problems
        assert note is not None and "ray://10.0.0.7:10001" in note and "served" in note and "not contacted" in note
        private = _suite(tmp_path, f"model: {{name: served, endpoint: '{server.url}', served_name: tiny}}",
                         "executor: {name: ray}\n")
        assert check_endpoints(load_suite(private), build_plugins(), Problems()) is None
        assert server.requests > 0  # a private cluster runs on this machine: asked here
