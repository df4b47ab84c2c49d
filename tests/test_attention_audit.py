"""attention-audit: statistics on hand-made maps, the type rules, streaming, head similarity."""

from __future__ import annotations

import math

import pytest
import torch

from bertprobe.data import Dataset, Example
from bertprobe.probe import ProbeContext
from bertprobe.probes.attention_audit import (
    TYPES,
    Accumulator,
    AttentionAuditProbe,
    AttentionParams,
    average_linkage,
    batch_statistics,
    classify,
    js_distance_matrix,
    punctuation_ids,
    special_ids,
)
from bertprobe.testing import sentiment_examples, tiny_target

CLS, SEP, A, B, PAD = 2, 3, 10, 11, 0
PUNCT = torch.zeros(20, dtype=torch.bool)
PUNCT[B] = True


def _one(matrix: torch.Tensor) -> torch.Tensor:
    """A single map as a B=1, L=1, H=1 batch."""
    return matrix.view(1, 1, 1, *matrix.shape)


def _stats(matrix, ids, mask=None, segs=None):
    ids = torch.tensor([ids])
    mask = torch.ones_like(ids) if mask is None else torch.tensor([mask])
    segs = torch.zeros_like(ids) if segs is None else torch.tensor([segs])
    return batch_statistics(_one(matrix), ids, mask, segs, {CLS}, {SEP}, PUNCT)


def test_statistics_on_hand_made_maps():
    ids = [CLS, A, B, A, SEP]
    to_cls = torch.zeros(5, 5)
    to_cls[:, 0] = 1
    sums, feats = _stats(to_cls, ids)
    assert sums["cls"].item() == pytest.approx(5) and sums["sep"].item() == 0 and sums["entropy"].item() == pytest.approx(0)
    assert feats.special.item() == pytest.approx(1)
    uniform = torch.full((5, 5), 0.2)
    sums, _ = _stats(uniform, ids)
    assert sums["entropy"].item() / 5 == pytest.approx(math.log(5))
    assert sums["punct"].item() / 5 == pytest.approx(0.2)
    assert sums["self"].item() / 5 == pytest.approx(0.2)
    assert sums["prev"].item() / 5 == pytest.approx(0.2 * 4 / 5)  # the first token has no previous one


def test_padding_is_excluded():
    ids = [CLS, A, SEP]
    base = torch.tensor([[0.0, 1.0, 0.0], [0.5, 0.0, 0.5], [1.0, 0.0, 0.0]])
    padded = torch.zeros(5, 5)
    padded[:3, :3] = base
    padded[3:, :] = 0.2  # rows of padding queries: garbage that must not count
    s1, f1 = _stats(base, ids)
    s2, f2 = _stats(padded, ids + [PAD, PAD], mask=[1, 1, 1, 0, 0])
    for key in s1:
        assert s1[key].item() == pytest.approx(s2[key].item()), key
    assert f1.special.item() == pytest.approx(f2.special.item())


def _map(kind: str, n: int = 8) -> tuple[torch.Tensor, list[int], list[int]]:
    ids = [CLS] + [A] * (n - 2) + [SEP]
    segs = [0] * n
    m = torch.zeros(n, n)
    if kind == "vertical":
        m[:, 0] = 0.5
        m[:, -1] = 0.5
    elif kind == "diagonal":
        for i in range(n):
            m[i, max(i - 1, 0)] += 1.0
    elif kind == "vertical_diagonal":
        for i in range(n):
            m[i, 0] += 0.5
            m[i, min(i + 1, n - 1)] += 0.5
    elif kind == "block":
        ids = [CLS, A, A, A, SEP, B, B, B, SEP]
        segs = [0, 0, 0, 0, 0, 1, 1, 1, 1]
        m = torch.zeros(9, 9)
        for i in range(9):
            block = [1, 2, 3] if segs[i] == 0 else [5, 6, 7]
            far = [j for j in block if abs(j - i) > 1] or block
            for j in far:
                m[i, j] = 1 / len(far)
    else:  # heterogeneous: spread over distant content tokens
        for i in range(n):
            far = [j for j in range(1, n - 1) if abs(j - i) > 1]
            for j in far:
                m[i, j] = 1 / len(far)
    return m, ids, segs


@pytest.mark.parametrize("kind", TYPES)
def test_each_synthetic_map_gets_its_type(kind):
    matrix, ids, segs = _map(kind)
    _, feats = _stats(matrix, ids, segs=segs)
    assert TYPES[int(classify(feats, AttentionParams()).item())] == kind


def test_thresholds_are_params():
    matrix, ids, segs = _map("vertical")
    _, feats = _stats(matrix * 0.7 + torch.eye(8) * 0.3, ids)
    assert TYPES[int(classify(feats, AttentionParams()).item())] == "vertical"
    assert TYPES[int(classify(feats, AttentionParams(vertical=0.8, mixed_total=0.9)).item())] == "heterogeneous"


def test_js_distance_and_clustering():
    p = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]).unsqueeze(0)  # 1 row x 3 heads x 2 keys
    d = js_distance_matrix(p)
    assert d[0, 1].item() == pytest.approx(0, abs=1e-5)
    assert d[0, 2].item() == pytest.approx(math.sqrt(math.log(2)), rel=1e-4)
    assert average_linkage(d, 2) == [0, 0, 1]


def test_special_and_punctuation_tokens_follow_the_tokenizer(tmp_path):
    rob = tiny_target(tmp_path / "r", arch="roberta")
    cls, sep = special_ids(rob.tokenizer)
    assert cls == {rob.tokenizer.convert_tokens_to_ids("<s>")} and sep == {rob.tokenizer.convert_tokens_to_ids("</s>")}
    punct = punctuation_ids(rob.tokenizer)
    assert punct[rob.tokenizer.convert_tokens_to_ids("Ġ,")] and not punct[rob.tokenizer.convert_tokens_to_ids("Ġgood")]


def _data(n: int) -> Dataset:
    return Dataset([Example(t, label=y) for t, y in sentiment_examples(n, 3)])


@pytest.fixture(scope="module", params=["bert", "roberta"])
def target(request, tmp_path_factory):
    return tiny_target(tmp_path_factory.mktemp(request.param), arch=request.param, initializer_range=0.5)


def test_probe_metrics_are_consistent_and_batch_independent(target):
    params = AttentionParams(similarity_examples=5, clusters=2)
    a = AttentionAuditProbe().run(target, _data(30), params, ProbeContext())
    b = AttentionAuditProbe().run(target, _data(30), AttentionParams(similarity_examples=5, clusters=2, batch_size=1), ProbeContext())
    shares = [a.value(f"share_{t}") for t in TYPES]
    assert sum(shares) == pytest.approx(1)
    for name in a.metrics:
        assert a.value(name) == pytest.approx(b.value(name), abs=1e-5), name
    assert a.details["maps"] == 30 * 2 * 4
    assert len(a.details["heads"]) == 8
    assert 0 < a.value("mean_entropy") < math.log(64)
    assert len(a.details["head_similarity"]["clusters"]) == 2
    top = max(TYPES, key=lambda t: a.value(f"share_{t}"))  # the summary's line starts with the commonest map type
    assert a.details["key_finding"].startswith(f"attention maps mostly {top.replace('_', '+')} {a.value(f'share_{top}'):.0%}")
    assert f"[SEP] takes {a.value('sep_attention_mid_layers'):.0%}" in a.details["key_finding"]
    for finding in a.findings:  # typical maps carry what the HTML report needs to draw them
        n = len(finding.extra["tokens"])
        assert len(finding.extra["matrix"]) == n and all(abs(sum(r) - 1) < 0.01 for r in finding.extra["matrix"])
    assert target.model.config._attn_implementation == "sdpa"  # eager only during the probe


def test_memory_state_does_not_grow_with_examples(target, monkeypatch):
    sizes = []
    real_init = Accumulator.__post_init__

    def spy(self):
        real_init(self)
        sizes.append(self)

    monkeypatch.setattr(Accumulator, "__post_init__", spy)
    for n in (8, 64):
        AttentionAuditProbe().run(target, _data(n), AttentionParams(similarity=False), ProbeContext())
    small, large = sizes
    assert small.state_numel() == large.state_numel()
    assert len(large.typical) <= len(TYPES) and large.examples == 64


def test_compare_model_to_itself_is_cosine_one(target):
    params = AttentionParams(similarity=False, compare_model="same")
    result = AttentionAuditProbe().run(target, _data(6), params, ProbeContext(load_target=lambda spec: target))
    assert result.value("compare_cosine_mean") == pytest.approx(1.0, abs=1e-5)


def test_js_distance_matrix_vectorised_matches_the_per_row_definition():
    from bertprobe.probes.attention_audit import js_distance_matrix

    torch.manual_seed(0)
    dists = torch.rand(37, 6, 9).softmax(-1)
    expected = torch.zeros(6, 6, dtype=torch.float64)
    for r in range(37):
        for a in range(6):
            for b in range(6):
                p, q = dists[r, a].double(), dists[r, b].double()
                m = (p + q) / 2
                js = 0.5 * (p * (p / m).log()).sum() + 0.5 * (q * (q / m).log()).sum()
                expected[a, b] += js.clamp_min(0).sqrt()
    expected /= 37
    for budget in (1, 500, 1 << 20):  # one row per chunk, a few rows, all rows at once
        assert torch.allclose(js_distance_matrix(dists, budget), expected, atol=1e-9)


def test_head_similarity_map_is_ordered_by_cluster(tmp_path):
    from bertprobe.data import Dataset, Example
    from bertprobe.probe import ProbeContext
    from bertprobe.probes.attention_audit import AttentionAuditProbe, AttentionParams
    from bertprobe.testing import tiny_target

    target = tiny_target(tmp_path / "m", layers=2, heads=4, initializer_range=0.5)
    data = Dataset([Example(t) for t in ["the movie was good", "a very boring dull story", "fun", "bad plot"]])
    result = AttentionAuditProbe().run(target, data, AttentionParams(clusters=3), ProbeContext())
    spec = next(f["data"] for f in result.details["figures"]
                if f["title"] == "Jensen-Shannon distance between heads (ordered by cluster)")
    clusters = result.details["head_similarity"]["clusters"]
    position = {name: i for i, name in enumerate(spec["rows"])}
    for members in clusters:  # each cluster's heads are contiguous in the ordered map
        places = sorted(position[m] for m in members)
        assert places == list(range(places[0], places[0] + len(members)))
    assert sorted(spec["rows"]) == sorted(f"L{i}H{j}" for i in range(2) for j in range(4))


@pytest.mark.parametrize("n,k", [(12, 3), (72, 5), (144, 5), (30, 1)])
def test_average_linkage_partitions_as_scipy_does(n, k):
    """The Lance-Williams update against SciPy's UPGMA, cut at ``k`` clusters: the same partition, clusters
    numbered in the order of their first member."""
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform

    from bertprobe.probes.attention_audit import average_linkage

    points = torch.rand(n, 6, generator=torch.Generator().manual_seed(n))
    dist = torch.cdist(points.double(), points.double())
    dist.fill_diagonal_(0)
    labels = average_linkage(dist, k)
    theirs = fcluster(linkage(squareform(dist.numpy(), checks=False), method="average"), t=k, criterion="maxclust")
    as_sets = lambda lab: {frozenset(i for i in range(n) if lab[i] == c) for c in set(lab)}  # noqa: E731
    assert as_sets(labels) == as_sets(list(theirs)) and len(set(labels)) == k
    firsts = [labels.index(c) for c in range(k)]
    assert firsts == sorted(firsts)
