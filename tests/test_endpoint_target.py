"""A served model as the target (bertprobe.model.endpoint), end to end over loopback on tiny random checkpoints:
the endpoint audits to the checkpoint's numbers, tokens stay out of the run folder, a labels-only endpoint is
refused what needs scores, a resumed audit sends nothing twice, and the twin runs what an endpoint cannot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import sentiment_tsv
from tiny_endpoint import TinyEndpoint

pytest.importorskip("httpx")

from bertprobe import ModelSpec
from bertprobe.cli import main
from bertprobe.data import Example
from bertprobe.harness import run_suite
from bertprobe.model.loading import load_target
from bertprobe.plugins import build_plugins
from bertprobe.suite import load_suite

TEXTS = ["a fine film", "dull and slow", "the movie was good", "bad", "it was fun , and great"]


def _suite(tmp_path: Path, models: str, probes: str, data: Path, name: str = "served") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"suite: {name}\n{models}\ndata: {{path: '{data}', text: sentence, label: label}}\nseed: 3\n"
                    f"report: {{dir: '{tmp_path / 'reports'}', formats: [json]}}\nprobes:\n{probes}")
    return path


def _files_text(folder: Path) -> str:
    return "".join(p.read_bytes().decode("utf-8", "replace") for p in folder.rglob("*") if p.is_file())


@pytest.mark.parametrize("protocol", ["v2", "v1", "hf"])
def test_an_endpoint_predicts_the_checkpoints_probabilities(tiny_clf_dir: Path, protocol: str) -> None:
    examples = [Example(text=t, id=str(i)) for i, t in enumerate(TEXTS)]
    local = load_target(ModelSpec(path=str(tiny_clf_dir), device="cpu"))
    with TinyEndpoint(tiny_clf_dir) as server:
        labels = local.label_names if protocol == "v1" else ()  # v1 names no classes: the suite does
        served = load_target(ModelSpec(path=server.url, endpoint=server.url, protocol=protocol, served_name="tiny",
                                       device="cpu", labels=tuple(labels)))
        got = served.predict_proba(examples)
    want = local.predict_proba(examples)
    assert served.label_names == local.label_names
    assert float((got - want).abs().max()) < 1e-6
    assert served.predict(examples) == local.predict(examples)
    assert any("version 7" in n or protocol == "v1" for n in served.notes)
    assert "gradients" not in served.capabilities and "probabilities" in served.capabilities


def test_a_multi_label_endpoint_reads_its_sigmoids_back(tmp_path: Path) -> None:
    """Independent sigmoids (rows that need not sum to 1) are read as probabilities and inverted as log-odds, so the
    task's sigmoid gives the served probabilities and the thresholds decide as on the checkpoint."""
    from bertprobe.testing import save_tiny_model

    tagger = save_tiny_model(tmp_path / "tags", task="multi-label", labels=("anger", "joy", "fear"), seed=2)
    examples = [Example(text=t, id=str(i)) for i, t in enumerate(TEXTS)]
    local = load_target(ModelSpec(path=str(tagger), device="cpu"))
    with TinyEndpoint(tagger) as server:
        served = load_target(ModelSpec(path=server.url, endpoint=server.url, served_name="tiny", task="multi-label"))
        got = served.predict_proba(examples)
    assert float((got - local.predict_proba(examples)).abs().max()) < 1e-5
    assert served.predict(examples) == local.predict(examples)


def test_the_endpoint_audits_to_the_checkpoints_numbers_and_keeps_tokens_out_of_the_run(
        tmp_path: Path, tiny_clf_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token = "tok-3f9a8c77d1e2b4a6"
    monkeypatch.setenv("BP_TEST_TOKEN", token)
    data = sentiment_tsv(tmp_path / "d.tsv", 40)
    with TinyEndpoint(tiny_clf_dir) as server:
        models = (f"models:\n  - {{name: checkpoint, path: '{tiny_clf_dir}', device: cpu}}\n"
                  f"  - {{name: endpoint, endpoint: '{server.url}', served_name: tiny, batch_size: 8,\n"
                  "     headers: {Authorization: 'Bearer ${BP_TEST_TOKEN}'}}\n"
                  "compare: {baseline: checkpoint}")
        suite = _suite(tmp_path, models, "  - probe: accuracy\n    params: {single_check: 0}\n"
                                         "  - probe: calibration\n", data)
        session = run_suite(load_suite(suite), build_plugins())
        assert any(h.get("Authorization") == f"Bearer {token}" for h in server.headers_seen)
    report = session.report
    for metric in ("accuracy", "ece", "brier"):
        probe = "accuracy" if metric == "accuracy" else "calibration"
        assert report.result("endpoint", probe).value(metric) == pytest.approx(
            report.result("checkpoint", probe).value(metric), abs=1e-6)
    (agreement,) = [a for a in report.agreement if a.probe_id == "accuracy"]
    assert agreement.rate == 1.0 and agreement.paired == 40
    endpoint = next(m for m in report.models if m.name == "endpoint")
    assert any("version 7" in n for n in endpoint.notes) and any(n.startswith("deterministic") for n in endpoint.notes)
    assert token not in _files_text(session.run_dir)
    assert (session.run_dir / "endpoint-cache.sqlite").is_file()
    # each input was sent once, but for the determinism check's sample, sent a second time by design
    assert sorted(set(server.inputs.values())) in ([1, 2], [2])
    assert sum(c == 2 for c in server.inputs.values()) == 8


def test_two_entries_at_one_url_routed_by_a_header_share_no_answers(tmp_path: Path, tiny_clf_dir: Path) -> None:
    """The routing headers are part of every cache key (as a digest): entries that differ by one header get their
    own model's answers from one cache file, which holds no header value."""
    examples = [Example(text=t, id=str(i)) for i, t in enumerate(TEXTS)]
    file = tmp_path / "run" / "endpoint-cache.sqlite"
    canary, stable = "canary-route-7f3a91", "stable-route-2c4e08"
    with TinyEndpoint(tiny_clf_dir, flip_on=("x-model-route", canary)) as server:
        got = []
        for route in (stable, canary, stable):
            served = load_target(ModelSpec(path=server.url, endpoint=server.url, served_name="tiny",
                                           headers={"x-model-route": route}))
            served.attach_cache(file)
            got.append(served.predict_proba(examples))
            served.close()
        sent = dict(server.inputs)
    assert float((got[1] - got[0].flip(-1)).abs().max()) < 1e-6  # the canary's own answers, not the stable's cached
    assert float((got[2] - got[0]).abs().max()) == 0.0
    assert all(n >= 2 for n in sent.values())  # each text sent under each route; the third entry sent nothing new
    stored = file.read_bytes()
    assert canary.encode() not in stored and stable.encode() not in stored and b"x-model-route" not in stored


def test_the_routing_digest_leaves_credentials_out_and_reads_names_in_any_case() -> None:
    from bertprobe.model.endpoint import routing_digest
    from bertprobe.model.response_cache import ResponseCache

    assert routing_digest({}) == "" == routing_digest({"Authorization": "Bearer abc"})
    assert routing_digest({"Host": "a.example", "Authorization": "Bearer x"}) == routing_digest({"host": "a.example"})
    assert routing_digest({"Host": "a.example"}) != routing_digest({"Host": "b.example"})
    item = {"text": "a"}
    assert ResponseCache.scoped_key(("u", "m", "1", "v2"), item) == ResponseCache.key("u", "m", "1", "v2", item)
    assert ResponseCache.scoped_key(("u", "m", "1", "v2", routing_digest({"Host": "a"})), item) != \
        ResponseCache.key("u", "m", "1", "v2", item)


def test_a_labels_only_endpoint_runs_accuracy_and_refuses_calibration_before_any_request(
        tmp_path: Path, tiny_clf_dir: Path) -> None:
    data = sentiment_tsv(tmp_path / "d.tsv", 20)
    with TinyEndpoint(tiny_clf_dir, labels_only=True) as server:
        suite = _suite(tmp_path, f"model: {{endpoint: '{server.url}', served_name: tiny}}", "  - probe: calibration\n",
                       data)
        session = run_suite(load_suite(suite), build_plugins())
        assert not server.inputs  # refused before a single input was sent
        (result,) = session.report.probes
        assert result.status == "skipped" and "no scores" in result.message and "probabilities" in result.message
        suite = _suite(tmp_path, f"model: {{endpoint: '{server.url}', served_name: tiny}}",
                       "  - probe: accuracy\n    params: {single_check: 0}\n", data, "labels")
        session = run_suite(load_suite(suite), build_plugins())
    local = load_target(ModelSpec(path=str(tiny_clf_dir), device="cpu"))
    examples = session.caches.aligned(load_suite(suite).data, local).examples
    gold = [ex.label for ex in examples]
    expected = sum(p == g for p, g in zip(local.predict(examples), gold)) / len(gold)
    assert session.report.result(session.report.models[0].name, "accuracy").value("accuracy") == pytest.approx(expected)


def test_declared_labels_only_is_refused_by_validate_and_gradients_without_a_twin(tmp_path: Path) -> None:
    data = sentiment_tsv(tmp_path / "d.tsv", 10)
    model = "model: {endpoint: 'http://127.0.0.1:9', outputs: labels, task: classification, labels: [negative, positive]}"
    suite = _suite(tmp_path, model, "  - probe: calibration\n  - probe: attention-audit\n", data)
    result = CliRunner().invoke(main, ["validate", str(suite)])
    assert result.exit_code == 2, result.output
    assert "calibration" in result.output and "no scores" in result.output
    assert "attention-audit" in result.output and "twin:" in result.output
    assert "Traceback" not in result.output


def test_a_missing_token_variable_and_a_literal_token_are_one_line_errors(tmp_path: Path,
                                                                           tiny_clf_dir: Path) -> None:
    data = sentiment_tsv(tmp_path / "d.tsv", 10)
    literal = _suite(tmp_path, "model: {endpoint: 'http://127.0.0.1:9', headers: {Authorization: 'Bearer abc123'}}",
                     "  - probe: accuracy\n", data, "literal")
    result = CliRunner().invoke(main, ["validate", str(literal)])
    assert result.exit_code == 2 and "${VAR}" in result.output
    with TinyEndpoint(tiny_clf_dir) as server:
        unset = _suite(tmp_path, f"model: {{endpoint: '{server.url}', served_name: tiny, "
                                 "headers: {Authorization: 'Bearer ${BP_NOT_SET_ANYWHERE}'}}", "  - probe: accuracy\n",
                       data, "unset")
        result = CliRunner().invoke(main, ["run", str(unset)])
    assert result.exit_code == 2, result.output
    assert "BP_NOT_SET_ANYWHERE" in result.output and "Traceback" not in result.output


def test_headers_take_var_defaults_as_suite_values_do_and_a_credential_may_not() -> None:
    from bertprobe.errors import TargetError
    from bertprobe.model.endpoint import check_endpoint_spec, headers_from_env

    headers = {"x-model-version": "${BP_MODEL_VERSION:-3}", "Host": "${BP_HOST-sst2.local}",
               "Authorization": "Bearer ${BP_TOKEN}"}
    env = {"BP_TOKEN": "tok-123"}
    assert headers_from_env(headers, env) == {"x-model-version": "3", "Host": "sst2.local",
                                              "Authorization": "Bearer tok-123"}
    env = {"BP_TOKEN": "tok-123", "BP_MODEL_VERSION": "", "BP_HOST": ""}  # :- takes the default when empty, - not
    assert headers_from_env(headers, env)["x-model-version"] == "3" and headers_from_env(headers, env)["Host"] == ""
    assert headers_from_env(headers, {"BP_TOKEN": "t", "BP_MODEL_VERSION": "5"})["x-model-version"] == "5"
    with pytest.raises(TargetError, match=r"BP_TOKEN\}, which is not set"):
        headers_from_env(headers, {})
    spec = ModelSpec(path="http://h:1", endpoint="http://h:1", headers=headers)
    assert check_endpoint_spec(spec) == []
    for literal in ("Bearer ${BP_TOKEN:-sk-abc123}", "Bearer ${BP_TOKEN-sk-abc123}", "Bearer sk-abc123"):
        (problem,) = check_endpoint_spec(ModelSpec(path="http://h:1", endpoint="http://h:1",
                                                   headers={"Authorization": literal}))
        assert problem.startswith("headers.Authorization: ") and "${VAR}" in problem
    assert check_endpoint_spec(ModelSpec(path="http://h:1", endpoint="http://h:1",
                                         headers={"Authorization": "Bearer ${BP_TOKEN:-}"})) == []


def test_a_header_default_reaches_the_server(tmp_path: Path, tiny_clf_dir: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BP_ROUTE", raising=False)
    data = sentiment_tsv(tmp_path / "d.tsv", 8)
    with TinyEndpoint(tiny_clf_dir) as server:
        model = (f"model: {{endpoint: '{server.url}', served_name: tiny, "
                 "headers: {x-model-route: '${BP_ROUTE:-stable-9}'}}")
        suite = _suite(tmp_path, model, "  - probe: accuracy\n    params: {single_check: 0}\n", data)
        assert CliRunner().invoke(main, ["validate", str(suite)]).exit_code == 0
        result = CliRunner().invoke(main, ["run", str(suite)])
        assert result.exit_code in (0, 1), result.output
        assert server.headers_seen and all(h.get("x-model-route") == "stable-9" for h in server.headers_seen)


def _dead_port() -> int:
    import socket

    with socket.socket() as s:  # bound, then closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_validate_and_run_name_every_endpoint_that_does_not_answer_before_a_run_folder(
        tmp_path: Path, tiny_clf_dir: Path) -> None:
    import time

    data = sentiment_tsv(tmp_path / "d.tsv", 8)
    dead = [f"http://127.0.0.1:{_dead_port()}", f"http://127.0.0.1:{_dead_port()}"]
    with TinyEndpoint(tiny_clf_dir) as server:
        models = (f"models:\n  - {{name: live, endpoint: '{server.url}', served_name: tiny}}\n"
                  f"  - {{name: gone, endpoint: '{dead[0]}', served_name: tiny, labels: [negative, positive]}}\n"
                  f"  - {{name: also-gone, endpoint: '{dead[1]}', protocol: hf, labels: [negative, positive]}}\n")
        probes = "  - probe: accuracy\n    params: {single_check: 0}\n"
        suite = _suite(tmp_path, models, probes, data)
        started = time.monotonic()
        checked = CliRunner().invoke(main, ["validate", str(suite)])
        took = time.monotonic() - started
        ran = CliRunner().invoke(main, ["run", str(suite)])
        live_only = _suite(tmp_path, f"model: {{endpoint: '{server.url}', served_name: tiny}}", probes, data, "live")
        ok = CliRunner().invoke(main, ["validate", str(live_only)])
        wrong_name = _suite(tmp_path, f"model: {{endpoint: '{server.url}', served_name: nosuch}}", probes, data,
                            "named")
        misnamed = CliRunner().invoke(main, ["validate", str(wrong_name)])
    for result in (checked, ran):
        assert result.exit_code == 2, result.output
        assert "Traceback" not in result.output
        lines = [line for line in result.output.splitlines() if "does not answer" in line]
        assert len(lines) == 2 and all(any(url in line for line in lines) for url in dead), result.output
        assert all("start the server, or check the URL" in line for line in lines)
        assert server.url not in result.output
    assert took < 10, took  # no retries, a short timeout: refused connections come back at once
    assert not (tmp_path / "reports").exists()  # refused before any run folder
    assert ok.exit_code == 0 and "ok" in ok.output, ok.output
    assert misnamed.exit_code == 2 and "HTTP 404" in misnamed.output and "served_name" in misnamed.output, \
        misnamed.output


def test_validate_of_a_local_suite_imports_no_http_client(tmp_path: Path, tiny_clf_dir: Path) -> None:
    import subprocess
    import sys

    data = sentiment_tsv(tmp_path / "d.tsv", 8)
    suite = _suite(tmp_path, f"model: {{path: '{tiny_clf_dir}', device: cpu}}", "  - probe: accuracy\n", data)
    code = ("import sys\nfrom bertprobe.cli import main\ntry:\n    main.main(['validate', sys.argv[1]])\n"
            "except SystemExit as e:\n    code = e.code\n"
            "print(sorted(m for m in sys.modules if m in ('httpx', 'bertprobe.model.http_client', "
            "'bertprobe.model.endpoint_ready', 'bertprobe.model.endpoint')), code)")
    done = subprocess.run([sys.executable, "-c", code, str(suite)], capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.stdout.strip().splitlines()[-1] == "[] 0", done.stdout + done.stderr


@pytest.mark.parametrize("protocol, body", [
    ("v2", {"outputs": [{"name": "out", "datatype": None, "shape": [8, 2], "data": [0.5] * 16}]}),  # AttributeError
    ("v2", {"outputs": [{"name": "logits", "datatype": "FP32", "shape": [8, "two"], "data": [0.5] * 16}]}),  # ValueError
    ("hf", [{"label": "negative"}] * 8),  # a list of dicts without scores: the codec's own refusal, named
])
def test_a_malformed_answer_inside_a_batch_is_a_one_line_exit_2_naming_the_endpoint(
        tmp_path: Path, tiny_clf_dir: Path, protocol: str, body: object) -> None:
    data = sentiment_tsv(tmp_path / "d.tsv", 8)
    with TinyEndpoint(tiny_clf_dir) as server:
        real = server.answer

        def malformed(path: str, got: object) -> tuple[int, object]:
            if path.endswith(("/infer", "/predict")):
                return 200, body
            return real(path, got)

        server.answer = malformed  # type: ignore[method-assign]
        model = f"model: {{endpoint: '{server.url}', served_name: tiny, protocol: {protocol}, batch_size: 8}}"
        suite = _suite(tmp_path, model, "  - probe: accuracy\n    params: {single_check: 0}\n", data)
        result = CliRunner().invoke(main, ["run", str(suite)])
    assert result.exit_code == 2, result.output
    (line,) = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert f"endpoint {server.url}" in line and "Traceback" not in result.output
    if protocol == "v2":
        assert "expected" in line and "got {" in line and "does not fit" in line


def test_a_server_that_fails_for_good_stops_the_run_and_a_resumed_run_sends_nothing_twice(
        tmp_path: Path, tiny_clf_dir: Path) -> None:
    data = sentiment_tsv(tmp_path / "d.tsv", 48)
    with TinyEndpoint(tiny_clf_dir) as server:
        model = f"model: {{endpoint: '{server.url}', served_name: tiny, batch_size: 8, concurrency: 1, retries: 1}}"
        probes = "  - probe: accuracy\n    params: {single_check: 0}\n  - probe: slices\n"
        suite = _suite(tmp_path, model, probes, data)
        real = server.answer
        calls = {"n": 0}

        def dying(path: str, body: object) -> tuple[int, object]:
            if path.endswith("/infer"):
                calls["n"] += 1
                if calls["n"] > 3:  # three batches answered, then the server fails for good
                    return 503, {"error": "gone"}
            return real(path, body)

        server.answer = dying  # type: ignore[method-assign]
        first = CliRunner().invoke(main, ["run", str(suite)])
        assert first.exit_code == 2, first.output
        assert server.url in first.output and "503" in first.output and "Traceback" not in first.output
        run_dir = next((tmp_path / "reports").iterdir())
        assert (run_dir / "endpoint-cache.sqlite").is_file()
        answered = dict(server.inputs)
        server.answer = real  # type: ignore[method-assign]
        again = CliRunner().invoke(main, ["run", "--resume", str(run_dir)])
        assert again.exit_code in (0, 1), again.output  # finished (a random model fails its expectations)
        assert "resum" in again.output.lower() or again.exit_code in (0, 1)
    twice = [text for text, n in server.inputs.items() if n > 1]
    assert len(twice) <= 8  # only the determinism check's sample
    assert all(answered.get(t, 0) >= 1 for t in twice)
    assert len(server.inputs) == 48


def test_the_twin_runs_what_an_endpoint_cannot(tmp_path: Path, tiny_clf_dir: Path) -> None:
    data = sentiment_tsv(tmp_path / "d.tsv", 12)
    with TinyEndpoint(tiny_clf_dir) as server:
        model = f"model: {{endpoint: '{server.url}', served_name: tiny, twin: '{tiny_clf_dir}', device: cpu}}"
        suite = _suite(tmp_path, model, "  - probe: attention-audit\n", data)
        session = run_suite(load_suite(suite), build_plugins())
        assert not server.inputs  # the attention maps came from the twin alone
    (result,) = session.report.probes
    assert result.status in ("passed", "failed", "measured"), result.message
    assert result.metrics  # attention statistics, read from the twin
    assert "twin" in result.details["ran_on"]


def test_the_twin_of_a_served_entry_and_the_baseline_checkpoint_load_once(
        tmp_path: Path, tiny_clf_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """suites/serving.yaml's shape: the checkpoint as the baseline and the endpoint with that checkpoint as its twin."""
    import transformers

    data = sentiment_tsv(tmp_path / "d.tsv", 12)
    with TinyEndpoint(tiny_clf_dir) as server:
        loads: list[str] = []
        cls = transformers.AutoModelForSequenceClassification
        real = cls.from_pretrained.__func__

        def counted(klass, path, *args, **kwargs):
            loads.append(str(path))
            return real(klass, path, *args, **kwargs)

        monkeypatch.setattr(cls, "from_pretrained", classmethod(counted))
        models = (f"models:\n  - {{name: checkpoint, path: '{tiny_clf_dir}', device: cpu}}\n"
                  f"  - {{name: endpoint, endpoint: '{server.url}', served_name: tiny, twin: '{tiny_clf_dir}', "
                  "device: cpu}\ncompare: {baseline: checkpoint}")
        session = run_suite(load_suite(_suite(tmp_path, models, "  - probe: accuracy\n    params: {single_check: 0}\n"
                                              "  - probe: attention-audit\n", data)), build_plugins())
    assert loads == [str(tiny_clf_dir)], loads  # once, for the checkpoint and the twin together
    twin = next(r for r in session.report.probes if r.model == "endpoint" and r.id == "attention-audit")
    assert "twin" in twin.details["ran_on"]


def test_a_nondeterministic_endpoint_is_named_in_the_report(tmp_path: Path, tiny_clf_dir: Path) -> None:
    data = sentiment_tsv(tmp_path / "d.tsv", 16)
    with TinyEndpoint(tiny_clf_dir, noise=0.05) as server:
        suite = _suite(tmp_path, f"model: {{endpoint: '{server.url}', served_name: tiny}}",
                       "  - probe: accuracy\n    params: {single_check: 0}\n", data)
        session = run_suite(load_suite(suite), build_plugins())
    notes = session.report.models[0].notes
    assert any(n.startswith("nondeterministic: ") for n in notes), notes
    summary = json.loads((session.run_dir / "report.json").read_text())
    assert any("nondeterministic" in n for m in summary["models"] for n in m["notes"])


def test_a_codec_plugin_speaks_its_own_wire_shape(tiny_clf_dir: Path) -> None:
    """The example plugin's ``example-json`` codec, registered through ``bertprobe_register_codecs``."""
    pytest.importorskip("bertprobe_example.codec")  # installed: its entry point registers it
    from bertprobe.model.loading import load_target as load

    plugins = build_plugins()
    assert "example-json" in plugins.codecs.names()
    examples = [Example(text=t, id=str(i)) for i, t in enumerate(TEXTS)]
    local = load(ModelSpec(path=str(tiny_clf_dir), device="cpu"))
    with TinyEndpoint(tiny_clf_dir) as server:
        spec = ModelSpec(path=server.url, endpoint=server.url, protocol="example-json",
                         labels=tuple(local.label_names))
        served = load(spec, plugins.tasks, plugins.codecs)
        got = served.predict_proba(examples)
    assert float((got - local.predict_proba(examples)).abs().max()) < 1e-6


def test_credentials_in_the_url_and_a_model_path_in_it_are_refused() -> None:
    for url, words in (("https://api.example.com/?api_key=abc", "query"), ("https://u:pw@api.example.com", "password"),
                       ("http://127.0.0.1:8080/v2/models/sst2", "served_name")):
        with pytest.raises(ValueError, match=words):
            ModelSpec(path=url, endpoint=url)
    assert ModelSpec(path="http://h:1", endpoint="http://h:1", name="sst2").served_model == "sst2"


def test_a_labels_only_endpoint_with_a_twin_never_takes_calibration_from_the_twin(tmp_path: Path,
                                                                                    tiny_clf_dir: Path) -> None:
    data = sentiment_tsv(tmp_path / "d.tsv", 12)
    with TinyEndpoint(tiny_clf_dir, labels_only=True) as server:
        model = f"model: {{endpoint: '{server.url}', served_name: tiny, twin: '{tiny_clf_dir}', device: cpu}}"
        session = run_suite(load_suite(_suite(tmp_path, model, "  - probe: calibration\n", data)), build_plugins())
        assert not server.inputs
    (result,) = session.report.probes
    assert result.status == "skipped" and "no scores" in result.message and "ran_on" not in result.details


def test_labels_from_an_endpoint_said_to_give_scores_are_one_line_errors(tiny_clf_dir: Path) -> None:
    from bertprobe.errors import TargetError

    examples = [Example(text=t, id=str(i)) for i, t in enumerate(TEXTS)]
    with TinyEndpoint(tiny_clf_dir, labels_only=True) as server:
        served = load_target(ModelSpec(path=server.url, endpoint=server.url, protocol="v1", served_name="tiny",
                                       labels=("negative", "positive"), outputs="probabilities"))
        with pytest.raises(TargetError, match="set outputs: labels"):
            served.predict_proba(examples)


def test_model_on_a_served_entry_names_its_twin_and_a_url_makes_an_entry_served() -> None:
    from bertprobe.suite.overrides import at_path

    served = ModelSpec(path="http://h:1", endpoint="http://h:1", twin="./old")
    assert (at_path(served, "./ckpt").endpoint, at_path(served, "./ckpt").twin) == ("http://h:1", "./ckpt")
    local = at_path(ModelSpec(path="./a"), "https://h:2")
    assert local.endpoint == "https://h:2" and at_path(ModelSpec(path="./a"), "./b").path == "./b"


def test_a_bare_url_moves_only_the_served_entries_and_leaves_the_checkpoint() -> None:
    """serving.yaml --model http://...: the endpoint entry is pointed there, the checkpoint baseline stays a
    checkpoint (it had become a second copy of the endpoint, compared with itself)."""
    from dataclasses import replace

    from bertprobe.suite.overrides import override_models

    checkpoint = ModelSpec(path="./ckpt", name="checkpoint")
    served = ModelSpec(path="http://h:1", endpoint="http://h:1", twin="./ckpt", name="endpoint")
    suite = type("S", (), {"models": (checkpoint, served)})()
    moved = override_models(suite, ("http://h:9",))
    assert moved[0] == checkpoint and (moved[1].endpoint, moved[1].twin) == ("http://h:9", "./ckpt")
    alone = type("S", (), {"models": (replace(checkpoint, name=None),)})()
    assert override_models(alone, ("http://h:9",))[0].endpoint == "http://h:9"  # no served entry: it becomes one
