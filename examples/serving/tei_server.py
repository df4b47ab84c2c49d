"""A FastAPI app in the shape of Hugging Face Text Embeddings Inference (TEI) serving a sequence classifier, and of
the Inference API's question-answering pipeline serving a reader.

    python examples/serving/tei_server.py --model ../shared/models/minilm-l6-sst2 --port 8080
    python examples/serving/tei_server.py --task qa --model ../shared/models/minilm-l6-squad --port 8080

Classifier (TEI's router, ``router/src/http/types.rs`` and ``server.rs``):
- ``POST /predict`` ``{"inputs": ..., "raw_scores": false, "truncate": false}``. As in TEI, ``inputs`` is a string
  (one input), a list of one or two strings (ONE input: a text or a [text, pair] pair), or a list of such lists (a
  batch: ``[["text"], ["text", "pair"], ...]``). A flat list of three or more strings is refused (422), and a flat
  list of two strings is one pair, not two texts: that is TEI's rule, and a client that sends a batch as a flat list
  is wrong. The answer is, per input, ``[{"label", "score"}, ...]`` over all classes, sorted by score, highest first
  (TEI sorts): softmax, or the logits with ``raw_scores``; a single input gets one such list, a batch a list of them.
- An input over ``max_input_length`` tokens without ``truncate: true`` is refused with 413, as TEI does; a batch over
  ``max_client_batch_size`` inputs too.
- ``GET /info`` (TEI's fields), ``GET /health`` (200 with an empty body once the model is loaded).
Reader (``--task qa``): ``POST /`` ``{"inputs": {"question", "context"}}`` or ``{"inputs": [{...}, ...]}`` ->
``{"answer", "start", "end", "score"}`` or a list of them (character offsets into the context), and ``/health``,
``/info`` (model_type ``{"reader": ...}``: not a TEI type; TEI serves no readers).
Skews: ``--truncate N``, ``--lowercase``, ``--noisy SCALE`` as in kserve_server.py.
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse, Response
from serving_models import Classifier, Reader, set_threads

MAX_INPUT_LENGTH = 512
MAX_CLIENT_BATCH_SIZE = 32


def _error(status: int, message: str, kind: str = "Validation") -> JSONResponse:
    return JSONResponse({"error": message, "error_type": kind}, status_code=status)


def _sequences(inputs: Any) -> tuple[list[Any], bool]:
    """TEI's PredictInput: (inputs, is_batch). Raises ValueError with TEI's expectation."""
    expect = "a string, a pair of strings [string, string] or a batch of mixed strings and pairs [[string], [string, string], ...]"
    if isinstance(inputs, str):
        return [inputs], False
    if isinstance(inputs, list) and inputs:
        if all(isinstance(x, str) for x in inputs):
            if len(inputs) > 2:
                raise ValueError(f"invalid length {len(inputs)}, expected {expect}")
            return [inputs[0] if len(inputs) == 1 else list(inputs)], False
        batch = []
        for x in inputs:
            if not isinstance(x, list) or not 1 <= len(x) <= 2 or not all(isinstance(s, str) for s in x):
                raise ValueError(f"invalid batch item, expected {expect}")
            batch.append(x[0] if len(x) == 1 else list(x))
        return batch, True
    raise ValueError(f"invalid type, expected {expect}")


def _sha(path: Path) -> str:
    weights = path / "model.safetensors"
    return hashlib.sha256(weights.read_bytes()).hexdigest()[:40] if weights.is_file() else ""


def classifier_app(clf: Classifier, model_id: str, model_sha: str) -> FastAPI:
    app = FastAPI(title="tei-shaped classifier")
    id2label = {str(i): name for i, name in enumerate(clf.labels)}

    @app.get("/health")
    def health() -> Response:
        return Response(status_code=200)

    @app.get("/info")
    def info() -> dict[str, Any]:
        return {
            "model_id": model_id, "model_sha": model_sha, "model_dtype": "float32",
            "model_type": {"classifier": {"id2label": id2label, "label2id": {v: int(k) for k, v in id2label.items()}}},
            "max_concurrent_requests": 512, "max_input_length": MAX_INPUT_LENGTH, "max_batch_tokens": 16384,
            "max_batch_requests": None, "max_client_batch_size": MAX_CLIENT_BATCH_SIZE, "auto_truncate": False,
            "tokenization_workers": 1, "version": "bertprobe-example", "sha": None, "docker_label": None,
        }

    @app.post("/predict")
    async def predict(request: Request) -> Any:
        try:
            body = await request.json()
        except ValueError:
            return _error(422, "request body is not JSON")
        if not isinstance(body, dict) or "inputs" not in body:
            return _error(422, "missing field `inputs`")
        try:
            items, is_batch = _sequences(body["inputs"])
        except ValueError as e:
            return _error(422, f"Failed to deserialize the JSON body: inputs: {e}")
        if len(items) > MAX_CLIENT_BATCH_SIZE:
            return _error(413, f"batch size {len(items)} > maximum allowed batch size {MAX_CLIENT_BATCH_SIZE}")
        if not body.get("truncate", False):
            for item in items:
                pair = [item] if isinstance(item, str) else item
                n = len(clf.tokenizer(*pair)["input_ids"])
                if n > MAX_INPUT_LENGTH:
                    return _error(413, f"Input validation error: `inputs` must have less than {MAX_INPUT_LENGTH} tokens. "
                                       f"Given: {n}")
        # one kind per forward pass (texts, pairs), answered in input order
        logits: list[Any] = [None] * len(items)
        for kind in (str, list):
            idx = [i for i, x in enumerate(items) if isinstance(x, kind)]
            if idx:
                out = clf.logits([items[i] for i in idx])
                for row, i in zip(out, idx):
                    logits[i] = row
        raw = bool(body.get("raw_scores", False))
        answers = []
        for row in logits:
            scores = row if raw else Classifier.softmax(row[None, :])[0]
            preds = [{"score": float(s), "label": clf.labels[c]} for c, s in enumerate(scores)]
            answers.append(sorted(preds, key=lambda p: -p["score"]))
        return answers if is_batch else answers[0]

    return app


def reader_app(reader: Reader, model_id: str, model_sha: str) -> FastAPI:
    app = FastAPI(title="inference-api-shaped reader")

    @app.get("/health")
    def health() -> Response:
        return Response(status_code=200)

    @app.get("/info")
    def info() -> dict[str, Any]:
        return {"model_id": model_id, "model_sha": model_sha, "model_dtype": "float32", "model_type": {"reader": {}},
                "max_input_length": reader.max_length, "max_client_batch_size": MAX_CLIENT_BATCH_SIZE}

    @app.post("/")
    async def answer(request: Request) -> Any:
        try:
            body = await request.json()
        except ValueError:
            raise HTTPException(422, "request body is not JSON") from None
        inputs = body.get("inputs") if isinstance(body, dict) else None
        many = isinstance(inputs, list)
        items = inputs if many else [inputs]
        if not items or not all(
            isinstance(x, dict) and isinstance(x.get("question"), str) and isinstance(x.get("context"), str) for x in items
        ):
            return JSONResponse({"error": 'expected {"inputs": {"question": str, "context": str}} or a list of them'},
                                status_code=400)
        answers = [reader.answer(x["question"], x["context"]) for x in items]
        return answers if many else answers[0]

    return app


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], allow_abbrev=False)
    p.add_argument("--model", required=True, type=Path)
    p.add_argument("--task", choices=["classify", "qa"], default="classify")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--model-id", default=None, help="the model_id /info reports (default: the folder's name)")
    p.add_argument("--truncate", type=int, default=None)
    p.add_argument("--lowercase", action="store_true")
    p.add_argument("--noisy", type=float, default=0.0)
    p.add_argument("--threads", type=int, default=None)
    args = p.parse_args(argv)
    import uvicorn

    threads = set_threads(args.threads)
    model_id = args.model_id or args.model.name
    if args.task == "classify":
        app = classifier_app(Classifier(args.model, truncate=args.truncate, lowercase=args.lowercase, noise=args.noisy),
                             model_id, _sha(args.model))
    else:
        app = reader_app(Reader(args.model), model_id, _sha(args.model))
    print(f"tei_server: {args.task} {model_id} on {args.host}:{args.port}, torch threads {threads}", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, workers=1, log_level="warning")


if __name__ == "__main__":
    main()
