"""The wire shapes of served models: how a batch of inputs becomes a request body and a response body becomes one
output per input (``Codec``), and what the server says of its model before anything is sent (``ServedModel``).

Built in: ``v2``, the Open Inference Protocol (KServe v2, Triton: ``POST /v2/models/{name}/infer``, a BYTES input,
logits or probabilities as an FP32 output; metadata at ``GET /v2/models/{name}``, readiness at
``GET /v2/health/ready``); ``v1``, KServe v1 / TF-Serving (``POST /v1/models/{name}:predict``, ``instances`` ->
``predictions``); ``hf``, Text Embeddings Inference's ``POST /predict`` (``{"inputs": [...]}`` -> per input a list
of ``{"label", "score"}``; ``GET /info``) and, for extractive readers, the Inference API's question-answering
pipeline (``{"inputs": [{"question", "context"}]}`` -> ``{"answer", "start", "end", "score"}``). A plugin adds its
own through ``bertprobe_register_codecs`` (the example plugin carries one).

Normalised outputs, one per input (JSON, so the response cache holds them as they are): a classifier's
``{"scores": [...], "kind": "probabilities" | "logits"}`` in the model's class order, or ``{"label": NAME}`` where
the endpoint returns labels only; a reader's ``{"answer", "start", "end", "score"}`` (characters of the context).
Anything a response holds is read as data: nothing is executed, nothing unpickled.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from bertprobe.model.endpoint_codecs_base import Codec, CodecError

OUTPUT_KINDS = ("auto", "logits", "probabilities", "labels")
PROBABILITY_NAMES = ("probabilities", "probs", "scores", "probability", "softmax")
LOGIT_NAMES = ("logits", "raw_scores")
GENERIC_NAMES = ("output", "output_0", "output-0", "predictions")  # say nothing of the kind: told by the values


@dataclass
class ServedModel:
    """What an endpoint says of its model before any input is sent."""

    name: str
    version: str = ""  # the served version (v2 metadata's versions, TEI's model_sha): part of every cache key
    labels: tuple[str, ...] = ()  # class names in the model's order, where the server names them
    task: str | None = None  # a task the server's metadata implies (TEI's model_type), else None
    labels_only: bool = False  # the server answers with a label, no scores
    max_length: int | None = None  # tokens the server reads per input, where it says (TEI's max_input_length)
    notes: list[str] = field(default_factory=list)


def probabilities_like(rows: Sequence[Sequence[float]], label_sets: bool) -> bool:
    """Whether score rows read as probabilities: each in [0, 1], and each row summing to 1 unless labels are
    independent decisions (multi-label)."""
    if not rows:
        return False
    for row in rows:
        if any(not (0.0 <= v <= 1.0) for v in row):
            return False
        if not label_sets and abs(sum(row) - 1.0) > 1e-3:
            return False
    return True


def _floats(values: Any, where: str) -> list[float]:
    if not isinstance(values, list) or not values or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                              for v in values):
        raise CodecError(f"{where}: expected a list of numbers, got {str(values)[:80]!r}")
    out = [float(v) for v in values]
    if not all(math.isfinite(v) for v in out):
        raise CodecError(f"{where}: a score is not finite ({str(values)[:80]})")
    return out


def _count(got: int, items: Sequence[Any], where: str) -> None:
    if got != len(items):
        raise CodecError(f"{where}: {got} outputs for {len(items)} inputs; the server answered another batch's "
                         "shape (a proxy or a batching bug): bertprobe cannot tell which output is whose")


def _by_name(pairs: Any, labels: Sequence[str], where: str) -> list[float]:
    """A TEI-style ``[{"label", "score"}, ...]`` as scores in ``labels``' order."""
    if not isinstance(pairs, list) or not all(isinstance(p, dict) and "label" in p and "score" in p for p in pairs):
        raise CodecError(f"{where}: expected a list of {{label, score}}, got {str(pairs)[:80]!r}")
    got = {str(p["label"]): p["score"] for p in pairs}
    if labels:
        unknown = sorted(set(got) - set(labels))
        if unknown or len(got) != len(labels):
            raise CodecError(f"{where}: labels {', '.join(unknown) or sorted(got)} are not the model's "
                             f"({', '.join(labels)}); set model.labels to the endpoint's names, in class order")
        return _floats([got[name] for name in labels], where)
    return _floats([p["score"] for p in pairs], where)


def _answer(value: Any, item: dict[str, Any], where: str) -> dict[str, Any]:
    """A pipeline answer checked: its text is the context's characters ``start:end``."""
    if not isinstance(value, dict) or not {"answer", "start", "end"} <= set(value):
        raise CodecError(f"{where}: expected {{answer, start, end, score}}, got {str(value)[:80]!r}")
    start, end, text = value["start"], value["end"], value["answer"]
    context = item.get("context", "")
    if not (isinstance(start, int) and isinstance(end, int) and isinstance(text, str)) or not 0 <= start <= end <= len(context):
        raise CodecError(f"{where}: the answer's span {start!r}:{end!r} is not within its context of {len(context)} characters")
    if context[start:end] != text and context[start:end].strip() != text.strip():
        raise CodecError(f"{where}: the answer {text[:40]!r} is not the context's characters {start}:{end} "
                         f"({context[start:end][:40]!r}); the server's offsets are not characters of the context sent")
    score = value.get("score", 0.0)
    return {"answer": context[start:end], "start": start, "end": end,
            "score": float(score) if isinstance(score, (int, float)) else 0.0}


def _kind_by_name(name: str) -> str | None:
    """What an output's or a prediction key's name says its scores are (None: the name says nothing)."""
    if name in PROBABILITY_NAMES:
        return "probabilities"
    if name in LOGIT_NAMES:
        return "logits"
    return None


def _kind_by_values(codec: Any, rows: list[list[float]]) -> str:
    """The kind of unnamed score rows: the suite's ``outputs:`` where it says, else told by the values of the first
    rows seen and kept on ``codec`` (a batch of logits that happen to lie in [0, 1] must not read as probabilities
    when the others read as logits)."""
    if codec.outputs not in ("logits", "probabilities"):
        codec.outputs = "probabilities" if probabilities_like(rows, codec.label_sets) else "logits"
    return codec.outputs


def _scored(rows: list[list[float]], kind: str) -> list[dict[str, Any]]:
    """Score rows as normalised outputs."""
    return [{"scores": row, "kind": kind} for row in rows]


def _text_input(item: dict[str, Any]) -> Any:
    return [item["text"], item["text_pair"]] if item.get("text_pair") is not None else item["text"]


@dataclass
class V2Codec:
    """The Open Inference Protocol (KServe v2, Triton)."""

    model: str
    labels: tuple[str, ...] = ()
    outputs: str = "auto"
    label_sets: bool = False
    name: str = "v2"
    expects: ClassVar[str] = ('{"outputs": [{"name", "datatype": "FP32", "shape": [inputs, classes], "data": [...]}]} '
                    '(or a BYTES label output)')

    def infer_path(self, model: str | None = None) -> str:
        return f"/v2/models/{model or self.model}/infer"

    def request(self, items: Sequence[dict[str, Any]]) -> Any:
        if items and "question" in items[0]:
            return {"inputs": [
                {"name": "question", "shape": [len(items)], "datatype": "BYTES", "data": [i["question"] for i in items]},
                {"name": "context", "shape": [len(items)], "datatype": "BYTES", "data": [i["context"] for i in items]}]}
        inputs = [{"name": "text", "shape": [len(items)], "datatype": "BYTES", "data": [i["text"] for i in items]}]
        if any(i.get("text_pair") is not None for i in items):
            inputs.append({"name": "text_pair", "shape": [len(items)], "datatype": "BYTES",
                           "data": [i.get("text_pair") or "" for i in items]})
        return {"inputs": inputs}

    def response(self, body: Any, items: Sequence[dict[str, Any]]) -> list[Any]:
        outputs = body.get("outputs") if isinstance(body, dict) else None
        if not isinstance(outputs, list) or not outputs:
            raise CodecError(f"v2 response: no 'outputs' list ({str(body)[:80]!r})")
        named = {str(o.get("name", "")): o for o in outputs if isinstance(o, dict)}
        if items and "question" in items[0]:
            return self._answers(named, items)
        scores = next((named[n] for n in (*PROBABILITY_NAMES, *LOGIT_NAMES, *GENERIC_NAMES) if n in named), None)
        if scores is None and self.outputs != "labels":
            scores = next((o for o in named.values() if o.get("datatype", "").startswith("FP")), None)
        if scores is None or self.outputs == "labels":
            label = next((o for o in named.values() if o.get("datatype") == "BYTES"), None)
            if label is None:
                raise CodecError(f"v2 response: neither scores (FP32) nor labels (BYTES) among {', '.join(named)}")
            data = label.get("data")
            _count(len(data) if isinstance(data, list) else -1, items, "v2 response")
            return [{"label": str(v)} for v in data]
        shape, data = scores.get("shape"), scores.get("data")
        if not (isinstance(shape, list) and len(shape) == 2 and isinstance(data, list)):
            raise CodecError(f"v2 response: output {scores.get('name')!r} has shape {shape!r}; expected [inputs, classes]")
        _count(int(shape[0]), items, "v2 response")
        width = int(shape[1])
        if len(data) != shape[0] * width:
            raise CodecError(f"v2 response: output {scores.get('name')!r} holds {len(data)} values for shape {shape}")
        rows = [_floats(data[i * width : (i + 1) * width], "v2 response") for i in range(int(shape[0]))]
        names = scores.get("parameters", {}).get("labels") if isinstance(scores.get("parameters"), dict) else None
        if names:
            given = tuple(n.strip() for n in names.split(",")) if isinstance(names, str) else tuple(map(str, names))
            if self.labels and given != tuple(self.labels):
                raise CodecError(f"v2 response: the output's labels ({', '.join(given)}) are not the model's "
                                 f"({', '.join(self.labels)})")
        return _scored(rows, self._kind(scores.get("name", ""), rows))

    def _kind(self, name: str, rows: list[list[float]]) -> str:
        """The suite's ``outputs:`` first, then the output's name, then the values (``_kind_by_values``)."""
        if self.outputs in ("logits", "probabilities"):
            return self.outputs
        return _kind_by_name(name) or _kind_by_values(self, rows)

    def _answers(self, named: dict[str, Any], items: Sequence[dict[str, Any]]) -> list[Any]:
        try:
            texts, starts, ends = (named[n]["data"] for n in ("answer", "start", "end"))
        except KeyError:
            raise CodecError(f"v2 response: a reader's outputs are answer, start, end (and score); got "
                             f"{', '.join(named)}") from None
        _count(len(texts), items, "v2 response")
        score = named.get("score", {}).get("data") or [0.0] * len(texts)
        return [_answer({"answer": t, "start": int(s), "end": int(e), "score": sc}, item, "v2 response")
                for t, s, e, sc, item in zip(texts, starts, ends, score, items)]

    def metadata(self, get: Callable[[str], Any]) -> ServedModel:
        ready = get("/v2/health/ready")
        if isinstance(ready, dict) and ready.get("ready") is False:
            raise CodecError("the server says it is not ready (GET /v2/health/ready)")
        meta = get(f"/v2/models/{self.model}")
        if not isinstance(meta, dict):
            raise CodecError(f"GET /v2/models/{self.model}: expected the model's metadata object")
        versions = meta.get("versions") or []
        version = str(meta.get("version") or (versions[-1] if versions else ""))
        outputs = [o for o in meta.get("outputs") or [] if isinstance(o, dict)]
        labels_only = bool(outputs) and all(o.get("datatype") == "BYTES" for o in outputs) and not any(
            o.get("name") in ("answer", "start") for o in outputs)
        labels: tuple[str, ...] = ()
        params = meta.get("parameters") if isinstance(meta.get("parameters"), dict) else {}
        named = params.get("labels") if params else None
        if named:
            labels = tuple(n.strip() for n in named.split(",")) if isinstance(named, str) else tuple(map(str, named))
        return ServedModel(name=str(meta.get("name") or self.model), version=version, labels=labels,
                           labels_only=labels_only)


@dataclass
class V1Codec:
    """KServe v1 / TF-Serving's predict: ``instances`` -> ``predictions``."""

    model: str
    labels: tuple[str, ...] = ()
    outputs: str = "auto"
    label_sets: bool = False
    name: str = "v1"
    expects: ClassVar[str] = '{"predictions": [one per input: scores, {label, score} pairs, or a label]}'

    def infer_path(self, model: str | None = None) -> str:
        return f"/v1/models/{model or self.model}:predict"

    def request(self, items: Sequence[dict[str, Any]]) -> Any:
        if items and "question" in items[0]:
            return {"instances": [{"question": i["question"], "context": i["context"]} for i in items]}
        return {"instances": [_text_input(i) for i in items]}

    def response(self, body: Any, items: Sequence[dict[str, Any]]) -> list[Any]:
        predictions = body.get("predictions") if isinstance(body, dict) else None
        if not isinstance(predictions, list):
            raise CodecError(f"v1 response: no 'predictions' list ({str(body)[:80]!r})")
        _count(len(predictions), items, "v1 response")
        if items and "question" in items[0]:
            return [_answer(p, item, "v1 response") for p, item in zip(predictions, items)]
        out: list[dict[str, Any]] = []
        for p in predictions:
            if isinstance(p, str):
                out.append({"label": p})
            elif isinstance(p, dict) and ("label" in p and not any(k in p for k in (*PROBABILITY_NAMES, *LOGIT_NAMES))):
                out.append({"label": str(p["label"])})
            elif isinstance(p, dict):
                key = next((k for k in (*PROBABILITY_NAMES, *LOGIT_NAMES) if k in p), None)
                if key is None:
                    raise CodecError(f"v1 response: a prediction holds no scores ({str(p)[:80]!r})")
                out.extend(_scored([_floats(p[key], "v1 response")], _kind_by_name(key) or "logits"))
            elif isinstance(p, list) and p and isinstance(p[0], dict):
                out.extend(_scored([_by_name(p, self.labels, "v1 response")], "probabilities"))
            else:
                out.extend(_scored([_floats(p, "v1 response")], ""))  # unnamed: told below, with the batch's others
        untyped = [o for o in out if o.get("kind") == ""]
        if untyped:
            kind = _kind_by_values(self, [o["scores"] for o in untyped])
            for o in untyped:
                o["kind"] = kind
        return out

    def metadata(self, get: Callable[[str], Any]) -> ServedModel:
        meta = get(f"/v1/models/{self.model}")
        if isinstance(meta, dict) and meta.get("ready") is False:
            raise CodecError(f"the server says model {self.model} is not ready (GET /v1/models/{self.model})")
        version = str(meta.get("version", "")) if isinstance(meta, dict) else ""
        return ServedModel(name=self.model, version=version, labels_only=self.outputs == "labels")


@dataclass
class HFCodec:
    """Text Embeddings Inference's ``/predict`` for classifiers; the Inference API's QA pipeline for readers."""

    model: str = ""
    labels: tuple[str, ...] = ()
    outputs: str = "auto"
    label_sets: bool = False
    reader: bool = False
    name: str = "hf"
    expects: ClassVar[str] = 'a list per input of [{"label", "score"}, ...] (a reader: {"answer", "start", "end", "score"})'

    def infer_path(self, model: str | None = None) -> str:
        return "/" if self.reader else "/predict"

    def request(self, items: Sequence[dict[str, Any]]) -> Any:
        if items and "question" in items[0]:
            return {"inputs": [{"question": i["question"], "context": i["context"]} for i in items]}
        # TEI reads a flat list of two strings as one pair: each input goes as a list of its one or two texts
        return {"inputs": [[i["text"]] if i.get("text_pair") is None else [i["text"], i["text_pair"]] for i in items],
                "raw_scores": self.outputs == "logits", "truncate": True}

    def response(self, body: Any, items: Sequence[dict[str, Any]]) -> list[Any]:
        if items and "question" in items[0]:
            answers = body if isinstance(body, list) else [body]
            _count(len(answers), items, "hf response")
            return [_answer(a, item, "hf response") for a, item in zip(answers, items)]
        if not isinstance(body, list):
            raise CodecError(f"hf response: expected a list, one per input ({str(body)[:80]!r})")
        if len(items) == 1 and body and isinstance(body[0], dict):
            body = [body]  # one input: TEI answers its list of {label, score} unwrapped
        _count(len(body), items, "hf response")
        kind = "logits" if self.outputs == "logits" else "probabilities"
        return [{"scores": _by_name(row, self.labels, "hf response"), "kind": kind} for row in body]

    @property
    def ready_path(self) -> str | None:
        """A reader's health route (the Inference Toolkit answers ``GET /health`` with ``Ok``, TEI with an empty
        200), asked by the readiness check: its metadata sends nothing. A classifier's ``/info`` says more."""
        return "/health" if self.reader else None

    def metadata(self, get: Callable[[str], Any]) -> ServedModel:
        if self.reader:
            return ServedModel(name=self.model or "qa", task="question-answering")
        info = get("/info")
        if not isinstance(info, dict):
            raise CodecError("GET /info: expected Text Embeddings Inference's info object")
        kind = info.get("model_type") if isinstance(info.get("model_type"), dict) else {}
        classifier = kind.get("classifier") if isinstance(kind, dict) else None
        labels: tuple[str, ...] = ()
        if isinstance(classifier, dict) and isinstance(classifier.get("id2label"), dict):
            id2label = classifier["id2label"]
            labels = tuple(str(id2label[k]) for k in sorted(id2label, key=lambda k: int(k)))
        elif isinstance(kind, dict) and kind:
            raise CodecError(f"the server serves a {', '.join(kind)} model (GET /info model_type), not a classifier; "
                             "bertprobe audits TEI's classifiers (rerankers and embedders are not served through /predict)")
        length = info.get("max_input_length")
        return ServedModel(name=str(info.get("model_id") or self.model or "tei"), version=str(info.get("model_sha") or ""),
                           labels=labels, task="classification" if labels else None,
                           max_length=int(length) if isinstance(length, int) else None)


BUILTIN_CODECS: dict[str, Callable[..., Any]] = {"v2": V2Codec, "v1": V1Codec, "hf": HFCodec}


def make_codec(protocol: str, factories: dict[str, Callable[..., Any]], **settings: Any) -> Codec:
    """The codec ``protocol`` names among the built-in and the plugins' ``factories``."""
    from bertprobe.errors import TargetError
    from bertprobe.registry import did_you_mean

    known = {**BUILTIN_CODECS, **factories}
    if protocol not in known:
        raise TargetError(f"model.protocol: unknown protocol {protocol!r}{did_you_mean(protocol, list(known))}; "
                          f"known: {', '.join(sorted(known))} (a plugin adds one with bertprobe_register_codecs)")
    factory = known[protocol]
    import inspect

    accepted = set(inspect.signature(factory).parameters)
    return factory(**{k: v for k, v in settings.items() if k in accepted})
