"""The example servers (examples/serving) answer the shapes bertprobe's endpoint codecs read, with the checkpoint's
own numbers; the fault proxy injects what it is told and counts what it forwards. Raw httpx calls, no bertprobe."""

from __future__ import annotations

import json

import numpy as np
import pytest
from servers import (
    SQUAD_MODEL,
    SQUAD_TEST,
    SST2_MODEL,
    fault_proxy,
    kserve_server,
    require_fixture,
    require_serve,
    sst2_sentences,
    tei_server,
)

pytestmark = pytest.mark.serve

httpx = pytest.importorskip("httpx", reason="httpx is not installed (the [serve] extra): pip install -e '.[serve]'")


@pytest.fixture(scope="module")
def sentences() -> list[str]:
    return [t for t, _ in sst2_sentences(5)]


@pytest.fixture(scope="module")
def reference():
    """The checkpoint's own softmax and logits in fp32, one sentence at a time (no padding)."""
    require_fixture(SST2_MODEL)
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(SST2_MODEL)
    model = AutoModelForSequenceClassification.from_pretrained(SST2_MODEL, dtype=torch.float32).eval()

    def run(texts, max_length: int = 512):
        rows = []
        with torch.inference_mode():
            for t in texts:
                enc = tok(t, truncation=True, max_length=max_length, return_tensors="pt")
                rows.append(model(**enc).logits[0].float())
        logits = torch.stack(rows)
        return torch.softmax(logits, -1).numpy(), logits.numpy()

    return run


@pytest.fixture(scope="module")
def sst2_kserve():
    with kserve_server(SST2_MODEL, name="sst2", extra=["--version", "3"]) as server:
        yield server


@pytest.fixture(scope="module")
def client():
    with httpx.Client(timeout=60.0) as c:
        yield c


def v2_body(texts: list[str]) -> dict:
    return {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [len(texts)], "data": texts}]}


def test_kserve_v2_equals_the_checkpoint(sst2_kserve, client, sentences, reference):
    r = client.post(f"{sst2_kserve.url}/v2/models/sst2/infer", json=v2_body(sentences))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["model_version"] == "3"
    (out,) = body["outputs"]
    assert out["name"] == "probabilities" and out["datatype"] == "FP32" and out["shape"] == [5, 2]
    assert out["parameters"]["labels"] == "negative,positive"
    probs = np.array(out["data"], dtype=np.float32).reshape(5, 2)
    np.testing.assert_allclose(probs, reference(sentences)[0], atol=1e-6, rtol=0)


def test_kserve_metadata_and_readiness(sst2_kserve, client):
    meta = client.get(f"{sst2_kserve.url}/v2/models/sst2").json()
    assert meta["name"] == "sst2" and meta["versions"] == ["3"]
    assert meta["inputs"][0]["datatype"] == "BYTES" and meta["outputs"][0]["name"] == "probabilities"
    assert client.get(f"{sst2_kserve.url}/v2/health/ready").json() == {"ready": True}
    assert client.get(f"{sst2_kserve.url}/v2/models/sst2/ready").status_code == 200
    assert client.get(f"{sst2_kserve.url}/v2/models/nope").status_code == 404


def test_kserve_v1_equals_the_checkpoint(sst2_kserve, client, sentences, reference):
    r = client.post(f"{sst2_kserve.url}/v1/models/sst2:predict", json={"instances": sentences})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["model_version"] == "3"
    np.testing.assert_allclose(np.array(body["predictions"], np.float32), reference(sentences)[0], atol=1e-6, rtol=0)


def test_kserve_v1_pairs_and_bad_input(sst2_kserve, client):
    r = client.post(f"{sst2_kserve.url}/v1/models/sst2:predict", json={"instances": [["a fine film", "it is bad"]]})
    assert r.status_code == 200 and len(r.json()["predictions"][0]) == 2
    r = client.post(f"{sst2_kserve.url}/v1/models/sst2:predict", json={"rows": []})
    assert r.status_code == 400 and "instances" in r.json()["error"]


def test_kserve_truncation_changes_long_sentences(client, reference):
    (long_text,) = [t for t, _ in sst2_sentences(1, min_words=40)]
    with kserve_server(SST2_MODEL, name="sst2", extra=["--truncate", "32", "--outputs", "logits"]) as server:
        r = client.post(f"{server.url}/v2/models/sst2/infer", json=v2_body([long_text, "good"]))
        out = r.json()["outputs"][0]
        assert out["name"] == "logits"
        served = np.array(out["data"], np.float32).reshape(2, 2)
        full = reference([long_text, "good"])[1]
        cut = reference([long_text, "good"], max_length=32)[1]
        np.testing.assert_allclose(served, cut, atol=1e-5, rtol=0)  # it truncates at 32 tokens, exactly
        assert np.abs(served[0] - full[0]).max() > 1e-3  # the long sentence's scores changed
        np.testing.assert_allclose(served[1], full[1], atol=1e-5, rtol=0)  # the short one's did not


def test_kserve_labels_only(client, sentences, reference):
    with kserve_server(SST2_MODEL, name="sst2", extra=["--labels-only"]) as server:
        want = [["negative", "positive"][i] for i in reference(sentences)[0].argmax(-1)]
        v1 = client.post(f"{server.url}/v1/models/sst2:predict", json={"instances": sentences}).json()
        assert v1["predictions"] == want
        v2 = client.post(f"{server.url}/v2/models/sst2/infer", json=v2_body(sentences)).json()
        (out,) = v2["outputs"]
        assert out["name"] == "label" and out["datatype"] == "BYTES" and out["data"] == want


def squad_questions(n: int) -> list[dict]:
    data = json.loads(require_fixture(SQUAD_TEST).read_text(encoding="utf-8"))["data"]
    items = []
    for article in data:
        for para in article["paragraphs"]:
            for qa in para["qas"]:
                items.append({"question": qa["question"], "context": para["context"],
                              "gold": [a["text"] for a in qa["answers"]]})
                if len(items) == n:
                    return items
    return items


def test_kserve_qa_answers_are_spans(client):
    items = squad_questions(4)
    with kserve_server(SQUAD_MODEL, name="squad", extra=["--task", "qa"]) as server:
        r = client.post(f"{server.url}/v1/models/squad:predict",
                        json={"instances": [{"question": x["question"], "context": x["context"]} for x in items]})
        assert r.status_code == 200, r.text
        preds = r.json()["predictions"]
    assert len(preds) == 4
    for p, x in zip(preds, items):
        assert set(p) == {"answer", "start", "end", "score"}
        assert p["answer"] and x["context"][p["start"]:p["end"]] == p["answer"]
        assert 0 < p["score"] <= 1
    overlap = [any(set(g.lower().split()) & set(p["answer"].lower().split()) for g in x["gold"]) for p, x in zip(preds, items)]
    assert sum(overlap) >= 2  # a weak reader (EM 58), but a reader: its answers share words with the gold ones


@pytest.fixture(scope="module")
def sst2_tei():
    with tei_server(SST2_MODEL) as server:
        yield server


def test_tei_predict_equals_the_checkpoint(sst2_tei, client, sentences, reference):
    probs, logits = reference(sentences)
    r = client.post(f"{sst2_tei.url}/predict", json={"inputs": [[t] for t in sentences]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert len(body) == 5
    for row, want in zip(body, probs):
        assert [p["score"] for p in row] == sorted((p["score"] for p in row), reverse=True)  # TEI sorts
        got = {p["label"]: p["score"] for p in row}
        np.testing.assert_allclose([got["negative"], got["positive"]], want, atol=1e-6, rtol=0)
    raw = client.post(f"{sst2_tei.url}/predict", json={"inputs": [[t] for t in sentences], "raw_scores": True}).json()
    for row, want in zip(raw, logits):
        got = {p["label"]: p["score"] for p in row}
        np.testing.assert_allclose([got["negative"], got["positive"]], want, atol=1e-5, rtol=0)


def test_tei_single_inputs_pairs_and_refusals(sst2_tei, client):
    single = client.post(f"{sst2_tei.url}/predict", json={"inputs": "a great film"}).json()
    assert isinstance(single[0], dict) and {p["label"] for p in single} == {"negative", "positive"}
    pair = client.post(f"{sst2_tei.url}/predict", json={"inputs": ["a great film", "awful"]}).json()
    assert isinstance(pair[0], dict)  # TEI: a flat list of two strings is ONE pair
    assert client.post(f"{sst2_tei.url}/predict", json={"inputs": ["a", "b", "c"]}).status_code == 422
    long = " ".join(["word"] * 600)
    assert client.post(f"{sst2_tei.url}/predict", json={"inputs": long}).status_code == 413
    assert client.post(f"{sst2_tei.url}/predict", json={"inputs": long, "truncate": True}).status_code == 200
    info = client.get(f"{sst2_tei.url}/info").json()
    assert info["model_type"]["classifier"]["id2label"] == {"0": "negative", "1": "positive"}
    assert info["model_type"]["classifier"]["label2id"] == {"negative": 0, "positive": 1}
    assert {"model_id", "model_sha", "model_dtype", "max_input_length", "max_client_batch_size"} <= set(info)
    assert client.get(f"{sst2_tei.url}/health").status_code == 200


def test_tei_qa_pipeline_shape(client):
    items = squad_questions(3)
    with tei_server(SQUAD_MODEL, extra=["--task", "qa"]) as server:
        one = client.post(f"{server.url}/", json={"inputs": {"question": items[0]["question"],
                                                            "context": items[0]["context"]}}).json()
        many = client.post(f"{server.url}/", json={"inputs": [{"question": x["question"], "context": x["context"]}
                                                              for x in items]}).json()
    assert isinstance(one, dict) and one == many[0]
    for p, x in zip(many, items):
        assert x["context"][p["start"]:p["end"]] == p["answer"] != ""


# -- the fault proxy ------------------------------------------------------------------------------------------------

def test_proxy_counts_requests_and_inputs(sst2_kserve, client, sentences):
    with fault_proxy(sst2_kserve.url) as proxy:
        for n in (1, 2, 5):
            r = client.post(f"{proxy.url}/v2/models/sst2/infer", json=v2_body(sentences[:n]))
            assert r.status_code == 200 and r.json()["outputs"][0]["shape"] == [n, 2]
        client.post(f"{proxy.url}/v1/models/sst2:predict", json={"instances": sentences[:3]})
        assert client.get(f"{proxy.url}/v2/models/sst2").status_code == 200
        stats = client.get(f"{proxy.url}/_proxy/stats").json()
    assert proxy.requests_forwarded == 4 and proxy.inputs_forwarded == 11
    assert stats["requests_forwarded"] == 4 and stats["inputs_forwarded"] == 11 and stats["requests_received"] == 5


def test_proxy_counts_tei_inputs(sst2_tei, client):
    with fault_proxy(sst2_tei.url) as proxy:
        client.post(f"{proxy.url}/predict", json={"inputs": [["a"], ["b", "c"], ["d"]]})
        client.post(f"{proxy.url}/predict", json={"inputs": "e"})
        client.post(f"{proxy.url}/predict", json={"inputs": ["f", "g"]})
    assert proxy.inputs_forwarded == 5


def _statuses(proxy, client, n: int, body: dict, path: str = "/v2/models/sst2/infer") -> list[int]:
    return [client.post(proxy.url + path, json=body).status_code for _ in range(n)]


def test_proxy_503_share_is_seeded(sst2_kserve, client, sentences):
    body = v2_body(sentences[:1])
    with fault_proxy(sst2_kserve.url, fail_503=0.3, seed=7) as proxy:
        first = _statuses(proxy, client, 30, body)
        proxy.reset()
        second = _statuses(proxy, client, 30, body)
    assert first == second  # the same order for the same seed
    assert set(first) == {200, 503} and 4 <= first.count(503) <= 16
    assert proxy.requests_forwarded == first.count(200)


def test_proxy_429_retry_after(sst2_kserve, client, sentences):
    with fault_proxy(sst2_kserve.url, fail_429=1.0) as proxy:
        r = client.post(f"{proxy.url}/v2/models/sst2/infer", json=v2_body(sentences[:1]))
        assert r.status_code == 429 and r.headers["Retry-After"] == "1"
        assert client.get(f"{proxy.url}/v2/health/ready").status_code == 200  # GETs pass through
    assert proxy.requests_forwarded == 0


def test_proxy_fail_from(sst2_kserve, client, sentences):
    with fault_proxy(sst2_kserve.url, fail_from=3) as proxy:
        assert _statuses(proxy, client, 5, v2_body(sentences[:1])) == [200, 200, 503, 503, 503]


def test_proxy_stall_past_the_timeout(sst2_kserve, sentences):
    with (fault_proxy(sst2_kserve.url, stall=1.0, stall_s=30.0) as proxy, httpx.Client(timeout=0.5) as impatient,
          pytest.raises(httpx.ReadTimeout)):
        impatient.post(f"{proxy.url}/v2/models/sst2/infer", json=v2_body(sentences[:1]))
    assert proxy.faults_injected["stall"] == 1


def test_proxy_dropped_connection(sst2_kserve, client, sentences):
    with fault_proxy(sst2_kserve.url, drop=1.0) as proxy, pytest.raises(httpx.TransportError):
        client.post(f"{proxy.url}/v2/models/sst2/infer", json=v2_body(sentences[:1]))
    assert proxy.requests_forwarded == 0


def test_proxy_malformed_json(sst2_kserve, client, sentences):
    with fault_proxy(sst2_kserve.url, malformed=1.0) as proxy:
        r = client.post(f"{proxy.url}/v2/models/sst2/infer", json=v2_body(sentences))
        assert r.status_code == 200
        with pytest.raises(json.JSONDecodeError):
            json.loads(r.content)


def test_proxy_one_output_fewer(sst2_kserve, sst2_tei, client, sentences):
    with fault_proxy(sst2_kserve.url, short=1.0) as proxy:
        out = client.post(f"{proxy.url}/v2/models/sst2/infer", json=v2_body(sentences)).json()["outputs"][0]
        assert out["shape"] == [4, 2] and len(out["data"]) == 8
        v1 = client.post(f"{proxy.url}/v1/models/sst2:predict", json={"instances": sentences}).json()
        assert len(v1["predictions"]) == 4
    with fault_proxy(sst2_tei.url, short=1.0) as proxy:
        assert len(client.post(f"{proxy.url}/predict", json={"inputs": [[t] for t in sentences]}).json()) == 4


def test_proxy_unknown_labels(sst2_kserve, sst2_tei, client, sentences):
    with fault_proxy(sst2_kserve.url, relabel=1.0, label_map={"negative": "NEG"}) as proxy:
        out = client.post(f"{proxy.url}/v2/models/sst2/infer", json=v2_body(sentences)).json()["outputs"][0]
        assert out["parameters"]["labels"] == "NEG,unknown-positive"
    with fault_proxy(sst2_tei.url, relabel=1.0) as proxy:
        rows = client.post(f"{proxy.url}/predict", json={"inputs": [[t] for t in sentences]}).json()
        assert {p["label"] for row in rows for p in row} == {"unknown-negative", "unknown-positive"}


def test_proxy_refuses_bad_shares():
    require_serve("httpx")
    with pytest.raises(ValueError, match="sum to at most 1"):
        fault_proxy("http://127.0.0.1:1", fail_503=0.7, drop=0.5)
