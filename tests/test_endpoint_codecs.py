"""The wire shapes of served models (bertprobe.model.endpoint_codecs): requests built, responses read, and every
response that does not fit refused in one line."""

from __future__ import annotations

import pytest

from bertprobe.model.endpoint_codecs import HFCodec, V1Codec, V2Codec, make_codec, probabilities_like
from bertprobe.model.endpoint_codecs_base import CodecError

ITEMS = [{"text": "a fine film"}, {"text": "dull"}]
LABELS = ("negative", "positive")


def test_v2_request_is_a_bytes_input_of_the_batch() -> None:
    body = V2Codec("sst2").request(ITEMS)
    assert body == {"inputs": [{"name": "text", "shape": [2], "datatype": "BYTES", "data": ["a fine film", "dull"]}]}
    assert V2Codec("sst2").infer_path() == "/v2/models/sst2/infer"
    pairs = V2Codec("m").request([{"text": "a", "text_pair": "b"}])
    assert [i["name"] for i in pairs["inputs"]] == ["text", "text_pair"]


def test_v2_probabilities_read_in_rows_and_named_by_their_output() -> None:
    body = {"model_name": "sst2", "model_version": "3", "outputs": [
        {"name": "probabilities", "shape": [2, 2], "datatype": "FP32", "data": [0.1, 0.9, 0.8, 0.2],
         "parameters": {"labels": "negative,positive"}}]}
    out = V2Codec("sst2", labels=LABELS).response(body, ITEMS)
    assert out == [{"scores": [0.1, 0.9], "kind": "probabilities"}, {"scores": [0.8, 0.2], "kind": "probabilities"}]


def test_v2_unnamed_scores_are_told_apart_by_their_values() -> None:
    logits = {"outputs": [{"name": "out", "shape": [2, 2], "datatype": "FP32", "data": [-1.0, 2.0, 0.5, 0.1]}]}
    assert {o["kind"] for o in V2Codec("m").response(logits, ITEMS)} == {"logits"}
    probs = {"outputs": [{"name": "out", "shape": [2, 2], "datatype": "FP32", "data": [0.3, 0.7, 0.5, 0.5]}]}
    assert {o["kind"] for o in V2Codec("m").response(probs, ITEMS)} == {"probabilities"}
    assert {o["kind"] for o in V2Codec("m", outputs="logits").response(probs, ITEMS)} == {"logits"}


@pytest.mark.parametrize("body, words", [
    ({"outputs": [{"name": "logits", "shape": [1, 2], "datatype": "FP32", "data": [0.1, 0.2]}]}, "1 outputs for 2 inputs"),
    ({"outputs": [{"name": "logits", "shape": [2, 2], "datatype": "FP32", "data": [0.1, 0.2, 0.3]}]}, "holds 3 values"),
    ({"error": "boom"}, "no 'outputs'"),
    ({"outputs": [{"name": "logits", "shape": [2, 2], "datatype": "FP32", "data": [0.1, "x", 0.3, 0.4]}]}, "list of numbers"),
    ({"outputs": [{"name": "probabilities", "shape": [2, 2], "datatype": "FP32", "data": [0.1, 0.9, 0.8, 0.2],
                   "parameters": {"labels": "neg,pos"}}]}, "not the model's"),
])
def test_v2_responses_that_do_not_fit_are_refused(body: dict, words: str) -> None:
    with pytest.raises(CodecError, match=words):
        V2Codec("m", labels=LABELS).response(body, ITEMS)


def test_v2_labels_only_and_metadata() -> None:
    body = {"outputs": [{"name": "label", "shape": [2], "datatype": "BYTES", "data": ["positive", "negative"]}]}
    assert V2Codec("m").response(body, ITEMS) == [{"label": "positive"}, {"label": "negative"}]
    answers = {"/v2/health/ready": {"ready": True},
               "/v2/models/m": {"name": "m", "versions": ["1", "3"], "outputs": [{"name": "label", "datatype": "BYTES"}],
                                "parameters": {"labels": "negative, positive"}}}
    served = V2Codec("m").metadata(answers.__getitem__)
    assert (served.version, served.labels, served.labels_only) == ("3", LABELS, True)
    with pytest.raises(CodecError, match="not ready"):
        V2Codec("m").metadata({"/v2/health/ready": {"ready": False}}.__getitem__)


def test_v1_scores_labels_and_answers() -> None:
    assert V1Codec("m").request(ITEMS) == {"instances": ["a fine film", "dull"]}
    assert V1Codec("m").infer_path() == "/v1/models/m:predict"
    out = V1Codec("m").response({"predictions": [[0.2, 0.8], [0.6, 0.4]]}, ITEMS)
    assert [o["kind"] for o in out] == ["probabilities"] * 2
    out = V1Codec("m").response({"predictions": [[2.0, -1.0], [0.6, 0.4]]}, ITEMS)
    assert [o["kind"] for o in out] == ["logits"] * 2  # one row is no probability: the batch reads as logits
    assert V1Codec("m").response({"predictions": ["positive", "negative"]}, ITEMS)[0] == {"label": "positive"}
    with pytest.raises(CodecError, match="1 outputs for 2 inputs"):
        V1Codec("m").response({"predictions": [[0.2, 0.8]]}, ITEMS)
    qa = [{"question": "Who?", "context": "Ada wrote it."}]
    got = V1Codec("m").response({"predictions": [{"answer": "Ada", "start": 0, "end": 3, "score": 0.9}]}, qa)
    assert got == [{"answer": "Ada", "start": 0, "end": 3, "score": 0.9}]
    with pytest.raises(CodecError, match="not the context's characters"):
        V1Codec("m").response({"predictions": [{"answer": "Bob", "start": 0, "end": 3, "score": 0.9}]}, qa)
    with pytest.raises(CodecError, match="not within its context"):
        V1Codec("m").response({"predictions": [{"answer": "Ada", "start": 5, "end": 99}]}, qa)


def test_hf_predict_reads_labels_by_name_in_class_order() -> None:
    codec = HFCodec(labels=LABELS)
    assert codec.request(ITEMS)["inputs"] == [["a fine film"], ["dull"]]  # TEI: a flat pair of strings is one pair
    assert codec.request([{"text": "a", "text_pair": "b"}])["inputs"] == [["a", "b"]]
    body = [[{"label": "positive", "score": 0.9}, {"label": "negative", "score": 0.1}],
            [{"label": "negative", "score": 0.7}, {"label": "positive", "score": 0.3}]]
    assert [o["scores"] for o in codec.response(body, ITEMS)] == [[0.1, 0.9], [0.7, 0.3]]
    one = [{"label": "positive", "score": 0.9}, {"label": "negative", "score": 0.1}]
    assert codec.response(one, ITEMS[:1])[0]["scores"] == [0.1, 0.9]  # one input: TEI answers it unwrapped
    with pytest.raises(CodecError, match="LABEL_1 are not the model's"):
        codec.response([[{"label": "LABEL_1", "score": 0.9}, {"label": "negative", "score": 0.1}]] * 2, ITEMS)
    info = {"/info": {"model_id": "org/sst2", "model_sha": "abc", "max_input_length": 512,
                      "model_type": {"classifier": {"id2label": {"1": "positive", "0": "negative"}}}}}
    served = HFCodec().metadata(info.__getitem__)
    assert (served.labels, served.version, served.max_length, served.task) == (LABELS, "abc", 512, "classification")
    with pytest.raises(CodecError, match="embedding"):
        HFCodec().metadata({"/info": {"model_type": {"embedding": {"pooling": "cls"}}}}.__getitem__)


def test_hf_pipeline_answers() -> None:
    qa = [{"question": "Who?", "context": "Ada wrote it."}, {"question": "What?", "context": "It was a poem."}]
    codec = HFCodec(reader=True)
    assert codec.infer_path() == "/"
    assert codec.request(qa) == {"inputs": qa}
    got = codec.response([{"answer": "Ada", "start": 0, "end": 3, "score": 0.5},
                          {"answer": "a poem", "start": 7, "end": 13, "score": 0.4}], qa)
    assert [g["answer"] for g in got] == ["Ada", "a poem"]


def test_make_codec_names_the_known_protocols() -> None:
    assert isinstance(make_codec("v2", {}, model="m", reader=True), V2Codec)  # keywords it takes only
    with pytest.raises(Exception, match="did you mean 'v2'|known: hf, v1, v2"):
        make_codec("v3", {}, model="m")


def test_probabilities_like() -> None:
    assert probabilities_like([[0.2, 0.8]], label_sets=False)
    assert not probabilities_like([[0.2, 0.7]], label_sets=False)
    assert probabilities_like([[0.2, 0.7]], label_sets=True)
    assert not probabilities_like([[1.2, -0.2]], label_sets=True)


def test_v1_and_v2_tell_unnamed_scores_alike_and_keep_the_first_batchs_kind() -> None:
    """One helper reads both: the first batch's values decide, later batches keep it; a name or outputs: decides."""
    first, later = [[0.3, 0.7], [0.5, 0.5]], [[0.2, 0.1], [0.6, 0.3]]  # the later rows alone would read as logits

    def v2(rows: list[list[float]], name: str = "out") -> dict:
        return {"outputs": [{"name": name, "shape": [2, 2], "datatype": "FP32", "data": [v for r in rows for v in r]}]}

    for codec, shape in ((V1Codec("m"), lambda rows: {"predictions": rows}), (V2Codec("m"), v2)):
        assert {o["kind"] for o in codec.response(shape(first), ITEMS)} == {"probabilities"}
        assert {o["kind"] for o in codec.response(shape(later), ITEMS)} == {"probabilities"}
        fresh = type(codec)("m")
        assert {o["kind"] for o in fresh.response(shape(later), ITEMS)} == {"logits"}
    assert {o["kind"] for o in V1Codec("m").response({"predictions": [{"probs": r} for r in later]}, ITEMS)} == \
        {"probabilities"}
    assert {o["kind"] for o in V2Codec("m").response(v2(first, "logits"), ITEMS)} == {"logits"}
