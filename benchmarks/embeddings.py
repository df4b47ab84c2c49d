"""Benchmark: sentence-embedding throughput of bertprobe against sentence-transformers, in one run, and the ONNX
Runtime builds a team may serve, on the fixture's retrieval set (SQuAD as BEIR: 2,067 passages, 2,777 queries).

Encoders, each over the same texts (every passage as title + text, then every query; fp32, batches of 32, the
model's 256-token limit): ``tasks.embeddings.embed`` on the PyTorch model (bertprobe's own forward passes),
``SentenceTransformer.encode`` (its own tokenisation, length sorting and pooling: the reference a user knows), and
``embed`` on the ``runtime: onnx`` builds, fp32 and int8-dynamic. Passes are interleaved: each round runs every
encoder once in a rotated order, so that a machine's load drifts over all of them alike; an encoder's speed is the
median of its rounds (with the slowest and fastest), printed against bertprobe's torch pass (target for
sentence-transformers: within 10%). Then the exact search (``tasks.embeddings.search``, every query against every
passage, top 100) is timed, and each build's rankings are compared with the PyTorch model's: the top-10 overlap
(the share of the 10 best passages both retrieve, mean over queries, 95% interval), identical top 10s, and nDCG@10.

Usage: python benchmarks/embeddings.py [--threads 2] [--rounds 2] [--passages N] [--queries N]
       (needs sentence-transformers and the [onnx] extra; --queries N keeps the first N queries, --passages N a
       corpus of N passages: those queries' relevant ones, then the others in order: a shorter run, rankings over
       that corpus)
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from common import SHARED, require

MODEL = Path(os.environ.get("BERTPROBE_EMBEDDING_MODEL", SHARED / "models" / "minilm-l6-base"))
DATA = Path(os.environ.get("BERTPROBE_RETRIEVAL_DATA", SHARED / "data" / "squad-retrieval"))


def encoders(args: argparse.Namespace) -> tuple[Any, list[tuple[str, Callable[[list[str], str], torch.Tensor]]]]:
    """bertprobe's torch target, and (name, encode(texts, role)) of every encoder compared."""
    from sentence_transformers import SentenceTransformer

    from bertprobe.model import ModelSpec, load_target
    from bertprobe.model.variants import derive_variant
    from bertprobe.tasks.embeddings import embed

    base = load_target(ModelSpec(path=str(MODEL), device="cpu", dtype="float32", batch_size=args.batch_size))
    settings = base.task.embedding
    st = SentenceTransformer(str(MODEL), device="cpu", model_kwargs={"dtype": torch.float32})
    st.eval()
    print(f"sentence-transformers attention: {st[0].auto_model.config._attn_implementation}; bertprobe's: "
          f"{base.model.config._attn_implementation}")
    assert next(st.parameters()).dtype == torch.float32, "sentence-transformers did not load float32"

    def ours(target: Any) -> Callable[[list[str], str], torch.Tensor]:
        return lambda texts, role: embed(target, texts, settings, role=role, batch_size=args.batch_size)

    def theirs(texts: list[str], role: str) -> torch.Tensor:
        return st.encode(texts, batch_size=args.batch_size, convert_to_tensor=True, show_progress_bar=False,
                         normalize_embeddings=False).cpu()

    onnx = replace(base.spec, runtime="onnx")
    fp32, _ = derive_variant(base, onnx)
    int8, _ = derive_variant(base, replace(onnx, quantize="int8-dynamic"))
    made = [("bertprobe torch fp32", ours(base)), ("sentence-transformers", theirs),
            ("bertprobe ORT fp32", ours(fp32)), ("bertprobe ORT int8", ours(int8))]
    return base, made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--queries", type=int, default=None, help="time only the first N queries")
    parser.add_argument("--passages", type=int, default=None, help="time only the first N passages")
    args = parser.parse_args()
    require(MODEL, DATA)
    torch.set_num_threads(args.threads)  # before the ONNX sessions: they take torch's thread count
    import onnxruntime
    import sentence_transformers

    from bertprobe.data.beir import read_beir
    from bertprobe.results.outcomes import Agreement, Outcomes, ranking_label
    from bertprobe.tasks.embeddings import search
    from bertprobe.tasks.retrieval_metrics import per_query
    from bertprobe.tasks.sentence_embedding import judgements

    print(f"threads {args.threads}; torch {torch.__version__}; onnxruntime {onnxruntime.__version__}; "
          f"sentence-transformers {sentence_transformers.__version__}; batch size {args.batch_size}; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    data = read_beir(DATA)
    examples = list(data.examples)[: args.queries]
    corpus = data.corpus
    if args.passages is not None:  # a smaller corpus: the kept queries' relevant passages, then others in order
        from bertprobe.data.beir import Corpus

        gold = {d for ex in examples for d, g in ex.label if g >= 1}
        keep = [i for i, d in enumerate(corpus.ids) if d in gold]
        keep += [i for i, d in enumerate(corpus.ids) if d not in gold][: max(0, args.passages - len(keep))]
        keep.sort()
        corpus = Corpus(tuple(corpus.ids[i] for i in keep), tuple(corpus.texts[i] for i in keep),
                        tuple(corpus.titles[i] for i in keep), corpus.name)
    passages = [corpus.passage(i) for i in range(len(corpus))]
    queries = [ex.text for ex in examples]
    base, made = encoders(args)
    print(f"{MODEL.name}: pooling {base.task.settings['pooling']}, normalize {base.task.settings['normalize']}, "
          f"max_length {base.task.settings['max_length']}; {len(passages)} passages + {len(queries)} queries a pass")
    speeds: dict[str, list[float]] = {name: [] for name, _ in made}
    out: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    for r in range(args.rounds):
        for name, encode in made[r % len(made):] + made[: r % len(made)]:
            start = time.perf_counter()
            p, q = encode(passages, "passage"), encode(queries, "query")
            speeds[name].append((len(passages) + len(queries)) / (time.perf_counter() - start))
            out[name] = (p, q)
        print(f"round {r + 1} of {args.rounds} done")
    first = made[0][0]
    reference = statistics.median(speeds[first])
    print(f"\n{'encoder':24} {'texts/s (spread)':>24} {'vs ' + first:>26}")
    for name, _ in made:
        median = statistics.median(speeds[name])
        spread = f"{median:,.1f} ({min(speeds[name]):,.1f}-{max(speeds[name]):,.1f})"
        print(f"{name:24} {spread:>24} {median / reference:25.3f}x")
    st_p, st_q = out["sentence-transformers"]
    mine_p, mine_q = out[first]
    print(f"largest |embedding difference| bertprobe vs sentence-transformers: "
          f"{float(max((mine_p - st_p).abs().max(), (mine_q - st_q).abs().max())):.2g}")

    similarity = base.task.embedding.similarity
    p, q = out[first]
    searches = []
    for _ in range(3):
        start = time.perf_counter()
        indices, _ = search(q, p, 100, similarity)
        searches.append(time.perf_counter() - start)
    print(f"\nexact search, {len(queries)} queries x {len(passages)} passages, top 100: "
          f"{min(searches) * 1000:.1f} ms (best of 3; {len(queries) / min(searches):,.0f} queries/s)")
    ids = [ex.id for ex in examples]
    judged = [judgements(ex.label) for ex in examples]
    lists: dict[str, list[list[str]]] = {}
    for name, _ in made:
        if name == "sentence-transformers":
            continue
        p, q = out[name]
        found, _ = search(q, p, 100, similarity)
        lists[name] = [[corpus.ids[j] for j in row] for row in found.tolist()]
    base_vec = Outcomes.from_values("prediction", ids, [ranking_label(r) for r in lists[first]], "label")
    print(f"\n{'build':24} {'nDCG@10':>8} {'top-10 overlap with ' + first + ' (95% CI)':>56} {'identical top 10':>18}")
    for name, rows in lists.items():
        ndcg = float(np.mean(per_query(rows, judged)["ndcg@10"]))
        vec = Outcomes.from_values("prediction", ids, [ranking_label(r) for r in rows], "label")
        a = Agreement.between(name, first, "rankings", base_vec, vec)
        ci = f"{a.overlap:.4f} [{a.overlap_ci[0]:.4f}, {a.overlap_ci[1]:.4f}]"  # type: ignore[index]
        print(f"{name:24} {ndcg:8.4f} {ci:>56} {a.agreed:>8} of {a.paired} ({a.rate:.1%})")


if __name__ == "__main__":
    main()
