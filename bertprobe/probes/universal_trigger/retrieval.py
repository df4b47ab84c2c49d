"""``universal-trigger`` on a bi-encoder (``ranks_texts``): a poisoned corpus passage and a query trigger.

Papers: Zhong, Huang, Wettig, Chen 2023, "Poisoning Retrieval Corpora by Injecting Adversarial Passages" (EMNLP),
for the passage; Wallace et al. 2019 for the query trigger. ``retrieval`` picks the attacks (both, poison,
query-trigger). The queries are split (seeded; ``max_examples``, ``search_fraction``) into attack queries, which
the searches see, and held-out queries, on which every success is measured.

* Corpus poisoning: a ``passage_length``-token passage is optimised by HotFlip to maximise its mean similarity to
  the attack queries (``similarity_search.passage_search``), decoded to text, embedded anew as a document (the
  corpus's own embeddings come from ``tasks.sentence_embedding.corpus_embeddings``, cached per model) and appended
  to the corpus (``Corpus.with_documents``). ``poison_success``: the share of held-out queries whose exact
  ``top_k`` over the poisoned corpus holds it, with a Wilson interval; ``poison_success_attack`` the same on the
  attack queries; with ``transfer_data`` (a second BEIR folder), ``poison_transfer_success`` over every query of
  that folder with the same passage inserted into its corpus, one it was not optimised for.
* Query trigger: a ``length``-token phrase prepended to queries that pulls one document (``target_document``, else
  one no attack query is judged relevant to, drawn with the seed) into their ``top_k``: Wallace's search
  (``search.run_search``: HotFlip candidates, beam, halving, patience) on minus the mean similarity of the
  triggered attack queries to it. ``query_trigger_success`` on the held-out queries, those judged relevant to the
  document left out, and ``query_trigger_success_before`` without the trigger.

Where we deviate from Zhong et al.:
  * One passage, no clustering of the queries into groups with a passage each; 20 tokens and 60 HotFlip steps by
    default (they use 50 tokens and thousands of steps), so that the audit runs in minutes on a CPU: the success
    measured is what a small budget reaches, a lower bound on a determined attacker's.
  * Every attack query enters each gradient and each score at once: the mean similarity of a passage to the
    queries is its product with one vector (``attacks.similarity_goal.centroid``), so no batch of queries is drawn.
  * The start is random allowed tokens (the vocabulary filter of the trigger search); positions are visited in a
    seeded random order, a new order per sweep, and the search stops after a whole sweep without a gain.
  * Success is counted in the top 10 by default (``top_k``); the paper reports the top 20.
  * The passage is measured as a corpus would hold it: as text, re-tokenised and embedded
    (``details.passage_round_trips`` says whether its tokens survived the round trip).
A cross-encoder (``reranker``) is skipped: poisoning its corpus needs a passage scored jointly with every query, out
of scope here.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any, cast

import torch

from bertprobe.data.beir import read_beir
from bertprobe.data.dataset import Dataset, DataSpec
from bertprobe.data.prepare import fingerprint
from bertprobe.errors import ProbeError
from bertprobe.model.target import Target
from bertprobe.probe import ProbeContext, unit_seed
from bertprobe.probes.universal_trigger.params import TriggerParams
from bertprobe.probes.universal_trigger.search import checked_vocabulary, with_trigger
from bertprobe.probes.universal_trigger.similarity_search import passage_search, trigger_search
from bertprobe.results import Finding, ProbeResult
from bertprobe.results.catalogue import Catalogue
from bertprobe.results.outcomes import example_ids
from bertprobe.tasks.embeddings import EmbeddingSettings, cached_embed, embed, ranks, search
from bertprobe.tasks.sentence_embedding import SentenceEmbedding, corpus_embeddings, judgements

POISON_ID = "bertprobe-poisoned-passage"

catalogue = Catalogue(
    {"poison_success": "retrieval: share of held-out queries whose top_k over the poisoned corpus holds the passage "
                       "(Wilson interval)",
     "poison_success_attack": "retrieval: the same share on the attack queries the passage was optimised for",
     "poison_transfer_success": "retrieval: share of transfer_data's queries whose top_k over its corpus, poisoned "
                                "with the same passage, holds it",
     "query_trigger_success": "retrieval: share of held-out queries whose top_k holds the target document once the "
                              "trigger is prepended",
     "query_trigger_success_before": "retrieval: the same share without the trigger"},
    {"poison_success": False, "poison_success_attack": False, "poison_transfer_success": False,
     "query_trigger_success": False, "query_trigger_success_before": False},
    (),  # no default bound: success depends on the corpus's size, top_k and the attacker's budget (module docstring)
    ("poison_success", "poison_transfer_success", "query_trigger_success"))


def run(result: ProbeResult, target: Target, data: Dataset | None, params: TriggerParams, ctx: ProbeContext) -> None:
    """The attacks ``params.retrieval`` names on a bi-encoder, reported in ``result``; a cross-encoder is skipped."""
    if "embeddings" not in target.capabilities:
        result.status = "skipped"
        result.message = (f"{target.task.name} models score (query, passage) pairs jointly: corpus poisoning and query "
                          "triggers here attack bi-encoders (sentence-embedding models); a cross-encoder's is out of "
                          "scope")
        return
    check(params, data)
    assert data is not None and data.corpus is not None
    seed = ctx.seed if params.seed is None else params.seed
    settings = embedding_settings(target)
    attack, held = split(data, params, seed)
    ids = example_ids(data.examples)
    documents = corpus_embeddings(target, data.corpus, settings, progress=ctx.progress)
    queries = cached_embed(target, [ex.text for ex in data.examples], settings, role="query", key=fingerprint(data),
                           progress=ctx.progress, desc="queries")
    allowed = checked_vocabulary(target.tokenizer, params)
    result.add_metric("examples_searched", len(attack), None, "attack queries the searches saw", kind="count")
    result.add_metric("examples_held_out", len(held), None, "held-out queries every success is measured on", kind="count")
    result.details.update({"top_k": params.top_k, "similarity": settings.similarity, "summary": {}})
    start, passes, lines = time.perf_counter(), 0, []
    if params.retrieval in ("both", "poison"):
        passes += poison(result, target, data, params, ctx, seed, attack, held, ids, documents, queries, allowed, lines)
    if params.retrieval in ("both", "query-trigger"):
        passes += query_trigger(result, target, data, params, ctx, seed, attack, held, ids, documents, queries,
                                allowed, lines)
    result.add_metric("search_seconds", time.perf_counter() - start, False, "wall time of the searches and their "
                      "evaluation", kind="cost")
    result.add_metric("forward_passes", passes, False, "model forward calls during the searches", kind="cost")
    result.details["key_finding"] = "; ".join(lines)


def embedding_settings(target: Target) -> EmbeddingSettings:
    """How the bi-encoder under audit embeds a text (this section serves sentence-embedding models)."""
    return cast(SentenceEmbedding, target.task).embedding


def check(params: TriggerParams, data: Dataset | None) -> None:
    """The params a bi-encoder's attacks take, and BEIR data, each problem one line."""
    if params.retrieval is None:
        raise ProbeError("on a sentence-embedding model set retrieval: both, poison (a passage inserted into the corpus) "
                         "or query-trigger (a phrase prepended to queries)")
    given = [name for name in ("target_label", "to_label", "target_answer", "transfer_model")
             if getattr(params, name) is not None]
    if given:
        raise ProbeError(f"on a sentence-embedding model leave {', '.join(given)} out (retrieval names its attacks; "
                         "transfer_data a second BEIR folder)")
    if data is None or data.corpus is None:
        raise ProbeError("the retrieval attacks need BEIR data (a folder with corpus.jsonl, queries.jsonl and qrels/): "
                         "queries and a corpus to poison")


def split(data: Dataset, params: TriggerParams, seed: int) -> tuple[list[int], list[int]]:
    """The queries in seeded order (at most ``max_examples``), the first ``search_fraction`` to attack, the rest held
    out."""
    order = list(range(len(data.examples)))
    random.Random(seed).shuffle(order)
    if params.max_examples:
        order = order[: params.max_examples]
    if len(order) < 4:
        raise ProbeError(f"only {len(order)} queries; the retrieval attacks need at least 4 (attack and held-out)")
    cut = max(1, min(len(order) - 1, round(len(order) * params.search_fraction)))
    return order[:cut], order[cut:]


def captured(queries: torch.Tensor, documents: torch.Tensor, document: int, k: int,
             similarity: str) -> tuple[list[bool], list[int]]:
    """Whether document ``document`` is in each query's exact top ``k`` of ``documents``, and its 1-based rank."""
    if queries.shape[0] == 0:
        return [], []
    found, _ = search(queries, documents, k, similarity)
    hits = (found == document).any(1).tolist()
    return hits, ranks(queries, documents, [document] * queries.shape[0], similarity).tolist()


def poison(result: ProbeResult, target: Target, data: Dataset, params: TriggerParams, ctx: ProbeContext, seed: int,
           attack: list[int], held: list[int], ids: list[str], documents: torch.Tensor, queries: torch.Tensor,
           allowed: torch.Tensor, lines: list[str]) -> int:
    """The poisoned passage: searched on the attack queries, measured on the held-out ones (and ``transfer_data``)."""
    settings = embedding_settings(target)
    tokenizer = target.tokenizer
    best: tuple[torch.Tensor, dict[str, Any]] | None = None
    passes = 0
    for restart in range(params.restarts):
        rng = random.Random(unit_seed(seed, ctx.probe_id, f"poison{restart}"))
        ids_, info = passage_search(target, settings, params, queries[attack], allowed, rng, ctx.progress)
        passes += info.pop("forward_passes")
        ctx.log(f"poisoned passage, restart {restart}: similarity {info['similarity_start']:.3f} -> "
                f"{info['similarity']:.3f} in {info['steps']} steps")
        if best is None or info["similarity"] > best[1]["similarity"]:
            best = (ids_, info | {"restart": restart})
    assert best is not None
    passage_ids, info = best
    text = tokenizer.decode(passage_ids.tolist(), skip_special_tokens=True).strip()
    again = tokenizer(settings.passage_prompt + text, add_special_tokens=False)["input_ids"]
    prompt_ids = tokenizer(settings.passage_prompt.rstrip(), add_special_tokens=False)["input_ids"] \
        if settings.passage_prompt else []
    assert data.corpus is not None
    poisoned = data.corpus.with_documents([POISON_ID], [text])
    vector = embed(target, [poisoned.passage(len(poisoned) - 1)], settings, role="passage")
    docs = torch.cat([documents, vector])
    where = docs.shape[0] - 1
    hits, rank = captured(queries[held], docs, where, params.top_k, settings.similarity)
    hits_attack, _ = captured(queries[attack], docs, where, params.top_k, settings.similarity)
    result.add_share("poison_success", hits, [ids[i] for i in held], False,
                     f"held-out queries whose top-{params.top_k} over the poisoned corpus holds the passage")
    result.add_share("poison_success_attack", hits_attack, [ids[i] for i in attack], False,
                     f"attack queries whose top-{params.top_k} holds the passage")
    result.details["poison"] = {
        "passage": text, "tokens": tokenizer.convert_ids_to_tokens(passage_ids.tolist()),
        "passage_round_trips": again == prompt_ids + passage_ids.tolist(), "document_id": POISON_ID,
        "corpus_documents": len(documents), **info}
    rate = sum(hits) / max(len(hits), 1)
    lines.append(f"a {params.passage_length}-token passage enters the top-{params.top_k} of {rate:.0%} of "
                 f"{len(hits)} held-out queries")
    result.details["summary"]["poisoned passage"] = text
    result.findings.append(Finding(
        title=f"poisoned passage: in the top-{params.top_k} of {sum(hits)} of {len(hits)} held-out queries",
        input=text, observed=f"mean similarity to the attack queries {info['similarity_start']:.3f} (random start) -> "
                             f"{info['similarity']:.3f}", score=round(rate, 4),
        extra={"kind": "trigger", "highlight": [text]}))
    shown = sorted((r, i) for i, (h, r) in zip(held, zip(hits, rank)) if h)[: max(1, params.findings // 2)]
    for r, i in shown:
        gold = [d for d, g in judgements(data.examples[i].label).items() if g >= 1]
        result.findings.append(Finding(
            title=f"captured query: the passage ranks {r}", input=data.examples[i].text, expected=", ".join(gold),
            observed=f"{POISON_ID} at rank {r} of {len(docs)}", score=float(r), extra={"kind": "captured"}))
    if params.transfer_data:
        lines.append(transfer(result, target, params, ctx, text, settings))
    return passes


def transfer(result: ProbeResult, target: Target, params: TriggerParams, ctx: ProbeContext, text: str,
             settings: EmbeddingSettings) -> str:
    """The same passage inserted into ``transfer_data``'s corpus, measured on all its queries."""
    assert params.transfer_data is not None
    spec = DataSpec(path=params.transfer_data)
    other = ctx.load_data(spec) if ctx.load_data is not None else read_beir(Path(params.transfer_data).expanduser())
    if other.corpus is None:
        raise ProbeError(f"transfer_data '{params.transfer_data}' is not a BEIR folder (corpus.jsonl, queries.jsonl, "
                         "qrels/)")
    documents = corpus_embeddings(target, other.corpus, settings, progress=ctx.progress)
    queries = cached_embed(target, [ex.text for ex in other.examples], settings, role="query", key=fingerprint(other),
                           progress=ctx.progress, desc="transfer queries")
    poisoned = other.corpus.with_documents([POISON_ID], [text])
    docs = torch.cat([documents, embed(target, [poisoned.passage(len(poisoned) - 1)], settings, role="passage")])
    hits, _ = captured(queries, docs, docs.shape[0] - 1, params.top_k, settings.similarity)
    result.add_share("poison_transfer_success", hits, example_ids(other.examples), False,
                     f"queries of {params.transfer_data} whose top-{params.top_k} holds the passage")
    result.details["poison"]["transfer"] = {"data": params.transfer_data, "queries": len(hits),
                                            "corpus_documents": len(documents)}
    return f"{sum(hits) / max(len(hits), 1):.0%} of {len(hits)} queries of {Path(params.transfer_data).name}"


def target_document(data: Dataset, params: TriggerParams, seed: int, probe_id: str, attack: list[int]) -> int:
    """The corpus index the query trigger pulls up: ``target_document``, else one drawn with the seed among the
    documents no attack query is judged relevant to."""
    corpus = data.corpus
    assert corpus is not None
    if params.target_document is not None:
        if params.target_document not in corpus.index:
            raise ProbeError(f"target_document '{params.target_document}' is no document of the corpus (ids such as "
                             f"{', '.join(corpus.ids[:3])})")
        return corpus.index[params.target_document]
    relevant = {d for i in attack for d, g in judgements(data.examples[i].label).items() if g >= 1}
    pool = [j for j, d in enumerate(corpus.ids) if d not in relevant] or list(range(len(corpus)))
    return random.Random(unit_seed(seed, probe_id, "target-document")).choice(pool)


def query_trigger(result: ProbeResult, target: Target, data: Dataset, params: TriggerParams, ctx: ProbeContext,
                  seed: int, attack: list[int], held: list[int], ids: list[str], documents: torch.Tensor,
                  queries: torch.Tensor, allowed: torch.Tensor, lines: list[str]) -> int:
    """A phrase prepended to queries that pulls one document into their top ``top_k``."""
    settings = embedding_settings(target)
    corpus, tokenizer = data.corpus, target.tokenizer
    assert corpus is not None
    index = target_document(data, params, seed, ctx.probe_id, attack)
    doc_id = corpus.ids[index]
    texts = [data.examples[i].text for i in attack]
    best: tuple[torch.Tensor, float, int] | None = None
    passes = 0
    for restart in range(params.restarts):
        rng = random.Random(unit_seed(seed, ctx.probe_id, f"query-trigger{restart}"))
        trigger, loss, _, forwards = trigger_search(target, settings, params, texts, documents, index, allowed, rng,
                                                    restart, ctx.progress)
        passes += forwards
        ctx.log(f"query trigger, restart {restart}: {tokenizer.decode(trigger.tolist())!r} loss {loss:.3f}")
        if best is None or loss < best[1]:
            best = (trigger, loss, restart)
    assert best is not None
    trigger, loss, restart = best
    phrase = tokenizer.decode(trigger.tolist(), skip_special_tokens=True).strip()
    measured = [i for i in held if judgements(data.examples[i].label).get(doc_id, 0) < 1]
    triggered = [with_trigger(data.examples[i].text, phrase, "prepend") for i in measured]
    after = embed(target, triggered, settings, role="query", progress=ctx.progress, desc="triggered queries") \
        if triggered else torch.empty(0, documents.shape[1])
    hits, rank = captured(after, documents, index, params.top_k, settings.similarity)
    hits_before, rank_before = captured(queries[measured], documents, index, params.top_k, settings.similarity)
    result.add_share("query_trigger_success", hits, [ids[i] for i in measured], False,
                     f"held-out queries whose top-{params.top_k} holds {doc_id} with the trigger prepended")
    result.add_share("query_trigger_success_before", hits_before, [ids[i] for i in measured], False,
                     f"held-out queries whose top-{params.top_k} holds {doc_id} without the trigger")
    result.details["query_trigger"] = {
        "trigger_text": phrase, "trigger_tokens": tokenizer.convert_ids_to_tokens(trigger.tolist()),
        "target_document": doc_id, "target_text": corpus.passage(index)[:300], "loss": loss,
        "mean_similarity": -loss, "restart": restart, "held_out_measured": len(measured)}
    rate = sum(hits) / max(len(hits), 1)
    lines.append(f"trigger {phrase!r} pulls {doc_id} into the top-{params.top_k} of {rate:.0%} of {len(hits)} "
                 f"held-out queries (without it {sum(hits_before) / max(len(hits), 1):.0%})")
    result.details["summary"]["query trigger"] = f"{phrase!r} -> {doc_id}"
    shown = sorted((r, j) for j, (h, r) in enumerate(zip(hits, rank)) if h)[: max(1, params.findings // 2)]
    for r, j in shown:
        result.findings.append(Finding(
            title=f"triggered query: {doc_id} ranks {r} (was {rank_before[j]})", input=data.examples[measured[j]].text,
            perturbed=triggered[j], expected=doc_id, observed=f"{doc_id} at rank {r} (without the trigger "
                                                              f"{rank_before[j]})",
            score=float(rank_before[j] - r), extra={"kind": "trigger", "highlight": [phrase]}))
    return passes
