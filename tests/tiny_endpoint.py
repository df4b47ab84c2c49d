"""A loopback server for tests of served models on tiny random checkpoints: a stdlib ``ThreadingHTTPServer`` in a
thread, speaking v2, v1 and TEI's /predict over one Hugging Face classifier (fp32 softmax scores, as a real server
would compute them), with the skews and faults tests need. The real servers (KServe, FastAPI) are in
``examples/serving`` and ``tests/servers.py``."""

from __future__ import annotations

import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

import torch


class TinyEndpoint:
    """Serve ``model_dir`` on 127.0.0.1 (a free port); ``inputs`` counts every input text answered."""

    def __init__(self, model_dir: Path, name: str = "tiny", version: str = "7", truncate: int | None = None,
                 labels_only: bool = False, outputs: str = "probabilities", fail_first: int = 0,
                 names: tuple[str, ...] | None = None, noise: float = 0.0,
                 flip_on: tuple[str, str] | None = None) -> None:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.name, self.version, self.truncate, self.labels_only = name, version, truncate, labels_only
        self.outputs, self.fail_first, self.noise = outputs, fail_first, noise
        self.flip_on = flip_on  # (header, value): a request carrying it is answered by "another model" (classes reversed)
        self._request = threading.local()  # the headers of the request this thread answers
        self.labels = tuple(names or (self.model.config.id2label[i] for i in range(self.model.config.num_labels)))
        self.inputs: Counter[str] = Counter()
        self.requests = 0
        self.headers_seen: list[dict[str, str]] = []
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def scores(self, texts: list[Any]) -> torch.Tensor:
        firsts = [t[0] if isinstance(t, list) else t for t in texts]
        pairs = [t[1] for t in texts] if texts and isinstance(texts[0], list) and len(texts[0]) == 2 else None
        limit = self.truncate or 512
        with torch.inference_mode():
            enc = self.tokenizer(firsts, pairs, truncation=True, max_length=limit, padding=True, return_tensors="pt")
            logits = self.model(**enc).logits.float()
        if self.noise:
            logits = logits + self.noise * torch.randn_like(logits)
        if self.flip_on is not None:
            name, value = self.flip_on
            seen = {k.lower(): v for k, v in getattr(self._request, "headers", {}).items()}
            if seen.get(name.lower()) == value:
                logits = logits.flip(-1)
        if self.outputs == "logits":
            return logits
        multi = getattr(self.model.config, "problem_type", None) == "multi_label_classification"
        return logits.sigmoid() if multi else logits.softmax(-1)

    def answer(self, path: str, body: Any) -> tuple[int, Any]:
        with self._lock:
            self.requests += 1
            if self.requests <= self.fail_first:
                return 503, {"error": "warming up"}
        if path == "/v2/health/ready":
            return 200, {"ready": True}
        if path == f"/v2/models/{self.name}":
            outputs = [{"name": "label", "datatype": "BYTES"}] if self.labels_only else [
                {"name": self.outputs, "datatype": "FP32"}]
            return 200, {"name": self.name, "versions": [self.version], "outputs": outputs,
                         "parameters": {"labels": ",".join(self.labels)}}
        if path == f"/v1/models/{self.name}":
            return 200, {"name": self.name, "ready": True}
        if path == "/info":
            return 200, {"model_id": self.name, "model_sha": self.version, "max_input_length": 512,
                         "model_type": {"classifier": {"id2label": {str(i): n for i, n in enumerate(self.labels)}}}}
        if path == f"/v2/models/{self.name}/infer":
            data = body["inputs"][0]["data"]
            pairs = body["inputs"][1]["data"] if len(body["inputs"]) > 1 else None
            texts = [[a, b] for a, b in zip(data, pairs)] if pairs else list(data)
            self._count(texts)
            scores = self.scores(texts)
            if self.labels_only:
                return 200, {"outputs": [{"name": "label", "shape": [len(texts)], "datatype": "BYTES",
                                          "data": [self.labels[i] for i in scores.argmax(-1).tolist()]}]}
            return 200, {"model_name": self.name, "model_version": self.version, "outputs": [
                {"name": self.outputs, "shape": list(scores.shape), "datatype": "FP32",
                 "data": scores.flatten().tolist(), "parameters": {"labels": ",".join(self.labels)}}]}
        if path == f"/v1/models/{self.name}:predict":
            texts = body["instances"]
            self._count(texts)
            scores = self.scores(texts)
            if self.labels_only:
                return 200, {"predictions": [self.labels[i] for i in scores.argmax(-1).tolist()]}
            return 200, {"predictions": scores.tolist()}
        if path == "/predict":
            texts = body["inputs"]
            self._count(texts)
            return 200, [[{"label": self.labels[c], "score": float(s)} for c, s in sorted(
                enumerate(row), key=lambda cs: -cs[1])] for row in self.scores(texts).tolist()]
        if path == "/classify":  # the example plugin's codec (bertprobe_example.codec)
            texts = body["texts"]
            self._count(texts)
            return 200, {"results": [{"probabilities": dict(zip(self.labels, row))}
                                     for row in self.scores(texts).tolist()]}
        return 404, {"error": f"no route {path}"}

    def _count(self, texts: list[Any]) -> None:
        with self._lock:
            self.inputs.update(json.dumps(t) for t in texts)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _reply(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                server.headers_seen.append(dict(self.headers))
                server._request.headers = dict(self.headers)
                self._reply(*server.answer(self.path, None))

            def do_POST(self) -> None:
                server.headers_seen.append(dict(self.headers))
                server._request.headers = dict(self.headers)
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"null")
                self._reply(*server.answer(self.path, body))

        return Handler
