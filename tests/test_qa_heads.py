"""Readers under the encoder-level probes: head-pruning's importance, ablations and curve on questions over
windows (SQuAD F1), attention-audit and syntax-heads on a QA model's encoder, and which probes a reader meets."""

from __future__ import annotations

import dataclasses
import math
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from conftest import CONLLU, QA_WORDS, SHARED, save_tiny_reader

from bertprobe.cli import main
from bertprobe.data import Dataset, Example
from bertprobe.data.dataset import DataSpec
from bertprobe.data.treebank import read_conllu
from bertprobe.model import ModelSpec, load_target
from bertprobe.model.interventions import head_intervention
from bertprobe.params import parse_params
from bertprobe.probe import ProbeContext
from bertprobe.probes.attention_audit import AttentionAuditProbe, AttentionParams
from bertprobe.probes.backdoor_scan.probe import BackdoorScanProbe
from bertprobe.probes.head_pruning import answers as qa_section
from bertprobe.probes.head_pruning.evaluator import Evaluator
from bertprobe.probes.head_pruning.params import HeadParams
from bertprobe.probes.head_pruning.probe import HeadPruningProbe
from bertprobe.probes.syntax_heads.probe import SyntaxHeadsProbe, SyntaxParams
from bertprobe.probes.universal_trigger.probe import UniversalTriggerProbe
from bertprobe.stats import bootstrap_ci
from bertprobe.tasks import squad_metrics as M
from bertprobe.tasks.question_answering import QuestionAnswering

WORDS = QA_WORDS[:-3] + ("gave", "bone", "can", "have") + QA_WORDS[-3:]  # the treebank's words too
POOL = [w for w in WORDS if w not in "?.,"]
MAX_LENGTH, STRIDE = 48, 16  # the tiny model has 128 positions: windows of 48 make long contexts span several


def reader(path: Path, task: str = "auto"):
    target = load_target(ModelSpec(path=str(path), device="cpu", task=task))
    if isinstance(target.task, QuestionAnswering):
        target.task = dataclasses.replace(target.task, settings={**target.task.settings, "max_length": MAX_LENGTH,
                                                                  "stride": STRIDE})
    return target


@pytest.fixture(scope="module")
def qa_path(tmp_path_factory):
    # a wider initialisation than BERT's 0.02, so that removing a head moves a random model's answers
    return save_tiny_reader(tmp_path_factory.mktemp("qa-heads"), WORDS, seed=6, initializer_range=0.5)


@pytest.fixture(scope="module")
def qa(qa_path):
    return reader(qa_path)


def questions(target, n: int = 9, seed: int = 0) -> Dataset:
    """Questions over contexts of 1 to 3 windows; golds: the model's own answer (F1 1), a word elsewhere in the
    context (often 0, sometimes partial), two golds, and one unanswerable question (SQuAD 2.0: the null score)."""
    rng = random.Random(seed)
    raw = []
    for i in range(n):
        context = " ".join(rng.choice(POOL) for _ in range(10 + 25 * (i % 4))) + " ."
        raw.append((f"what is the {rng.choice(POOL)} ?", context))
    own = target.task.answers(target, [Example(q, text_pair=c, id=f"q{i}") for i, (q, c) in enumerate(raw)])
    examples = []
    for i, ((q, c), a) in enumerate(zip(raw, own)):
        words = c.split()
        other = " ".join(words[i % 5 : i % 5 + 2])
        gold: tuple = {0: ((a.text, a.start),), 1: ((other, c.index(other)),),
                       2: ((other, c.index(other)), (a.text, a.start))}[i % 3]
        if i == n - 1:
            gold = ()
        examples.append(Example(q, text_pair=c, label=gold, id=f"q{i}"))
    return Dataset(examples, name="questions")


# ---- an independent reader: the tokenizer's own windows, HF's loss, a plain decoding loop ------------------

def windows(tokenizer, ex: Example):
    return tokenizer(ex.text, ex.text_pair, truncation="only_second", max_length=MAX_LENGTH, stride=STRIDE,
                     return_overflowing_tokens=True, return_offsets_mapping=True)


def hf_positions(enc, w: int, ex: Example) -> tuple[int, int]:
    """HF's training labels: the first and last sub-tokens overlapping the answer where this window holds it all,
    else [CLS] (0); the first gold answer; [CLS] for an unanswerable question."""
    if not ex.label:
        return 0, 0
    text, start = ex.label[0]
    end = start + len(text)
    seq, offsets = enc.sequence_ids(w), enc["offset_mapping"][w]
    inside = [p for p in range(len(seq)) if seq[p] == 1]
    overlapping = [p for p in inside if offsets[p][0] < end and offsets[p][1] > start]
    if offsets[inside[0]][0] <= start and offsets[inside[-1]][1] >= end and overlapping:
        return overlapping[0], overlapping[-1]
    return 0, 0


def independent_importance(target, data: Dataset) -> torch.Tensor:
    """Mean over questions of |d/dxi of the summed HF loss of its windows| (each window alone, no padding)."""
    model, tokenizer = target.model, target.tokenizer
    total = torch.zeros(2, 4)
    for ex in data.examples:
        enc = windows(tokenizer, ex)
        xi = torch.ones(2, 4, requires_grad=True)
        with head_intervention(model, target.attention_sites(), mask=xi):
            loss = 0
            for w in range(len(enc["input_ids"])):
                s, e = hf_positions(enc, w, ex)
                inputs = {k: torch.tensor([enc[k][w]]) for k in ("input_ids", "token_type_ids", "attention_mask")}
                loss = loss + model(**inputs, start_positions=torch.tensor([s]), end_positions=torch.tensor([e])).loss
        loss.backward()
        total += xi.grad.abs()
    return total / len(data)


def plain_f1(target, data: Dataset, mask: torch.Tensor | None = None) -> np.ndarray:
    """Each question's F1, decoded window by window from the raw logits (top 20 starts and ends in the context,
    end >= start, under 30 sub-tokens, best sum; the null score against it where a question is unanswerable)."""
    model, tokenizer = target.model, target.tokenizer
    squad2 = any(ex.label == () for ex in data.examples)
    out = []
    for ex in data.examples:
        enc = windows(tokenizer, ex)
        best, null = (-math.inf, ""), math.inf
        for w in range(len(enc["input_ids"])):
            inputs = {k: torch.tensor([enc[k][w]]) for k in ("input_ids", "token_type_ids", "attention_mask")}
            with torch.inference_mode(), head_intervention(model, target.attention_sites(), mask=mask):
                result = model(**inputs)
            s, e = result.start_logits[0].tolist(), result.end_logits[0].tolist()
            null = min(null, s[0] + e[0])
            seq, offsets = enc.sequence_ids(w), enc["offset_mapping"][w]
            inside = [p for p in range(len(seq)) if seq[p] == 1]
            for i in sorted(inside, key=lambda p: -s[p])[:20]:
                for j in sorted(inside, key=lambda p: -e[p])[:20]:
                    if i <= j < i + 30 and s[i] + e[j] > best[0]:
                        best = (s[i] + e[j], ex.text_pair[offsets[i][0] : offsets[j][1]])
        text = "" if squad2 and null - best[0] > 0 else best[1]
        out.append(M.score(text, [t for t, _ in ex.label])[1])
    return np.array(out)


def mask_without(cells, shape=(2, 4)) -> torch.Tensor:
    mask = torch.ones(shape)
    for layer, head in cells:
        mask[layer, head] = 0
    return mask


# ---- head-pruning ------------------------------------------------------------------------------------------

def test_the_windows_are_several_per_long_question_and_labelled_as_hf_trains(qa):
    data = questions(qa)
    ev = Evaluator(qa, data, batch_size=3, section=qa_section)
    counts = np.bincount(ev.rows.owner.numpy())
    assert counts.max() >= 3 and counts.min() == 1 and len(ev.labels) == counts.sum()
    expected = []
    for ex in data.examples:
        enc = windows(qa.tokenizer, ex)
        expected += [[*hf_positions(enc, w, ex), len(enc["input_ids"][w])] for w in range(len(enc["input_ids"]))]
    assert ev.labels.tolist() == expected
    assert any(r[:2] == [0, 0] for r in expected) and any(r[0] > 0 for r in expected)  # [CLS] where the answer is not


def test_importance_is_the_gradient_of_each_questions_summed_span_loss(qa):
    data = questions(qa)
    fast = Evaluator(qa, data, batch_size=3, section=qa_section).importance()  # a question's windows fall into different batches
    torch.testing.assert_close(fast, independent_importance(qa, data), atol=1e-6, rtol=1e-4)
    assert all(p.requires_grad for p in qa.model.parameters())


def test_a_pruned_heads_f1_per_question_equals_an_independent_decode(qa):
    data = questions(qa)
    ev = Evaluator(qa, data, batch_size=4, section=qa_section)
    base = ev.correct()
    np.testing.assert_allclose(base, plain_f1(qa, data), atol=1e-12)
    assert 0 < base.mean() < 1 and len(set(base.tolist())) > 2  # graded: not only 0 and 1
    units = [[(0, 1)], [(1, 2)], [(1, h) for h in range(4)]]
    stacked = ev.correct_many(masks=[mask_without(u) for u in units], budget=10**9)  # units share passes
    for unit, got in zip(units, stacked):
        independent = plain_f1(qa, data, mask_without(unit))
        np.testing.assert_allclose(got, independent, atol=1e-12)
        np.testing.assert_allclose(ev.correct(mask=mask_without(unit)), independent, atol=1e-12)
    assert any(not np.allclose(plain_f1(qa, data, mask_without(u)), base) for u in units)


def test_the_probe_reports_f1_drops_with_their_paired_bootstrap_and_the_curve(qa):
    data = questions(qa)
    params = parse_params(HeadParams, {"bootstrap": 200, "step": 0.25, "physical": True, "speed_seconds": 0.5}, "p")
    result = HeadPruningProbe().run(qa, data, params, ProbeContext(seed=0))
    base = plain_f1(qa, data)
    assert result.details["metric"] == "f1" and result.value("baseline") == pytest.approx(base.mean())
    [outcomes] = result.outcomes
    assert outcomes.name == "f1" and outcomes.kind == "score" and outcomes.values == pytest.approx(base.tolist())
    assert result.metrics["baseline"].outcome == "f1"
    for row in result.details["ablation"]:
        diff = plain_f1(qa, data, mask_without([(row["layer"], row["head"])])) - base
        assert row["delta"] == pytest.approx(diff.mean(), abs=1e-12) and row["examples"] == len(data)
        assert row["ci"] == pytest.approx(bootstrap_ci(diff, 200, 0.95, seed=row["layer"] * 4 + row["head"]))
    for row in result.details["layer_ablation"]:
        assert row["drop"] == pytest.approx(base.mean() - plain_f1(qa, data, mask_without([(row["layer"], h) for h in range(4)])).mean())
    ranking = torch.tensor(result.details["importance_normalized"]).flatten().argsort().tolist()
    for point in result.details["pruning_curve"][1:]:
        cells = [divmod(f, 4) for f in ranking[: point["heads_pruned"]]]
        assert point["metric"] == pytest.approx(plain_f1(qa, data, mask_without(cells)).mean(), abs=1e-12)
    assert result.details["physical"]["accuracy_pruned"] == pytest.approx(result.details["physical"]["accuracy_masked"])
    assert "9 examples (" in result.details["summary"]["evaluations"] and "windows)" in result.details["summary"]["evaluations"]
    assert "of f1" in result.details["key_finding"]


def test_questions_of_one_context_are_resampled_together_and_the_sweeps_run_exact(qa):
    """Two questions of each of 9 contexts: each head's interval is the paired bootstrap over the contexts
    (stats.bootstrap_ci with each question's context, the head's seed), the sweep runs exact (sequential blocks
    would split contexts) and the F1 outcome carries the contexts' keys."""
    import hashlib

    one = questions(qa)
    examples = [e for ex in one.examples for e in (ex, dataclasses.replace(ex, text=ex.text.replace(" is ", " was "),
                                                                           id=f"{ex.id}b"))]
    data = Dataset(examples, name="pairs")
    params = parse_params(HeadParams, {"bootstrap": 200, "layers": False, "pruning": False, "sequential_min": 0,
                                       "sequential_block": 16}, "p")
    result = HeadPruningProbe().run(qa, data, params, ProbeContext(seed=0))
    base = plain_f1(qa, data)
    groups = [ex.text_pair for ex in examples]
    for row in result.details["ablation"]:
        diff = plain_f1(qa, data, mask_without([(row["layer"], row["head"])])) - base
        seed = row["layer"] * 4 + row["head"]
        assert row["examples"] == len(data) and row["delta"] == pytest.approx(diff.mean(), abs=1e-12)
        assert row["ci"] == pytest.approx(bootstrap_ci(diff, 200, 0.95, seed=seed, groups=groups), abs=1e-12)
    assert any(row["ci"] != pytest.approx(bootstrap_ci(plain_f1(qa, data, mask_without([(row["layer"], row["head"])]))
                                                       - base, 200, 0.95, seed=row["layer"] * 4 + row["head"]))
               for row in result.details["ablation"][:2])
    assert "questions share contexts" in result.details["summary"]["ablation passes"]
    [outcome] = result.outcomes
    assert outcome.groups == [hashlib.sha256(g.encode("utf-8")).hexdigest()[:16] for g in groups]


def test_a_prune_heads_variant_of_a_reader_drops_its_least_important_heads(qa):
    """``model.prune_heads`` ranks a reader's heads as head-pruning does (windows summed per question)."""
    from bertprobe.model.pruning import least_important, normalize_by_layer
    from bertprobe.model.variants import _pruned

    data = questions(qa)
    notes: list[str] = []
    pruned = _pruned(qa, 0.25, data, notes, lambda _: None)
    drop = least_important(normalize_by_layer(Evaluator(qa, data, batch_size=3, section=qa_section).importance()), 0.25)
    kept = {layer: pruned.bert.encoder.layer[layer].attention.self.query.out_features // 8 for layer in range(2)}
    assert kept == {layer: 4 - sum(1 for dropped, _ in drop if dropped == layer) for layer in range(2)}
    assert notes[0] == "2 of 8 heads pruned by importance on the suite data"
    batch = qa.collate(qa.task.input_rows(qa, data.examples[:3]))
    with torch.inference_mode(), head_intervention(qa.model, qa.attention_sites(), mask=mask_without(drop)):
        masked = qa.model(**batch).start_logits
    with torch.inference_mode():
        torch.testing.assert_close(pruned(**batch).start_logits, masked, atol=1e-5, rtol=1e-5)


def test_em_is_the_other_metric_and_an_unknown_one_is_refused(qa):
    data = questions(qa)
    ev = Evaluator(qa, data, batch_size=4, section=qa_section, metric="em")
    answers = qa.task.answers(qa, data.examples)
    assert ev.correct().tolist() == [o["em"] for o in qa.task.outcomes(answers, data.examples)]
    from bertprobe.errors import ProbeError

    with pytest.raises(ProbeError, match="metric 'accuracy' does not apply to a question-answering model"):
        Evaluator(qa, data, batch_size=4, section=qa_section, metric="accuracy")


def test_sequential_sweeps_keep_f1_scores_and_order_the_census_by_confidence(qa_path):
    qa = reader(qa_path)
    site = qa.attention_sites()[1]
    with torch.no_grad():  # a dead head (its output columns zeroed): removing it changes nothing, decided early
        site.out_proj.weight[:, 3 * site.head_dim :] = 0
    data = questions(qa, n=60, seed=1)
    common = {"bootstrap": 200, "layers": False, "pruning": False, "sequential_block": 16, "sequential_min": 0,
              "tolerance": 0.3}
    exact = HeadPruningProbe().run(qa, data, parse_params(HeadParams, {**common, "sequential": False}, "p"), ProbeContext(seed=0))
    seq = HeadPruningProbe().run(qa, data, parse_params(HeadParams, common, "p"), ProbeContext(seed=0))
    ev = Evaluator(qa, data, batch_size=None, section=qa_section)
    ev.correct()
    assert ev.margins.tolist() == pytest.approx([a.confidence for a in qa.task.answers(qa, data.examples)])
    full = [(e, s) for e, s in zip(exact.details["ablation"], seq.details["ablation"]) if s["examples"] == len(data)]
    early = [s for s in seq.details["ablation"] if s["examples"] < len(data)]
    assert full and early  # some heads settle on a block, the others see every question
    for e, s in full:  # F1 differences, not 0/1 casts: the exact mode's numbers
        assert s["delta"] == pytest.approx(e["delta"], abs=1e-12) and s["ci"] == pytest.approx(e["ci"])
    assert seq.value("ablation_passes") < exact.value("ablation_passes")


def test_max_examples_samples_the_questions_and_a_worker_draws_the_same_sample(qa):
    from bertprobe.probes.head_pruning.sweep import HeadSweep

    data = questions(qa, n=12)
    result = HeadPruningProbe().run(qa, data, HeadParams(bootstrap=0, ablation=False, layers=False, pruning=False,
                                                         max_examples=5), ProbeContext(seed=4))
    ids = result.outcomes[0].ids
    assert len(ids) == 5 and ids == sorted(ids, key=lambda i: int(i[1:]))
    chosen = Dataset([ex for ex in data.examples if ex.id in ids], name="chosen")
    # a worker (ray) rebuilds the sweep from the suite's whole data: the sample is drawn again
    values = HeadSweep(max_examples=5, sample_seed=4).bind(qa, data)(("mask", [(0, 1)]))
    np.testing.assert_allclose(values, plain_f1(qa, chosen, mask_without([(0, 1)])), atol=1e-12)


def test_a_sweep_carries_the_readers_section_by_name_and_a_pickled_one_evaluates_the_same(qa):
    """A worker rebuilds a sweep from its pickled settings: the section travels as its module's name (modules do
    not pickle), and a sweep given none finds the built-in one of the worker's task."""
    import pickle

    from bertprobe.probes.head_pruning.rows import portable, section_of
    from bertprobe.probes.head_pruning.sweep import HeadSweep

    data = questions(qa)
    sweep = HeadSweep(batch_size=4, layer_cache=False, section=portable(qa_section))
    assert sweep.section == "bertprobe.probes.head_pruning.answers"
    assert section_of(sweep.section, qa.task) is qa_section is section_of(None, qa.task)
    copy = pickle.loads(pickle.dumps(sweep.bind(qa, data)))
    assert copy == sweep and "_bound" not in copy.__dict__
    unit = ("mask", [(0, 1)])
    np.testing.assert_allclose(copy.bind(qa, data)(unit), plain_f1(qa, data, mask_without([(0, 1)])), atol=1e-12)


def test_a_task_still_defining_sweep_rows_is_told_its_new_name():
    from bertprobe.errors import PluginError
    from bertprobe.tasks.resolve import check_task

    class OldReader(QuestionAnswering):
        name = "old-reader"

        def sweep_rows(self, target, data, metric="auto", subset=None):
            return None

    with pytest.raises(PluginError, match=r"defines sweep_rows, which bertprobe no longer calls: define "
                                          r"example_rows\(target, data, metric, subset\)"):
        check_task(OldReader, "old-plugin")
    check_task(QuestionAnswering, "bertprobe.tasks.builtin")


# ---- the encoder-level probes ---------------------------------------------------------------------------------

def test_attention_audit_reads_a_readers_encoder_as_the_bare_encoder_does(qa_path, qa):
    encoder = reader(qa_path, task="encoder")
    assert encoder.task.name == "encoder"
    rng = random.Random(2)
    short = Dataset([Example(f"what is the {rng.choice(POOL)} ?", text_pair=" ".join(rng.choice(POOL) for _ in range(8 + i)),
                             label=(), id=str(i)) for i in range(7)], name="short")
    params = AttentionParams(batch_size=3, similarity_examples=5)
    a = AttentionAuditProbe().run(qa, short, params, ProbeContext(seed=0))
    b = AttentionAuditProbe().run(encoder, short, params, ProbeContext(seed=0))
    assert {k: m.value for k, m in a.metrics.items()} == {k: m.value for k, m in b.metrics.items()}
    assert a.details["heads"] == b.details["heads"] and a.details["head_similarity"] == b.details["head_similarity"]
    # a long context is read in its windows, every window an input
    long = questions(qa)
    got = AttentionAuditProbe().run(qa, long, params, ProbeContext(seed=0))
    count = sum(len(windows(qa.tokenizer, ex)["input_ids"]) for ex in long.examples)
    assert got.details["examples"] == count > len(long)


def test_the_head_similarity_takes_whole_inputs_within_its_cell_budget(qa):
    """Long inputs (a reader's windows) bound the Jensen-Shannon distances' cost: inputs are taken whole while
    their squared lengths fit ``similarity_cells`` (at least one), the same as asking for that many inputs."""
    data = questions(qa)
    lengths = sorted(len(r["input_ids"]) for r in qa.task.input_rows(qa, data.examples))
    cells = lengths[0] ** 2 + lengths[1] ** 2 + lengths[2] ** 2  # three of the shortest (batches are length-sorted)
    run = lambda **kw: AttentionAuditProbe().run(qa, data, AttentionParams(batch_size=64, **kw), ProbeContext(seed=0))  # noqa: E731
    bounded, counted = run(similarity_cells=cells), run(similarity_examples=3)
    assert bounded.details["head_similarity"]["inputs"] == 3
    assert bounded.details["head_similarity"] == counted.details["head_similarity"]
    assert run(similarity_cells=1).details["head_similarity"]["inputs"] == 1
    assert run().details["head_similarity"]["inputs"] == len(lengths)  # the default holds these short windows


def test_syntax_heads_reads_a_readers_encoder_as_the_bare_encoder_does(qa_path, qa, treebank):
    encoder = reader(qa_path, task="encoder")
    data = read_conllu(treebank)
    params = SyntaxParams(min_count=1, parser_epochs=3, major=("det",), eval_data=str(treebank))
    a = SyntaxHeadsProbe().run(qa, data, params, ProbeContext(seed=0))
    b = SyntaxHeadsProbe().run(encoder, data, params, ProbeContext(seed=0))
    assert {k: m.value for k, m in a.metrics.items() if k != "analysis_seconds"} == \
        {k: m.value for k, m in b.metrics.items() if k != "analysis_seconds"}
    assert a.details["relations"] == b.details["relations"] and a.details["roles"] == b.details["roles"]
    # the treebank passes the reader's label check unchanged (words, no answers)
    assert qa.task.read_labels(data, DataSpec(path=str(treebank)), "qa") is data


def test_a_reader_is_refused_only_by_the_probes_not_written_for_it():
    task = QuestionAnswering
    assert not any(cls.refuses_task(task) for cls in (HeadPruningProbe, AttentionAuditProbe, SyntaxHeadsProbe))
    assert BackdoorScanProbe.refuses_task(task) and not UniversalTriggerProbe.refuses_task(task)  # QA triggers: #55


def test_validate_admits_the_three_and_refuses_the_backdoor_scan_on_a_reader(tmp_path, qa_path):
    squad = tmp_path / "q.json"
    import json

    context = "the dog gave a bone to the cat ."
    squad.write_text(json.dumps({"data": [{"title": "t", "paragraphs": [{"context": context, "qas": [
        {"id": "q1", "question": "who gave a bone ?", "answers": [{"text": "the dog", "answer_start": 0}]}]}]}]}),
        encoding="utf-8")
    suite = tmp_path / "s.yaml"
    body = (f"suite: qa\nmodel: {{path: '{qa_path}', device: cpu}}\ndata: {{path: '{squad}'}}\n"
            f"report: {{dir: '{tmp_path / 'r'}'}}\nprobes:\n  - probe: head-pruning\n  - probe: attention-audit\n"
            f"  - probe: syntax-heads\n    data: {{path: '{tmp_path / 'tb.conllu'}'}}\n")
    (tmp_path / "tb.conllu").write_text(CONLLU, encoding="utf-8")
    suite.write_text(body, encoding="utf-8")
    ok = CliRunner().invoke(main, ["validate", str(suite)])
    assert ok.exit_code == 0, ok.output
    suite.write_text(body + "  - probe: backdoor-scan\n", encoding="utf-8")
    refused = CliRunner().invoke(main, ["validate", str(suite)])
    assert refused.exit_code == 2 and "Traceback" not in refused.output
    assert "probe backdoor-scan (backdoor-scan) does not support question-answering models" in refused.stderr
    for name in ("head-pruning", "attention-audit", "syntax-heads"):
        assert f"probe {name} ({name}) does not support" not in refused.stderr
        assert name in refused.stderr.split("probes that support question-answering:")[1]


def test_syntax_heads_runs_on_a_reader_with_its_own_treebank(tmp_path, qa_path):
    """The run reads the probe's treebank through the reader's label check (it passes unchanged)."""
    import json

    squad = tmp_path / "q.json"
    context = "the dog gave a bone to the cat ."
    squad.write_text(json.dumps({"data": [{"title": "t", "paragraphs": [{"context": context, "qas": [
        {"id": "q1", "question": "who gave a bone ?", "answers": [{"text": "the dog", "answer_start": 0}]}]}]}]}),
        encoding="utf-8")
    (tmp_path / "tb.conllu").write_text(CONLLU, encoding="utf-8")
    suite = tmp_path / "s.yaml"
    suite.write_text(f"suite: qa\nmodel: {{path: '{qa_path}', device: cpu}}\ndata: {{path: '{squad}'}}\n"
                     f"report: {{dir: '{tmp_path / 'r'}'}}\nprobes:\n  - probe: syntax-heads\n"
                     f"    data: {{path: '{tmp_path / 'tb.conllu'}'}}\n    params: {{min_count: 1, parser_epochs: 2}}\n",
                     encoding="utf-8")
    result = CliRunner().invoke(main, ["run", str(suite), "--allow-skips"])
    assert result.exit_code == 0, result.output
    assert "syntax-heads" in result.output and "MEASURED" in result.output


# ---- the fixture ----------------------------------------------------------------------------------------------

FIXTURE = SHARED / "models" / "minilm-l6-squad"
SPLIT = SHARED / "data" / "squad" / "test-split.json"


@pytest.mark.skipif(not (FIXTURE.exists() and SPLIT.exists()), reason="../shared fixtures absent")
def test_head_pruning_and_attention_audit_on_the_fixture_reader():
    """Six held-out questions (one of them three windows long): the baseline is the task's own F1 on them, a
    layer's ablation and a pruning step equal the answers decoded with those heads masked, and the audit equals
    the bare encoder's. Layers and two curve steps only: a single-head sweep is 72 passes (minutes on 2 busy cores)."""
    from collections import Counter

    from bertprobe.data.tables import load_table

    qa = load_target(ModelSpec(path=str(FIXTURE), device="cpu", dtype="float32"))
    examples = load_table(DataSpec(path=str(SPLIT))).examples
    enc = qa.tokenizer([ex.text for ex in examples], [ex.text_pair for ex in examples],
                       truncation="only_second", max_length=384, stride=128, return_overflowing_tokens=True)
    long = [examples[i] for i, n in Counter(enc["overflow_to_sample_mapping"]).items() if n >= 3][:1]
    data = Dataset(examples[:5] + long, name="squad")
    assert len(long) == 1
    params = parse_params(HeadParams, {"bootstrap": 100, "ablation": False, "step": 0.5}, "p")
    result = HeadPruningProbe().run(qa, data, params, ProbeContext(seed=0))
    task = qa.task

    def f1(mask: torch.Tensor | None = None) -> np.ndarray:
        with head_intervention(qa.model, qa.attention_sites(), mask=mask):
            answers = task.answers(qa, data.examples)
        return np.array([o["f1"] for o in task.outcomes(answers, data.examples)])

    base = f1()
    assert result.value("baseline") == pytest.approx(base.mean(), abs=1e-9)
    worst = max(result.details["layer_ablation"], key=lambda r: r["drop"])
    layer = mask_without([(worst["layer"], h) for h in range(12)], (6, 12))
    assert worst["drop"] == pytest.approx(base.mean() - f1(layer).mean(), abs=1e-9)
    ranking = torch.tensor(result.details["importance_normalized"]).flatten().argsort().tolist()
    half = result.details["pruning_curve"][1]
    assert half["heads_pruned"] == 36
    assert half["metric"] == pytest.approx(f1(mask_without([divmod(f, 12) for f in ranking[:36]], (6, 12))).mean(), abs=1e-9)
    importance = np.array(result.details["importance"])
    assert importance.shape == (6, 12) and (importance > 0).all()
    encoder = load_target(ModelSpec(path=str(FIXTURE), device="cpu", dtype="float32", task="encoder"))
    short = Dataset(examples[:4], name="squad")
    audit = [AttentionAuditProbe().run(t, short, AttentionParams(similarity=False), ProbeContext(seed=0)) for t in (qa, encoder)]
    assert {k: m.value for k, m in audit[0].metrics.items()} == {k: m.value for k, m in audit[1].metrics.items()}
