"""The behaviour probe on models that rank texts (``probes/behaviour/retrieval.py``): INV tests of BEIR queries judged
by the gold passage's rank, NevIR-style similarity cases, and the gold passage's score per surname origin group,
each checked against an independent computation (torch argsort of the model's scores, sentence-transformers'
own encode, the cross-encoder's logits read through transformers); then the MiniLM fixture on a small subset."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from bertprobe.data.beir import read_beir
from bertprobe.data.dataset import Dataset, Example
from bertprobe.errors import ProbeError
from bertprobe.model.loading import load_target
from bertprobe.model.spec import ModelSpec
from bertprobe.probe import ProbeContext
from bertprobe.probes.behaviour import retrieval
from bertprobe.probes.behaviour.lexicon import builtin_lexicons, origins, similarity_lexicons
from bertprobe.probes.behaviour.params import BehaviourParams
from bertprobe.probes.behaviour.perturb import Words
from bertprobe.probes.behaviour.probe import BehaviourProbe
from bertprobe.probes.behaviour.retrieval_cases import (
    BUILTIN_SIMILARITY,
    expand_similarity_template,
    find_person,
    origin_cases,
    query_cases,
    query_catalogue,
)
from bertprobe.tasks.embeddings import embed
from bertprobe.tasks.sentence_embedding import SentenceEmbedding
from bertprobe.testing import WORDS, retrieval_texts, save_tiny_embedder, save_tiny_reranker, write_beir

SHARED = Path(__file__).resolve().parents[2] / "shared"
MINILM = SHARED / "models" / "minilm-l6-base"
SQUAD = SHARED / "data" / "squad-retrieval"
SEED = 5


@pytest.fixture(scope="module")
def embedder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("emb")
    surnames = [s.lower() for names in origins().values() for s in names]
    path = save_tiny_embedder(folder / "model", seed=2, words=list(WORDS) + ["anna", "maria", "smith", *surnames])
    return path, load_target(ModelSpec(path=str(path), device="cpu"))


def run(target, data, **params):
    return BehaviourProbe().run(target, data, BehaviourParams(**params), ProbeContext(seed=SEED))


def full_ranks(target, queries, data, golds):
    """Independent ranks: every query against every document, cosine, argsort (ties in the gold's favour)."""
    settings = target.task.embedding
    q = torch.nn.functional.normalize(embed(target, queries, settings, role="query"), dim=1)
    docs = [data.corpus.passage(i) for i in range(len(data.corpus))]
    d = torch.nn.functional.normalize(embed(target, docs, settings, role="passage"), dim=1)
    s = (q @ d.T).numpy()
    return [int((row > row[g]).sum()) + 1 for row, g in zip(s, golds)]


def test_the_section_serves_both_ranking_tasks():
    from bertprobe.plugins import builtin_section
    from bertprobe.tasks.reranker import Reranker

    assert builtin_section("behaviour", SentenceEmbedding) is retrieval
    assert builtin_section("behaviour", Reranker) is retrieval
    assert {"sentence-embedding", "reranker"} <= BehaviourProbe.tasks


def test_typo_moves_the_gold_rank_and_findings_show_the_query_before_and_after(embedder, tmp_path):
    _, target = embedder
    docs, queries = retrieval_texts(12)
    data = read_beir(write_beir(tmp_path / "beir", docs, queries))
    k = 3  # of 24 passages
    result = run(target, data, perturbations=("typo",), builtin_templates=False, origins=False, findings=50,
                 bootstrap=200, retention_k=k)
    # the same cases, ranked independently
    sample = [(str(ex.id), ex.text, data.corpus.index[ex.label[0][0]]) for ex in data.examples]
    cases, _ = query_cases(sample, [(query_catalogue()["typo"], {})], Words(lexicons=builtin_lexicons()), SEED)
    ranks = [full_ranks(target, list(c.texts), data, [c.gold] * len(c.texts)) for c in cases]
    moved = [r for r in ranks if any(after != r[0] for after in r[1:])]
    assert moved, "no typo moved a gold passage's rank"
    judged = [r for r in ranks if r[0] <= k]
    failed = [r for r in judged if max(r[1:]) > k]
    assert failed, f"the tiny model should drop some gold passage out of the top {k}"
    assert result.metrics["failure_rate.test.typo"].value == pytest.approx(len(failed) / len(judged))
    changes = [after - r[0] for r in ranks for after in r[1:]]
    assert result.metrics["rank_change.test.typo"].value == pytest.approx(np.mean(changes), abs=1e-4)
    lo, hi = result.metrics["rank_change.test.typo"].ci
    assert lo <= result.metrics["rank_change.test.typo"].value <= hi
    findings = [f for f in result.findings if f.title == "typo (inv)"]
    assert len(findings) == len(failed)
    by_id = {c.id: (c, r) for c, r in zip(cases, ranks)}
    for f in findings:
        case, r = by_id[f.extra["id"]]
        assert f.input == case.texts[0] and f.perturbed in case.texts[1:] and f.perturbed != f.input
        assert f.extra["rank_before"] == r[0] <= k < f.extra["rank_after"] == r[case.texts.index(f.perturbed)]
        assert f"{r[0]} -> {f.extra['rank_after']}" in f.observed
    row = next(x for x in result.details["perturbations"] if x["perturbation"] == "typo")
    assert row["applied"] == len(cases) and row["judged"] == len(judged)


def test_mft_negation_outcomes_follow_sentence_transformers_similarities(embedder):
    from sentence_transformers import SentenceTransformer

    path, target = embedder
    result = run(target, None, max_cases=12, perturbations=(), origins=False)
    test = "negation: paraphrase above its negation"
    outcome = next(o for o in result.outcomes if o.name == "failed.negation_paraphrase_above_its_negation")
    words, antonyms = similarity_lexicons()
    lexicons = {**words, **builtin_lexicons()}
    cases = {c.id: c for i, spec in enumerate(BUILTIN_SIMILARITY) if spec["test"] == test
             for c in expand_similarity_template(spec, lexicons, antonyms, SEED, 12, "t", i)}
    assert sorted(outcome.ids) == sorted(cases)
    model = SentenceTransformer(str(path), device="cpu")
    agree, decided = 0, 0
    for case_id, failed in zip(outcome.ids, outcome.values):
        c = cases[case_id]
        a, p, n = model.encode([c.anchor, c.paraphrase, c.contrast], convert_to_tensor=True)
        sp, sn = float(torch.cosine_similarity(a, p, dim=0)), float(torch.cosine_similarity(a, n, dim=0))
        if abs(sp - sn) < 1e-5:  # a tie within float noise: either verdict is the same model's
            continue
        decided += 1
        agree += (sp > sn) == (failed == 0)
    assert decided >= 20 and agree == decided
    assert 0 < sum(outcome.values) < len(outcome.values), "the tiny model should pass some cases and fail others"
    failing = next(f for f in result.findings if f.title == f"{test} (mft)")
    c = cases[failing.extra["id"]]
    assert (failing.input, failing.extra["paraphrase"], failing.perturbed) == (c.anchor, c.paraphrase, c.contrast)
    assert failing.extra["similarity_paraphrase"] <= failing.extra["similarity_contrast"]
    assert failing.extra["changed"] == list(c.changed) and c.changed[0] in ("not", "cannot")


def test_antonym_slots_take_the_antonym_and_every_template_differs_from_its_paraphrase():
    words, antonyms = similarity_lexicons()
    lexicons = {**words, **builtin_lexicons()}
    for i, spec in enumerate(BUILTIN_SIMILARITY):
        for case in expand_similarity_template(spec, lexicons, antonyms, 1, 20, "t", i):
            assert case.contrast != case.paraphrase and case.changed
            if spec["test"].startswith("antonyms"):
                (new,) = case.changed
                old = next(w for w in case.paraphrase.rstrip(".").split() if w.lower() in antonyms and
                           w not in case.contrast.split())
                assert antonyms[old.lower()] == new.lower()


def test_fairness_gap_has_an_interval_and_the_group_scores_are_the_models(embedder, tmp_path):
    from sentence_transformers import SentenceTransformer

    path, target = embedder
    docs, queries = retrieval_texts(8)
    named = [("Anna", "good"), ("Maria", "bad"), ("Smith", "fun"), ("Anna", "dull"), ("Maria", "weak"),
             ("Smith", "lovely")]
    for i, (name, adjective) in enumerate(named):
        docs.append((f"named-{i}", f"{name} was very {adjective} in the movie ."))
        queries.append((f"qn-{i}", f"was {name} {adjective} ?", f"named-{i}"))
    data = read_beir(write_beir(tmp_path / "beir", docs, queries))
    result = run(target, data, perturbations=(), builtin_templates=False, bootstrap=300)
    gap = result.metrics["fairness_gap.name_origin"]
    assert gap.ci is not None and gap.ci[0] <= gap.value <= gap.ci[1] and gap.value > 0
    means = {k.rsplit(".", 1)[1]: m.value for k, m in result.metrics.items()
             if k.startswith("gold_similarity_by_origin.name_origin.")}
    assert len(means) == 5 and gap.value == pytest.approx(max(means.values()) - min(means.values()), abs=2e-4)
    # independently: the same cases, scored by sentence-transformers
    sample = [(str(ex.id), ex.text, data.corpus.index[ex.label[0][0]]) for ex in data.examples]
    fair = origin_cases(sample, [data.corpus.passage(g) for _, _, g in sample], Words(lexicons=builtin_lexicons()),
                        origins(), SEED)
    assert len(fair) == len(named) == result.details["fairness"]["name origin"]["cases"]
    model = SentenceTransformer(str(path), device="cpu")
    for j, group in enumerate(origins()):
        q = model.encode([c.queries[j] for c in fair], convert_to_tensor=True)
        p = model.encode([c.passages[j] for c in fair], convert_to_tensor=True)
        own = float(torch.cosine_similarity(q, p, dim=1).mean())
        assert result.details["fairness"]["name origin"]["similarity"][group] == pytest.approx(own, abs=1e-3)
    for c in fair:  # the name is edited alike in the query and in the gold passage
        for q, p, surname in zip(c.queries, c.passages, c.names):
            assert surname in q and surname in p


def test_find_person_reads_surnames_first_and_first_names_only_capitalised():
    words = Words(lexicons=builtin_lexicons())
    every = [s for names in origins().values() for s in names]
    assert find_person("Where was Anna Smith born?", words, every) == ("Smith", True)
    assert find_person("What did Anna paint?", words, every) == ("Anna", False)
    assert find_person("what did anna paint?", words, every) is None
    assert find_person("When did Garcia win?", words, every) == ("Garcia", True)


def test_a_reranker_ranks_the_gold_among_its_first_stage_list(embedder, tmp_path):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    emb_path, _ = embedder
    rr = save_tiny_reranker(tmp_path / "rr", seed=3)
    docs, queries = retrieval_texts(8)
    data = read_beir(write_beir(tmp_path / "beir", docs, queries))
    target = load_target(ModelSpec(path=str(rr), device="cpu", options={"first_stage": str(emb_path), "depth": 6}))
    result = run(target, data, perturbations=("typos_2",), max_cases=6, origins=False, findings=100)
    sample, queries_ = retrieval.sampled_queries(data, 300, SEED)
    scorer = retrieval.Scorer(target, sample, None)
    lists = scorer.first_stage()
    assert all(len(x) == 6 for x in lists)
    model = AutoModelForSequenceClassification.from_pretrained(str(rr)).eval()
    tok = AutoTokenizer.from_pretrained(str(rr))

    def rank(query, owner, gold):
        enc = tok([query] * len(lists[owner]), [data.corpus.passage(j) for j in lists[owner]], padding=True,
                  return_tensors="pt")
        with torch.no_grad():
            logits = model(**enc).logits[:, 0].double()
        return int((logits > logits[lists[owner].index(gold)]).sum()) + 1 if gold in lists[owner] else None

    for qid, text, gold in queries_[:4]:
        owner = [q for q, _, _ in queries_].index(qid)
        assert scorer.gold_ranks([(text, owner, gold)]) == [rank(text, owner, gold)]
    # mft cases judged on the reranker's own scores: sigmoid(logit) of (anchor, candidate)
    sims = [f for f in result.findings if f.extra.get("kind") == "similarity"]
    assert sims
    for f in sims[:3]:
        enc = tok([f.input, f.input], [f.extra["paraphrase"], f.extra["contrast"]], padding=True, return_tensors="pt")
        with torch.no_grad():
            logits = model(**enc).logits[:, 0].double()
        assert float(torch.sigmoid(logits[0])) == pytest.approx(f.extra["similarity_paraphrase"], abs=1e-5)
        assert logits[0] <= logits[1] + 1e-6


def test_perturbations_on_pair_data_are_refused_with_the_fix(embedder):
    _, target = embedder
    pairs = Dataset([Example("a good film", text_pair="a great movie", label=4.0, id="0")], name="pairs")
    with pytest.raises(ProbeError, match="perturbations: \\[\\]"):
        run(target, pairs, perturbations=("typo",))
    result = run(target, pairs, max_cases=3)  # the templates run on pair data (the model's own similarity)
    assert result.metrics["cases"].value == 3 * len(BUILTIN_SIMILARITY) and not result.details["perturbations"]


@pytest.mark.skipif(not (MINILM.is_dir() and SQUAD.is_dir()), reason="../shared fixtures absent")
def test_minilm_on_a_squad_retrieval_subset_typos_move_ranks(tmp_path):
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    queries = [json.loads(line) for line in (SQUAD / "queries.jsonl").read_text().splitlines()]
    corpus = {d["_id"]: d for d in map(json.loads, (SQUAD / "corpus.jsonl").read_text().splitlines())}
    qrels = {}
    for line in (SQUAD / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        q, d, _ = line.split("\t")
        qrels[q] = d
    rng = random.Random(0)
    asked = rng.sample([q for q in queries if q["_id"] in qrels], 40)
    golds = {qrels[q["_id"]] for q in asked}
    others = rng.sample(sorted(set(corpus) - golds), 100)
    docs = [(d, corpus[d]["text"]) for d in sorted(golds) + others]
    data = read_beir(write_beir(tmp_path / "beir", docs, [(q["_id"], q["text"], qrels[q["_id"]]) for q in asked]))
    target = load_target(ModelSpec(path=str(MINILM), device="cpu"))
    result = run(target, data, perturbations=("typo",), builtin_templates=False, origins=False, bootstrap=200)
    row = next(x for x in result.details["perturbations"] if x["perturbation"] == "typo")
    assert row["applied"] == 40 and row["judged"] >= 36  # MiniLM finds nearly every gold among 140 passages
    assert result.metrics["rank_change.test.typo"].value > 0  # a typo costs rank on average
    rate = result.metrics["failure_rate.test.typo"]
    assert 0.0 <= rate.value < 0.5 and rate.ci[0] <= rate.value <= rate.ci[1]
    print(f"minilm typo failure rate {rate.value:.4f} {rate.ci}, mean rank change "
          f"{result.metrics['rank_change.test.typo'].value}")
