"""The models behind the example servers: a sequence classifier and an extractive reader, on CPU in fp32.

Independent of bertprobe on purpose: these stand for a serving team's own code (what bertprobe audits from outside).
Both scripts in this folder import it from beside them (a script's folder is first on ``sys.path``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import AutoModelForQuestionAnswering, AutoModelForSequenceClassification, AutoTokenizer

Text = str | Sequence[str]  # a text, or a [text, text_pair] pair


def set_threads(threads: int | None) -> int:
    """Torch's intra-op threads (``None``: leave torch's default, which follows OMP_NUM_THREADS); returns the count."""
    if threads:
        torch.set_num_threads(threads)
    return torch.get_num_threads()


@dataclass
class Classifier:
    """A Hugging Face sequence classifier folder, loaded in fp32 (the fixtures are stored in fp16)."""

    path: Path
    truncate: int | None = None  # serving-side truncation at this many tokens (a skew to find)
    lowercase: bool = False  # serving-side lower-casing (a skew to find)
    noise: float = 0.0  # Gaussian noise of this scale added to the logits (a non-deterministic endpoint)
    labels: list[str] = field(init=False)

    def __post_init__(self) -> None:
        self.tokenizer = AutoTokenizer.from_pretrained(self.path)
        self.model = AutoModelForSequenceClassification.from_pretrained(
            self.path, dtype=torch.float32, trust_remote_code=False
        ).eval()
        id2label = self.model.config.id2label
        self.labels = [str(id2label[i]) for i in range(len(id2label))]
        self.rng = np.random.default_rng()  # unseeded: noise differs from call to call, as a flaky server's would

    def logits(self, texts: Sequence[Text]) -> np.ndarray:
        """[n, C] fp32 logits, one row per text or [text, pair]."""
        firsts: list[str] = []
        seconds: list[str] = []
        for item in texts:
            if isinstance(item, str):
                firsts.append(item)
            else:
                if len(item) != 2 or not all(isinstance(x, str) for x in item):
                    raise ValueError("each input is a text or a [text, text_pair] pair of strings")
                firsts.append(item[0])
                seconds.append(item[1])
        if seconds and len(seconds) != len(firsts):
            raise ValueError("mix of texts and pairs in one batch: send one kind per request")
        if self.lowercase:
            firsts = [t.lower() for t in firsts]
            seconds = [t.lower() for t in seconds]
        limit = self.truncate or self.tokenizer.model_max_length
        if not limit or limit > 512:
            limit = 512
        enc = self.tokenizer(
            firsts, seconds or None, padding=True, truncation=True, max_length=limit, return_tensors="pt"
        )
        with torch.inference_mode():
            out = self.model(**enc).logits.float().numpy()
        if self.noise:
            out = out + self.rng.normal(0.0, self.noise, size=out.shape).astype(np.float32)
        return out.astype(np.float32)

    @staticmethod
    def softmax(logits: np.ndarray) -> np.ndarray:
        """Row softmax in fp32, as torch computes it."""
        return torch.softmax(torch.from_numpy(logits), dim=-1).numpy()


@dataclass
class Reader:
    """An extractive QA folder, decoded the way HF's old question-answering pipeline did by default: windows of
    384 sub-tokens with stride 128 (``doc_stride``), question first, the best start/end pair among the top 20 of each,
    end >= start, at most 30 sub-tokens, inside the context, over all windows; score = p(start) * p(end) with the
    softmax over each window's context tokens and [CLS]. (transformers 5 removed that pipeline, so it is written here.)
    """

    path: Path
    max_length: int = 384
    stride: int = 128
    top: int = 20
    max_answer_tokens: int = 30

    def __post_init__(self) -> None:
        self.tokenizer = AutoTokenizer.from_pretrained(self.path)
        self.model = AutoModelForQuestionAnswering.from_pretrained(
            self.path, dtype=torch.float32, trust_remote_code=False
        ).eval()

    def answer(self, question: str, context: str) -> dict[str, Any]:
        """``{"answer", "start", "end", "score"}``: start/end are character offsets into ``context``."""
        enc = self.tokenizer(
            [question], [context], truncation="only_second", max_length=self.max_length, stride=self.stride,
            return_overflowing_tokens=True, return_offsets_mapping=True, padding=True, return_tensors="pt",
        )
        offsets = enc.pop("offset_mapping").tolist()
        enc.pop("overflow_to_sample_mapping", None)
        with torch.inference_mode():
            out = self.model(**enc)
        best: dict[str, Any] = {"answer": "", "start": 0, "end": 0, "score": 0.0}
        best_score = -1.0
        for w in range(len(offsets)):
            seq = enc.sequence_ids(w)
            ctx = np.array([s == 1 for s in seq])
            keep = ctx.copy()
            keep[0] = True  # [CLS] stays in the softmax, as the pipeline kept it
            start = out.start_logits[w].float().numpy().copy()
            end = out.end_logits[w].float().numpy().copy()
            start[~keep] = -10000.0
            end[~keep] = -10000.0
            ps = np.exp(start - start.max())
            ps /= ps.sum()
            pe = np.exp(end - end.max())
            pe /= pe.sum()
            cand_s = [i for i in np.argsort(-start)[: self.top] if ctx[i]]
            cand_e = [i for i in np.argsort(-end)[: self.top] if ctx[i]]
            for i in cand_s:
                for j in cand_e:
                    if j < i or j - i + 1 > self.max_answer_tokens:
                        continue
                    score = float(ps[i] * pe[j])
                    if score > best_score:
                        best_score = score
                        a, b = offsets[w][i][0], offsets[w][j][1]
                        best = {"answer": context[a:b], "start": int(a), "end": int(b), "score": score}
        return best
