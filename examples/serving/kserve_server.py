"""Serve a Hugging Face checkpoint folder with KServe's model server, over REST v1 and v2 (Open Inference Protocol).

    python examples/serving/kserve_server.py --model ../shared/models/minilm-l6-sst2 --name sst2 --http-port 8080
    python examples/serving/kserve_server.py --task qa --model ../shared/models/minilm-l6-squad --name squad

Classifier (``--task classify``, the default):
- v1 ``POST /v1/models/{name}:predict`` ``{"instances": [text | [text, pair], ...]}`` -> ``{"predictions": [[score, ...],
  ...], "model_version": V}`` (``--outputs probabilities|logits``), or one label string per instance (``--labels-only``);
- v2 ``POST /v2/models/{name}/infer`` with one BYTES input of shape [n] (or [n, 2]: text, pair) -> an FP32 output
  named ``probabilities`` or ``logits``, shape [n, C], ``parameters: {"labels": "neg,pos"}`` (the id2label names in
  class order); with ``--labels-only`` a BYTES output ``label`` of shape [n]. ``model_version`` is ``--version``.
- ``GET /v2/models/{name}`` lists ``versions: [V]``; ``GET /v2/health/ready`` is true once the server listens (KServe
  loads the model before it binds the port); ``GET /v2/models/{name}/ready`` is the model's own readiness.
Reader (``--task qa``): v1 only, ``{"instances": [{"question", "context"}, ...]}`` -> ``{"predictions": [{"answer",
"start", "end", "score"}, ...]}`` with character offsets into the context (windows 384, stride 128: see serving_models).

Skews to audit: ``--truncate N`` (tokenizer max_length), ``--lowercase``, ``--noisy SCALE`` (Gaussian noise on logits).
One process, one worker, no gRPC.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from pathlib import Path
from typing import Any

import numpy as np


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], allow_abbrev=False)
    p.add_argument("--model", required=True, type=Path, help="a Hugging Face checkpoint folder")
    p.add_argument("--name", default="model", help="the served model name")
    p.add_argument("--task", choices=["classify", "qa"], default="classify")
    p.add_argument("--http-port", type=int, default=8080)
    p.add_argument("--version", default="1", help="the served model version (in responses and metadata)")
    p.add_argument("--truncate", type=int, default=None, help="truncate inputs at N tokens")
    p.add_argument("--lowercase", action="store_true", help="lower-case the text before tokenizing")
    p.add_argument("--labels-only", action="store_true", help="answer the top label only, no scores")
    p.add_argument("--outputs", choices=["probabilities", "logits"], default="probabilities")
    p.add_argument("--noisy", type=float, default=0.0, help="Gaussian noise of this scale on the logits")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's, from OMP_NUM_THREADS)")
    p.add_argument("--workers", type=int, default=1, choices=[1], help="uvicorn workers (1 only: no multiprocessing)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    # kserve parses sys.argv at import (parse_known_args, with abbreviations: our --model would set its --model_name):
    # hide our flags from it.
    sys.argv = sys.argv[:1]
    import kserve
    from kserve import InferOutput, InferRequest, InferResponse
    from kserve.errors import InvalidInput
    from serving_models import Classifier, Reader, set_threads

    threads = set_threads(args.threads)

    class ClassifierModel(kserve.Model):
        def __init__(self) -> None:
            super().__init__(args.name)
            self.clf: Classifier | None = None

        def load(self) -> bool:
            self.clf = Classifier(args.model, truncate=args.truncate, lowercase=args.lowercase, noise=args.noisy)
            self.ready = True
            return True

        def get_input_types(self) -> list[dict]:
            return [{"name": "text", "datatype": "BYTES", "shape": [-1]}]

        def get_output_types(self) -> list[dict]:
            if args.labels_only:
                return [{"name": "label", "datatype": "BYTES", "shape": [-1]}]
            return [{"name": args.outputs, "datatype": "FP32", "shape": [-1, len(self.clf.labels)]}]

        def _scores(self, texts: list[Any]) -> np.ndarray:
            try:
                logits = self.clf.logits(texts)
            except (ValueError, TypeError) as e:
                raise InvalidInput(str(e)) from None
            return logits if args.outputs == "logits" else Classifier.softmax(logits)

        def predict(self, payload: dict | InferRequest, headers: dict[str, str] | None = None) -> dict | InferResponse:
            if isinstance(payload, InferRequest):
                return self._predict_v2(payload)
            instances = payload.get("instances") if isinstance(payload, dict) else None
            if not isinstance(instances, list):
                raise InvalidInput('expected {"instances": [text or [text, pair], ...]}')
            if not instances:
                return {"predictions": [], "model_version": args.version}
            scores = self._scores(instances)
            if args.labels_only:
                preds: list[Any] = [self.clf.labels[i] for i in scores.argmax(-1)]
            else:
                preds = scores.tolist()
            return {"predictions": preds, "model_version": args.version}

        def _predict_v2(self, req: InferRequest) -> InferResponse:
            if not req.inputs or req.inputs[0].datatype != "BYTES":
                raise InvalidInput("expected one BYTES input of shape [n] (or [n, 2]: text, pair)")
            arr = req.inputs[0].as_numpy()
            texts = [x.decode("utf-8") if isinstance(x, bytes) else str(x) for x in arr.reshape(-1)]
            if arr.ndim == 2 and arr.shape[1] == 2:
                items: list[Any] = [[texts[2 * i], texts[2 * i + 1]] for i in range(arr.shape[0])]
            elif arr.ndim == 1:
                items = texts
            else:
                raise InvalidInput(f"input shape {list(arr.shape)}: expected [n] or [n, 2]")
            second = req.get_input_by_name("text_pair")
            if second is not None and arr.ndim == 1:
                pairs = [x.decode("utf-8") if isinstance(x, bytes) else str(x) for x in second.as_numpy().reshape(-1)]
                if len(pairs) != len(items):
                    raise InvalidInput("text_pair has a different length from text")
                items = [[a, b] for a, b in zip(items, pairs)]
            n = len(items)
            scores = self._scores(items) if n else np.zeros((0, len(self.clf.labels)), np.float32)
            if args.labels_only:
                labels = np.array([self.clf.labels[i].encode() for i in scores.argmax(-1)], dtype=np.object_)
                out = InferOutput(name="label", shape=[n], datatype="BYTES")
                out.set_data_from_numpy(labels, binary_data=False)
            else:
                out = InferOutput(
                    name=args.outputs, shape=list(scores.shape), datatype="FP32",
                    parameters={"labels": ",".join(self.clf.labels)},
                )
                out.set_data_from_numpy(scores.astype(np.float32), binary_data=False)
            return InferResponse(
                response_id=req.id or str(uuid.uuid4()), model_name=args.name, model_version=args.version,
                infer_outputs=[out],
            )

    class ReaderModel(kserve.Model):
        def __init__(self) -> None:
            super().__init__(args.name)
            self.reader: Reader | None = None

        def load(self) -> bool:
            self.reader = Reader(args.model)
            self.ready = True
            return True

        def predict(self, payload: dict | InferRequest, headers: dict[str, str] | None = None) -> dict:
            if isinstance(payload, InferRequest):
                raise InvalidInput("the reader is served over v1 only: POST /v1/models/{name}:predict")
            instances = payload.get("instances") if isinstance(payload, dict) else None
            if not isinstance(instances, list) or not all(
                isinstance(x, dict) and isinstance(x.get("question"), str) and isinstance(x.get("context"), str)
                for x in instances
            ):
                raise InvalidInput('expected {"instances": [{"question": str, "context": str}, ...]}')
            preds = [self.reader.answer(x["question"], x["context"]) for x in instances]
            return {"predictions": preds, "model_version": args.version}

    model = ClassifierModel() if args.task == "classify" else ReaderModel()
    model.load()
    server = kserve.ModelServer(http_port=args.http_port, workers=1, enable_grpc=False, enable_latency_logging=False)

    # KServe's metadata carries no versions (its dataplane drops them): add ours.
    plain_metadata = server.dataplane.model_metadata

    async def model_metadata(model_name: str) -> dict:
        meta = await plain_metadata(model_name)
        meta["versions"] = [args.version]
        return meta

    server.dataplane.model_metadata = model_metadata
    print(f"kserve_server: {args.task} {args.name} v{args.version} on 127.0.0.1:{args.http_port}, "
          f"torch threads {threads}", flush=True)
    server.start([model])


if __name__ == "__main__":
    main()
