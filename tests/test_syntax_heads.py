"""syntax-heads: the CoNLL-U loader, word-level maps, relation accuracy and baselines, the attention-only
parser and head roles on synthetic maps whose answers are known; bare encoders; the probe end to end."""

from __future__ import annotations

import re

import pytest
import torch
from click.testing import CliRunner
from conftest import SHARED

from bertprobe.cli import main
from bertprobe.data.treebank import read_conllu
from bertprobe.errors import DataError
from bertprobe.model import ModelSpec, load_target
from bertprobe.model.target import word_index_of
from bertprobe.probe import ProbeContext
from bertprobe.probes.syntax_heads.parser import AttentionParser, right_branching
from bertprobe.probes.syntax_heads.probe import SyntaxHeadsProbe, SyntaxParams
from bertprobe.probes.syntax_heads.relations import HeadStatistics, RoleParams, head_roles, offset_baselines
from bertprobe.probes.syntax_heads.wordlevel import word_attention
from bertprobe.testing import WORDS, save_tiny_model, tiny_target


def test_conllu_loader_keeps_syntactic_words_and_layers(treebank):
    data = read_conllu(treebank)
    assert [ex.id for ex in data.examples] == ["s1", "s2"]
    second = data.examples[1]
    assert second.words == ("i", "can", "have", "two", "cats")  # the multiword token and empty node skipped
    assert second.layers["head"] == (3, 3, 0, 5, 3)
    assert second.layers["deprel"] == ("nsubj", "aux", "root", "nummod", "obj")
    assert all(second.text[s:e] == w for w, (s, e) in zip(second.words, second.spans))
    assert {"data:words", "data:layer:head", "data:layer:deprel"} <= data.features


@pytest.mark.parametrize("bad, where", [
    ("1\tthe\tthe\tDET\t_\t_\t2\tdet\t_\n", "line 1: a token line has 9"),
    ("# c\n1\tthe\tthe\tDET\t_\t_\tx\tdet\t_\t_\n", "line 2"),
    ("1\tthe\tthe\tDET\t_\t_\t7\tdet\t_\t_\n2\tdog\tdog\tNOUN\t_\t_\t0\troot\t_\t_\n", "has head 7"),
    ("1\tthe\tthe\tDET\t_\t_\t2\tdet\t_\t_\n3\tdog\tdog\tNOUN\t_\t_\t0\troot\t_\t_\n", "line 2: word id 3 out of order"),
])
def test_malformed_conllu_names_file_and_line(tmp_path, bad, where):
    path = tmp_path / "bad.conllu"
    path.write_text("1\tok\tok\tX\t_\t_\t0\troot\t_\t_\n\n" * 0 + bad + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=where) as info:
        read_conllu(path)
    assert "bad.conllu" in str(info.value)


def test_word_level_attention_sums_to_and_averages_from_split_words():
    # tokens: [CLS] a b1 b2 c [SEP]; words: a, b (= b1 b2), c
    word_index = torch.tensor([[-1, 0, 1, 1, 2, -1]])
    att = torch.tensor([
        [0.5, 0.1, 0.1, 0.1, 0.1, 0.1],
        [0.2, 0.2, 0.2, 0.2, 0.0, 0.2],
        [0.0, 0.4, 0.2, 0.2, 0.2, 0.0],
        [0.0, 0.0, 0.5, 0.0, 0.5, 0.0],
        [0.1, 0.3, 0.3, 0.0, 0.2, 0.1],
        [0.2, 0.2, 0.2, 0.2, 0.0, 0.2],
    ]).view(1, 1, 6, 6)
    got = word_attention(att, word_index, 3)[0, 0]
    # by hand: row a = token 1: to a 0.2, to b 0.2 + 0.2, to c 0.0 -> /0.6
    # row b = mean of tokens 2 and 3: to a (0.4 + 0)/2, to b (0.4 + 0.5)/2, to c (0.2 + 0.5)/2 -> /1.0
    # row c = token 4: 0.3, 0.3, 0.2 -> /0.8
    expected = torch.tensor([[0.2 / 0.6, 0.4 / 0.6, 0.0], [0.2, 0.45, 0.35], [0.375, 0.375, 0.25]])
    torch.testing.assert_close(got, expected)


def test_word_index_from_offsets_and_truncation():
    spans = ((0, 3), (4, 11))  # "the puppies"
    offsets = [(0, 0), (0, 3), (4, 7), (7, 11), (0, 0)]
    assert word_index_of(offsets, [1, 0, 0, 0, 1], spans) == [-1, 0, 1, 1, -1]
    assert word_index_of([(0, 0), (0, 3), (0, 0)], [1, 0, 1], spans) is None  # "puppies" cut off


def _planted_maps(trees, hit_head: int, k: int = 4, seed: int = 0) -> list[torch.Tensor]:
    """Per sentence K x n x n maps: head ``hit_head`` attends from each word to its gold head (the root to
    itself), head 1 to the next word, the others random."""
    gen = torch.Generator().manual_seed(seed)
    maps = []
    for heads, _ in trees:
        n = len(heads)
        m = torch.rand(k, n, n, generator=gen)
        m[hit_head] = 0.05
        m[1] = 0.05
        for j, h in enumerate(heads):
            m[hit_head, j, (h - 1) if h else j] = 1.0
            m[1, j, min(j + 1, n - 1)] = 1.0
        maps.append(m / m.sum(-1, keepdim=True))
    return maps


def test_relation_accuracy_and_offset_baseline_on_known_maps(treebank):
    data = read_conllu(treebank)
    trees = [(ex.layers["head"], ex.layers["deprel"]) for ex in data.examples]
    base = offset_baselines(trees)
    # det: the->dog (+1), a->bone (+1), the->cat (+1): always the next word
    assert base.offset["det"] == 1 and base.accuracy["det"] == 1.0
    # nsubj: dog->gave (+1), i->have (+2): the best single offset gets one of two
    assert base.accuracy["nsubj"] == 0.5
    relations = ["det", "nsubj", "obj"]
    stats = HeadStatistics(relations, 4)
    for (heads, rels), m in zip(trees, _planted_maps(trees, hit_head=3)):
        n = len(heads)
        gold = torch.tensor([[h - 1 if h else -1 for h in heads]])
        idx = torch.tensor([[relations.index(r) if r in relations and h else -1 for h, r in zip(heads, rels)]])
        stats.add_words(m.view(1, 4, n, n), gold, idx)
    acc = stats.accuracy("dep_to_head")
    assert acc[:, 3].tolist() == [1.0, 1.0, 1.0]  # the planted head finds every gold head
    assert acc[0, 1] == 1.0  # the next-word head is right for det (+1) ...
    assert acc[1, 1] == 0.5  # ... and for one subject of two
    assert stats.dependents.tolist() == [3, 2, 2]


def test_attention_only_parser_learns_a_planted_head():
    import random

    rng = random.Random(0)
    trees = []
    for _ in range(120):  # random projective-ish trees: each word attaches to a random other word
        n = rng.randint(3, 9)
        root = rng.randrange(n)
        trees.append(([0 if j == root else rng.choice([i for i in range(n) if i != j]) + 1 for j in range(n)], ["x"] * n))
    maps = _planted_maps(trees, hit_head=2, k=5, seed=1)
    train = [(m, h) for m, (h, _) in zip(maps[:80], trees[:80])]
    parser = AttentionParser(5)
    losses = parser.fit(train, epochs=30, lr=0.2)
    assert losses[-1] < losses[0] / 3
    assert int((parser.w.abs() + parser.u.abs()).argmax()) == 2
    from bertprobe.probes.syntax_heads.parser import pad_batch

    maps_eval, gold, lengths = pad_batch([(m, h) for m, (h, _) in zip(maps[80:], trees[80:])])
    correct, total = parser.correct(maps_eval, gold, lengths)
    assert correct / total > 0.95
    assert right_branching((2, 3, 0)) == (2, 2) and right_branching((0, 1, 1)) == (0, 2)


def test_roles_on_synthetic_token_maps():
    # 2 sentences of 6 tokens: [CLS] w w w w [SEP]; head 0 looks at the previous token, head 1 at the rarest
    # token (position 3), head 2 spreads evenly; head 3 finds every dependency (a syntactic head)
    t, k = 6, 4
    content = torch.tensor([[False, True, True, True, True, False]] * 2)
    att = torch.full((2, k, t, t), 1.0 / t)
    for q in range(1, 5):
        att[:, 0, q] = 0.0
        att[:, 0, q, q - 1 if q > 1 else 2] = 1.0  # the first word has no previous word: looks ahead
        att[:, 1, q] = 0.0
        att[:, 1, q, 3] = 1.0
    stats = HeadStatistics(["det"], k)
    stats.add_tokens(att, content, torch.tensor([3, 3]))
    stats.dep_to_head[0] = torch.tensor([0.0, 0.0, 0.0, 10.0])
    stats.dependents[0] = 10
    base = offset_baselines([((2, 0), ("det", "root"))])
    base.accuracy["det"] = 0.5
    roles = head_roles(stats, base, ["det"], (2, 2), RoleParams(positional=0.7, syntactic_margin=0.1, rare_word=0.9))
    assert roles["positional"].flatten().tolist() == [True, False, False, False]  # 3 of 4 queries: 0.75
    assert roles["rare_word"].flatten().tolist() == [False, True, False, False]
    assert roles["syntactic"].flatten().tolist() == [False, False, False, True]
    strict = head_roles(stats, base, ["det"], (2, 2), RoleParams(positional=0.9))
    assert not strict["positional"].any()


def test_bare_encoder_loads_and_a_task_head_is_dropped_with_a_warning(tmp_path):
    encoder = tiny_target(tmp_path / "enc", task="encoder")
    assert encoder.task.name == "encoder"
    assert {"attentions", "heads"} <= encoder.capabilities and "predictions" not in encoder.capabilities
    from bertprobe.capabilities import TARGET

    assert encoder.capabilities <= set(TARGET)  # the target answers only with names of the one module
    clf = save_tiny_model(tmp_path / "clf")
    as_encoder = load_target(ModelSpec(path=str(clf), device="cpu", task="encoder"))
    assert any("task head is dropped" in note and "classifier" in note for note in as_encoder.notes)


@pytest.mark.parametrize("arch", ["bert", "roberta"])
def test_probe_end_to_end_on_tiny_encoders(tmp_path, treebank, arch):
    words = (*WORDS, "gave", "bone", "cat", "cats", "can", "have", "two", "to", ".", "puppies")
    target = tiny_target(tmp_path / arch, task="encoder", arch=arch, words=words)
    data = read_conllu(treebank)
    params = SyntaxParams(min_count=1, parser_epochs=3, major=("det",), eval_data=str(treebank))
    result = SyntaxHeadsProbe().run(target, data, params, ProbeContext(seed=0))
    table = {row["relation"]: row for row in result.details["relations"]}
    assert set(table) == {"det", "nsubj", "obj", "case", "obl", "punct", "aux", "nummod"}
    assert table["det"]["count"] == 3 and result.value("baseline_det") == 1.0
    assert 0 <= result.value("uas") <= 1
    assert result.value("uas_right_branching") == pytest.approx(6 / 12)  # the, a, to, the, i, two; 12 non-root
    roles = result.details["roles"]
    assert len(roles["positional"]) == 2 and len(roles["positional"][0]) == 4
    assert all(f.extra["relation"] == "det" for f in result.findings)
    above = round(result.value("relations_above_baseline") * len(table))
    assert result.details["key_finding"].startswith(f"{above} of 8 relations have a head beating the best fixed offset")
    assert result.details["key_finding"].endswith(f"attention-only parser UAS {result.value('uas'):.1%}")
    # Clark's 1-based head name, then the 0-based name the other probes use
    a, b, layer, head = map(int, re.search(r"at head (\d+)-(\d+) = L(\d+)H(\d+)", result.details["key_finding"]).groups())
    assert (layer, head) == (a - 1, b - 1)


def test_syntax_probe_on_data_without_trees_is_a_one_line_error(tmp_path, sst_tsv):
    encoder_dir = save_tiny_model(tmp_path / "enc", task="encoder")
    suite = tmp_path / "suite.yaml"
    suite.write_text(f"suite: syn\nmodel: {{path: '{encoder_dir}', device: cpu}}\ndata: {{path: '{sst_tsv}'}}\n"
                     f"report: {{dir: '{tmp_path / 'r'}'}}\nprobes:\n  - probe: syntax-heads\n  - probe: accuracy\n",
                     encoding="utf-8")
    result = CliRunner().invoke(main, ["run", str(suite)])
    assert result.exit_code == 2, result.output
    assert "syntax-heads needs data with data:layer:deprel, data:layer:head, data:words" in result.stderr
    assert "Traceback" not in result.output
    # data loaded by a loader is checked when it is read: a treebank-less jsonl behind a loader
    from bertprobe.data import Dataset, Example
    from bertprobe.probes.syntax_heads.probe import SyntaxHeadsProbe

    assert SyntaxHeadsProbe.missing_data(Dataset([Example("a b")]).features) == [
        "data:layer:deprel", "data:layer:head", "data:words"]


def test_probes_that_need_predictions_skip_a_bare_encoder(tmp_path, treebank):
    encoder_dir = save_tiny_model(tmp_path / "enc", task="encoder")
    suite = tmp_path / "suite.yaml"
    suite.write_text(f"suite: syn\nmodel: {{path: '{encoder_dir}', device: cpu}}\ndata: {{path: '{treebank}'}}\n"
                     f"report: {{dir: '{tmp_path / 'r'}'}}\nprobes:\n  - probe: attention-audit\n"
                     "  - probe: universal-trigger\n    params: {target_label: 0}\n"
                     "  - probe: syntax-heads\n    params: {min_count: 1, parser_epochs: 2}\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["run", str(suite), "--allow-skips"])
    assert result.exit_code == 0, result.output
    assert "universal-trigger  SKIPPED" in result.output and "lacks: predictions" in result.output
    assert "attention-audit    MEASURED" in result.output and "syntax-heads       MEASURED" in result.output


UD = SHARED / "data" / "ud" / "en_ewt-ud-dev.conllu"
BASE = SHARED / "models" / "minilm-l6-base"


@pytest.mark.reproduction
@pytest.mark.skipif(not (UD.is_file() and BASE.is_dir()), reason="../shared UD EWT or minilm-l6-base not present")
def test_base_encoder_has_syntactic_heads_on_ewt_dev():
    target = load_target(ModelSpec(path=str(BASE), device="cpu"))
    data = read_conllu(UD)
    result = SyntaxHeadsProbe().run(target, data, SyntaxParams(parser_epochs=5), ProbeContext(seed=0))
    # our first look (train on dev, this repository's implementation): det 0.81 vs 0.59, obj 0.74 vs 0.36,
    # nsubj 0.54 vs 0.34, case 0.67 vs 0.38 on the whole of dev; here the analysis uses every other sentence
    for rel in ("det", "obj", "nsubj", "case"):
        assert result.value(f"accuracy_{rel}") >= result.value(f"baseline_{rel}") + 0.15, rel
    assert result.value("uas") > result.value("uas_right_branching") + 0.1
    assert result.value("relations_above_baseline") >= 0.7


def test_compare_model_reports_each_relations_change(tmp_path, treebank):
    words = (*WORDS, "gave", "bone", "cat", "cats", "can", "have", "two", "to", ".")
    target = tiny_target(tmp_path / "a", task="encoder", words=words, seed=1)
    other = save_tiny_model(tmp_path / "b", task="encoder", words=words, seed=2)
    params = SyntaxParams(min_count=1, parser_epochs=2, compare_model=str(other))
    result = SyntaxHeadsProbe().run(target, read_conllu(treebank), params, ProbeContext(seed=0, load_target=load_target))
    compare = result.details["compare"]
    rows = {r["relation"]: r for r in compare["relations"]}
    assert set(rows) == {r["relation"] for r in result.details["relations"]}
    for rel, row in rows.items():
        assert row["this_model"] == pytest.approx(result.value(f"accuracy_{rel}"), abs=1e-4)
        assert row["change"] == pytest.approx(row["this_model"] - row["compare_model"], abs=1e-4)
    assert 0 <= result.value("compare_uas") <= 1
    assert result.details["figures"][-1]["title"].startswith("change of the best head")
