"""Probe ``attention-audit``: what do the self-attention heads look at?

Papers:
  * Kovaleva, Romanov, Rogers, Rumshisky 2019, "Revealing the Dark Secrets of BERT" (EMNLP): five
    map types (vertical, diagonal, vertical+diagonal, block, heterogeneous); heterogeneous maps, the
    only ones that could encode rich relations, were 32-61% of maps across GLUE tasks. They also
    compared heads before/after fine-tuning by the cosine similarity of flattened maps.
  * Clark, Khandelwal, Levy, Manning 2019, "What Does BERT Look At?" (BlackboxNLP): attention to
    [CLS], [SEP] and punctuation, entropy, Jensen-Shannon distances between heads; over half of the
    attention in layers 6-10 of BERT-base goes to [SEP].

Deviations:
  * Kovaleva classified maps with a CNN trained on ~400 hand-labelled maps. We use transparent,
    documented rules on three features of each map (averaged over its non-padding query rows): mass on
    special tokens (v), mass on the diagonal band i-1..i+1 (d), and, for sentence pairs, mass inside
    the query's own segment (s). In order: vertical+diagonal if v >= mixed_min, d >= mixed_min and
    v + d >= mixed_total; vertical if v >= vertical; diagonal if d >= diagonal; block if the input has
    two segments and s >= block; otherwise heterogeneous. Thresholds are params.
  * Statistics stream batch by batch into L x H accumulators, and inputs are tokenised 512 at a time;
    no map is kept except one typical example per type (the one that fits its type best among short
    inputs).
  * Head similarity uses at most ``similarity_examples`` inputs (JS distance is quadratic in heads), whole
    inputs while their summed squared lengths stay within ``similarity_cells`` (its cost grows with length
    squared: a reader's windows are several times longer than a sentence).
  * Not in the papers: on a reader (extractive QA) the maps are read on the inputs it answers from, each
    (question, context) pair split into the task's windows (``Task.input_rows``: question first, max_length
    384, stride 128), so every sub-token of a long context is seen and the two segments (question, context)
    are there for the block type and the [SEP] statistics; the context alone would show heads a reader never
    runs. Statistics count windows as inputs.
"""

from __future__ import annotations

import math
import string
from dataclasses import dataclass, field
from typing import Any

import torch

from bertprobe.data.dataset import Dataset
from bertprobe.hookmarkers import hookimpl
from bertprobe.model.target import Encoded, Target
from bertprobe.probe import Probe, ProbeContext
from bertprobe.results import Finding, ProbeResult
from bertprobe.results.figures import heatmap_spec, layer_head_heatmap

TYPES = ("vertical", "diagonal", "vertical_diagonal", "block", "heterogeneous")


@dataclass(frozen=True)
class AttentionParams:
    vertical: float = 0.6  # a map is vertical when at least this share of its attention goes to [CLS]/[SEP]
    diagonal: float = 0.6  # a map is diagonal when at least this share lies on the band i-1..i+1
    mixed_min: float = 0.3  # vertical+diagonal needs at least this share on each of the two
    mixed_total: float = 0.7  # ... and at least this share on the two together
    block: float = 0.8  # a map is block when at least this share stays inside the query's own segment (sentence pairs)
    batch_size: int = 16  # examples per forward pass
    similarity: bool = True  # measure Jensen-Shannon distances between heads and cluster them (Clark et al.)
    similarity_examples: int = 100  # inputs the head similarity uses (its cost is quadratic in heads)
    similarity_cells: int = 250_000  # at most this many query x key cells (summed squared input lengths) in the head similarity: whole inputs until the next would pass it (a reader's windows of ~180 sub-tokens: about 8)
    clusters: int = 8  # clusters of heads in the similarity figure
    compare_model: str | None = None  # another checkpoint (path or hub id) whose maps are compared head by head (Kovaleva's before/after fine-tuning)
    typical_max_tokens: int = 24  # longest input kept as the typical example of each map type in the report

    def __post_init__(self) -> None:
        for name in ("vertical", "diagonal", "mixed_min", "mixed_total", "block"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must lie in [0, 1]")
        if self.batch_size < 1 or self.clusters < 1 or self.similarity_cells < 1:
            raise ValueError("batch_size, clusters and similarity_cells must be at least 1")


def punctuation_ids(tokenizer: Any) -> torch.Tensor:
    """Boolean vector over the vocabulary: tokens made only of punctuation (after Ġ/##/▁ markers)."""
    vocab = tokenizer.get_vocab()
    flags = torch.zeros(max(len(tokenizer), max(vocab.values()) + 1), dtype=torch.bool)
    punct = set(string.punctuation) | {"``", "''", "“", "”", "’", "‘", "…", "–", "—"}
    for token, idx in vocab.items():
        word = token.lstrip("Ġ▁")
        word = word[2:] if word.startswith("##") else word
        if word and all(ch in punct for ch in word):
            flags[idx] = True
    return flags


def special_ids(tokenizer: Any) -> tuple[set[int], set[int]]:
    """([CLS]-like, [SEP]-like) ids: [CLS]/<s> and [SEP]/</s> for the model family."""
    cls = {i for i in (tokenizer.cls_token_id, tokenizer.bos_token_id) if i is not None}
    sep = {i for i in (tokenizer.sep_token_id, tokenizer.eos_token_id) if i is not None}
    return cls, sep - cls if sep - cls else sep


def any_of(ids: torch.Tensor, wanted: set[int]) -> torch.Tensor:
    """Boolean tensor shaped like ``ids``: where the id is one of ``wanted``."""
    return torch.isin(ids, torch.tensor(sorted(wanted), dtype=ids.dtype, device=ids.device))


@dataclass
class MapFeatures:
    """Per-map features for one batch: each ``B x L x H``."""

    special: torch.Tensor
    diagonal: torch.Tensor
    segment: torch.Tensor
    pair: torch.Tensor  # B: the input has two segments


def classify(f: MapFeatures, p: AttentionParams) -> torch.Tensor:
    """Type index (into TYPES) of every map, ``B x L x H``."""
    v, d = f.special, f.diagonal
    out = torch.full_like(v, TYPES.index("heterogeneous"), dtype=torch.long)
    block = f.pair.view(-1, 1, 1) & (f.segment >= p.block)
    rules = [  # applied from lowest to highest priority, so earlier rules in the docstring win
        (block, "block"),
        (d >= p.diagonal, "diagonal"),
        (v >= p.vertical, "vertical"),
        ((v >= p.mixed_min) & (d >= p.mixed_min) & (v + d >= p.mixed_total), "vertical_diagonal"),
    ]
    for cond, name in rules:
        out[cond] = TYPES.index(name)
    return out


@dataclass
class Accumulator:
    """Running sums over query rows (``L x H``) and type counts (``L x H x 5``): constant memory."""

    layers: int
    heads: int
    sums: dict[str, torch.Tensor] = field(default_factory=dict)
    rows: float = 0.0
    examples: float = 0.0
    type_counts: torch.Tensor | None = None
    typical: dict[str, dict[str, Any]] = field(default_factory=dict)

    STATS = ("cls", "sep", "punct", "self", "prev", "next", "entropy")

    def __post_init__(self) -> None:
        self.sums = {k: torch.zeros(self.layers, self.heads, dtype=torch.float64) for k in self.STATS}
        self.type_counts = torch.zeros(self.layers, self.heads, len(TYPES), dtype=torch.float64)

    def state_numel(self) -> int:
        return sum(t.numel() for t in self.sums.values()) + self.type_counts.numel()  # type: ignore[union-attr]

    def mean(self, key: str) -> torch.Tensor:
        return self.sums[key] / max(self.rows, 1.0)


def batch_statistics(att: torch.Tensor, ids: torch.Tensor, mask: torch.Tensor, segments: torch.Tensor,
                     cls_ids: set[int], sep_ids: set[int], punct: torch.Tensor) -> tuple[dict[str, torch.Tensor], MapFeatures]:
    """Sums over valid query rows (``L x H``) and per-map features for one batch.

    ``att``: ``B x L x H x T x T`` float, ``ids``/``mask``/``segments``: ``B x T``.
    """
    valid = mask.bool()
    q = valid.to(att.dtype)  # query rows that count
    rows_w = q.view(q.shape[0], 1, 1, -1)  # B x 1 x 1 x T
    t = ids.shape[1]

    def key_mass(keys: torch.Tensor) -> torch.Tensor:  # keys: B x T bool -> B x L x H x T (per query row)
        return (att * keys.to(att.dtype).view(keys.shape[0], 1, 1, 1, t)).sum(-1)

    is_cls, is_sep = any_of(ids, cls_ids), any_of(ids, sep_ids)
    is_punct = punct.to(ids.device)[ids.clamp(max=len(punct) - 1)] & valid
    per_row = {
        "cls": key_mass(is_cls),
        "sep": key_mass(is_sep),
        "punct": key_mass(is_punct),
        "self": att.diagonal(dim1=-2, dim2=-1),
        "prev": torch.nn.functional.pad(att.diagonal(offset=-1, dim1=-2, dim2=-1), (1, 0)),
        "next": torch.nn.functional.pad(att.diagonal(offset=1, dim1=-2, dim2=-1), (0, 1)),
        "entropy": -(att * torch.log(att.clamp_min(1e-12))).sum(-1),
    }
    sums = {k: (v * rows_w).sum(dim=(0, 3)) for k, v in per_row.items()}
    n_rows = q.sum(1).clamp_min(1).view(-1, 1, 1)
    # Diagonal-band mass on ordinary tokens only: mass on [CLS]/[SEP] is the vertical feature.
    band = torch.ones(t, t, dtype=torch.bool, device=att.device).triu(-1).tril(1)
    ordinary = (valid & ~(is_cls | is_sep)).to(att.dtype)
    diag = (att * band.to(att.dtype) * ordinary.view(ordinary.shape[0], 1, 1, 1, t)).sum(-1)
    same_seg = (segments.unsqueeze(2) == segments.unsqueeze(1)) & valid.unsqueeze(1) & ~(is_cls | is_sep).unsqueeze(1)
    seg_mass = (att * same_seg.to(att.dtype).view(att.shape[0], 1, 1, t, t)).sum(-1)
    feats = MapFeatures(
        special=((per_row["cls"] + per_row["sep"]) * rows_w).sum(-1) / n_rows,
        diagonal=(diag * rows_w).sum(-1) / n_rows,
        segment=(seg_mass * rows_w).sum(-1) / n_rows,
        pair=(segments * valid).amax(dim=1) > 0,  # on the batch's device
    )
    return sums, feats


def segment_ids(ids: torch.Tensor, mask: torch.Tensor, batch: dict[str, torch.Tensor], sep_ids: set[int]) -> torch.Tensor:
    """Segment index of every token: token_type_ids when present, else count [SEP]s before it."""
    if "token_type_ids" in batch and int(batch["token_type_ids"].max()) > 0:
        return batch["token_type_ids"].reshape(ids.shape)
    is_sep = any_of(ids, sep_ids)
    seps_before = torch.cumsum(is_sep.long(), dim=1) - is_sep.long()
    # RoBERTa writes '</s></s>' between segments: count pairs as one boundary
    return (seps_before > 0).long() * mask.long()


def js_distance_matrix(dists: torch.Tensor, budget: int = 1 << 18) -> torch.Tensor:
    """Mean Jensen-Shannon distance between every pair of heads: ``dists`` is ``R x N x T`` (rows, heads).

    JS(p, q) = H((p + q) / 2) - (H(p) + H(q)) / 2, computed for all pairs of heads and a chunk of rows
    at once (at most ``budget`` elements of the ``rows x N x N x T`` mixture), not in a loop of tiny
    ``log`` calls per row: that loop was the hot spot of the audit on a busy machine.
    """
    rows, n, t = dists.shape
    out = torch.zeros(n, n, dtype=torch.float64)
    if rows == 0:
        return out
    p = dists.double().clamp_min(1e-12)
    own = -torch.special.xlogy(p, p).sum(-1)  # R x N entropies
    chunk = max(1, budget // max(n * n * t, 1))
    for start in range(0, rows, chunk):
        pc = p[start : start + chunk]
        m = 0.5 * (pc.unsqueeze(1) + pc.unsqueeze(2))  # c x N x N x T
        mixed = -torch.special.xlogy(m, m).sum(-1)
        hc = own[start : start + chunk]
        js = mixed - 0.5 * (hc.unsqueeze(1) + hc.unsqueeze(2))
        out += js.clamp_min(0).sqrt().sum(0)
    return out / rows


def average_linkage(dist: torch.Tensor, k: int) -> list[int]:
    """Agglomerative clustering (average linkage, UPGMA) into ``k`` clusters; returns a label per item, clusters
    numbered in the order of their first member. Each merge joins the closest pair (the first in row order on
    a tie) and updates the merged cluster's distances by the Lance-Williams formula, ``d(a+b, c) = (|a| d(a, c)
    + |b| d(b, c)) / (|a| + |b|)``, the mean over member pairs without recomputing it: O(n^2) a merge, where
    averaging every pair of clusters afresh cost O(n^3) (seconds for 72 heads, minutes for 144)."""
    n = dist.shape[0]
    d = dist.double().clone()
    pairs_once = torch.ones(n, n, dtype=torch.bool).tril()  # the diagonal and below: each pair once, as (a < b)
    sizes = torch.ones(n, dtype=torch.float64)
    members = [[i] for i in range(n)]
    for _ in range(max(0, n - k)):
        a, b = divmod(int(d.masked_fill(pairs_once, math.inf).argmin()), n)
        merged = (sizes[a] * d[a] + sizes[b] * d[b]) / (sizes[a] + sizes[b])
        d[a], d[:, a] = merged, merged
        d[b], d[:, b] = math.inf, math.inf  # b is merged into a
        sizes[a] += sizes[b]
        members[a], members[b] = members[a] + members[b], []
    labels = [0] * n
    for c, cluster in enumerate(m for m in members if m):
        for m in cluster:
            labels[m] = c
    return labels


class AttentionAuditProbe(Probe):
    """Per-head attention statistics and pattern types (Kovaleva et al. 2019; Clark et al. 2019)."""

    name = "attention-audit"
    tasks = frozenset({"classification", "multi-label", "multiple-choice", "masked-lm", "encoder", "token-classification",
                       "question-answering", "sentence-embedding", "reranker"})
    description = "Attention to [CLS]/[SEP]/punctuation, entropy, map types, head similarity (Kovaleva; Clark 2019)"
    requires = frozenset({"attentions", "uniform-heads"})  # per-head maps are stacked over layers
    metrics = {f"share_{t}": f"share of attention maps classified {t.replace('_', '+')}" for t in TYPES} | {
        "sep_attention_mid_layers": "mean attention to [SEP] in the middle third of the layers",
        "cls_attention": "mean attention to [CLS]",
        "mean_entropy": "mean attention entropy (nats)",
        "heads_mostly_special": "share of heads putting more than half their attention on [CLS]/[SEP]",
        "compare_cosine_mean": "mean per-head cosine similarity of flattened maps to compare_model",
    }
    Params = AttentionParams
    key_metrics = ("share_*", "sep_attention_mid_layers", "mean_entropy")  # descriptive: no default bound
    paper = "Kovaleva, Romanov, Rogers, Rumshisky 2019. Revealing the Dark Secrets of BERT (EMNLP); Clark, Khandelwal, Levy, Manning 2019. What Does BERT Look At? (BlackboxNLP)"

    def run(self, target: Target, data: Dataset | None, params: AttentionParams, ctx: ProbeContext) -> ProbeResult:
        assert data is not None
        tok = target.tokenizer
        cls_ids, sep_ids = special_ids(tok)
        punct = punctuation_ids(tok)
        sites = target.attention_sites() if "heads" in target.capabilities else None
        layers = sum(len(s.layers) for s in sites) if sites else target.model.config.num_hidden_layers
        heads = sites[0].num_heads if sites else target.model.config.num_attention_heads
        acc = Accumulator(layers, heads)
        sim_rows: list[torch.Tensor] = []
        sim_budget = params.similarity_examples if params.similarity else 0
        sim_cells = 0
        other = self._compare_target(target, params, ctx)
        cos_sum = torch.zeros(layers, heads, dtype=torch.float64)
        cos_n = 0
        batches = self._stream(target, data, params.batch_size)
        total = -(-len(data) // params.batch_size)
        with target.eager_attention(), torch.inference_mode():
            for _idx, batch in ctx.progress(batches, total=total, desc="attention audit"):
                att = torch.stack(target.forward(batch, output_attentions=True).attentions, dim=1).float()
                ids = batch["input_ids"].reshape(-1, batch["input_ids"].shape[-1])
                mask = batch["attention_mask"].reshape(ids.shape)
                segs = segment_ids(ids, mask, batch, sep_ids)
                sums, feats = batch_statistics(att, ids, mask, segs, cls_ids, sep_ids, punct)
                for k, v in sums.items():
                    acc.sums[k] += v.double().cpu()
                acc.rows += float(mask.sum())
                types = classify(feats, params)
                acc.type_counts += torch.nn.functional.one_hot(types, len(TYPES)).sum(0).double().cpu()  # type: ignore[operator]
                acc.examples += types.shape[0]
                self._keep_typical(acc, att, ids, mask, feats, types, tok, params)
                if sim_budget > 0:
                    for b in range(min(sim_budget, ids.shape[0])):
                        n = int(mask[b].sum())
                        if sim_rows and sim_cells + n * n > params.similarity_cells:
                            sim_budget = 0  # the JS distances' cost grows with length squared: long inputs stop here
                            break
                        sim_cells += n * n
                        sim_rows.append(att[b, :, :, :n, :n].reshape(layers * heads, n, n).permute(1, 0, 2).cpu())
                        sim_budget -= 1
                if other is not None:
                    with other.eager_attention():
                        att_o = torch.stack(other.forward(batch, output_attentions=True).attentions, dim=1).float()
                    cos_sum += _map_cosine(att, att_o, mask).double().cpu()
                    cos_n += ids.shape[0]
        return self._result(acc, params, sim_rows, cos_sum / max(cos_n, 1) if other is not None else None)

    @staticmethod
    def _stream(target: Target, data: Dataset, batch_size: int, chunk: int = 512) -> Any:
        """Tokenise and batch ``chunk`` examples at a time, so memory does not grow with the data. The rows are
        what the model reads: one per example, or the task's own (a reader: every window of each (question,
        context) pair, ``Task.input_rows``)."""
        for start in range(0, len(data), chunk):
            examples = data.examples[start : start + chunk]
            rows = target.task.input_rows(target, examples)
            encoded = target.encode(examples) if rows is None else Encoded(rows, [len(r["input_ids"]) for r in rows])
            yield from target.batches(encoded, batch_size)

    @staticmethod
    def _compare_target(target: Target, params: AttentionParams, ctx: ProbeContext) -> Target | None:
        if not params.compare_model:
            return None
        assert ctx.load_target is not None
        other = ctx.load_target(ctx.resolve_model(params.compare_model, target.spec))
        if other.tokenizer.get_vocab() != target.tokenizer.get_vocab():
            from bertprobe.errors import ProbeError

            raise ProbeError("compare_model must share the target's tokenizer (same architecture and vocabulary)")
        return other

    @staticmethod
    def _keep_typical(acc: Accumulator, att: torch.Tensor, ids: torch.Tensor, mask: torch.Tensor,
                      feats: MapFeatures, types: torch.Tensor, tok: Any, params: AttentionParams) -> None:
        fit = {
            "vertical": feats.special,
            "diagonal": feats.diagonal,
            "vertical_diagonal": torch.minimum(feats.special, feats.diagonal),
            "block": feats.segment,
            "heterogeneous": 1 - torch.maximum(feats.special, feats.diagonal),
        }
        lengths = mask.sum(1)
        short = (lengths <= params.typical_max_tokens).view(-1, 1, 1)
        for t_index, name in enumerate(TYPES):
            score = fit[name].masked_fill(~((types == t_index) & short), -1.0)
            best = float(score.max())
            if best < 0 or best <= acc.typical.get(name, {}).get("fit", -1.0):
                continue
            b, layer, head = (int(x) for x in torch.nonzero(score == score.max())[0])
            n = int(lengths[b])
            acc.typical[name] = {
                "fit": best, "layer": layer, "head": head,
                "tokens": tok.convert_ids_to_tokens(ids[b, :n].tolist()),
                "matrix": [[round(float(x), 3) for x in row] for row in att[b, layer, head, :n, :n]],
            }

    def _result(self, acc: Accumulator, params: AttentionParams, sim_rows: list[torch.Tensor],
                cosine: torch.Tensor | None) -> ProbeResult:
        layers, heads = acc.layers, acc.heads
        result = ProbeResult(probe=self.name)
        shares = acc.type_counts / max(acc.examples, 1.0)  # type: ignore[operator]
        overall = shares.mean(dim=(0, 1))
        for i, name in enumerate(TYPES):
            result.add_metric(f"share_{name}", float(overall[i]), None, f"share of attention maps classified {name}")
        sep = acc.mean("sep")
        cls = acc.mean("cls")
        lo, hi = layers // 3, max(layers // 3 + 1, 2 * layers // 3)
        result.add_metric("sep_attention_mid_layers", float(sep[lo:hi].mean()), None,
                          f"mean attention to [SEP] in L{lo}-L{hi - 1}, the middle third of the layers (from L0)")
        result.add_metric("cls_attention", float(cls.mean()), None, "mean attention to [CLS]")
        result.add_metric("mean_entropy", float(acc.mean("entropy").mean()), None, "mean attention entropy (nats)")
        special = cls + sep
        result.add_metric("heads_mostly_special", float((special > 0.5).double().mean()), None,
                          "share of heads putting more than half their attention on [CLS]/[SEP]")
        table = []
        for layer in range(layers):
            for head in range(heads):
                entry = {"layer": layer, "head": head}
                entry.update({k: round(float(acc.mean(k)[layer, head]), 4) for k in acc.STATS})
                entry.update({f"share_{n}": round(float(shares[layer, head, i]), 4) for i, n in enumerate(TYPES)})
                table.append(entry)
        result.details["heads"] = table
        result.details["layer_type_shares"] = {n: shares[:, :, i].mean(1).tolist() for i, n in enumerate(TYPES)}
        result.details["figures"] = [{
            "kind": "bars", "title": "attention map types per layer (share of maps)",
            "data": {"labels": [f"L{i}" for i in range(layers)], "stacked": True,
                     "series": [{"name": n.replace("_", "+"), "values": result.details["layer_type_shares"][n]}
                                for n in TYPES]},
            "axes": {"x": "layer", "y": "share of maps"}}]
        titles = {"cls": "attention to [CLS]", "sep": "attention to [SEP]", "punct": "attention to punctuation",
                  "entropy": "attention entropy (nats)"}
        maps = [heatmap_spec(title, layer_head_heatmap(acc.mean(k))) for k, title in titles.items()]
        maps.append(heatmap_spec("share heterogeneous", layer_head_heatmap(shares[:, :, TYPES.index("heterogeneous")])))
        ranked = sorted(range(len(TYPES)), key=lambda i: -float(overall[i]))
        result.details["key_finding"] = (
            "attention maps mostly " + ", ".join(f"{TYPES[i].replace('_', '+')} {overall[i]:.0%}" for i in ranked[:2])
            + f"; [SEP] takes {float(sep[lo:hi].mean()):.0%} of the attention in L{lo}-L{hi - 1}")
        result.details["summary"] = {
            "map types": ", ".join(f"{n.replace('_', '+')} {overall[i]:.0%}" for i, n in enumerate(TYPES)),
            "special tokens": f"[CLS] {float(cls.mean()):.0%}, [SEP] {float(sep.mean()):.0%} of all attention",
        }
        result.details["examples"] = int(acc.examples)
        result.details["maps"] = int(acc.examples) * layers * heads
        if sim_rows:
            dist = _js_over_examples(sim_rows)
            names = [f"L{i}H{j}" for i in range(layers) for j in range(heads)]
            off = dist + torch.eye(len(names), dtype=dist.dtype) * 1e9
            nearest = off.argmin(1).tolist()
            labels = average_linkage(dist, min(params.clusters, len(names)))
            result.details["head_similarity"] = {
                "nearest": {names[i]: {"head": names[j], "js_distance": round(float(dist[i, j]), 4)} for i, j in enumerate(nearest)},
                "clusters": [[names[i] for i in range(len(names)) if labels[i] == c] for c in sorted(set(labels))],
                "inputs": len(sim_rows),
            }
            order = sorted(range(len(names)), key=lambda i: (labels[i], i))  # heads of a cluster side by side
            ordered = dist[order][:, order]
            maps.append(heatmap_spec("Jensen-Shannon distance between heads (ordered by cluster)", {
                "matrix": ordered.tolist(), "rows": [names[i] for i in order], "cols": [names[i] for i in order]}))
        if cosine is not None:
            result.add_metric("compare_cosine_mean", float(cosine.mean()), None,
                              "mean per-head cosine similarity of flattened maps to compare_model")
            maps.append(heatmap_spec("cosine similarity to compare_model", layer_head_heatmap(cosine)))
        result.details["figures"] += maps
        for name, typical in acc.typical.items():
            result.findings.append(Finding(
                title=f"typical {name} map: layer {typical['layer']} head {typical['head']}",
                input=" ".join(typical["tokens"]),
                score=round(typical["fit"], 4),
                extra={"tokens": typical["tokens"], "matrix": typical["matrix"]},
            ))
        return result


def _js_over_examples(sim_rows: list[torch.Tensor]) -> torch.Tensor:
    """Average the per-row JS distance over every query row of every kept example."""
    total, count = None, 0
    for rows in sim_rows:  # rows: T x N x T
        d = js_distance_matrix(rows) * rows.shape[0]
        total = d if total is None else total + d
        count += rows.shape[0]
    assert total is not None
    return total / count


def _map_cosine(a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-head cosine similarity of flattened maps (padding zeroed), summed over the batch: ``L x H``."""
    m = (mask.unsqueeze(1) * mask.unsqueeze(2)).to(a.dtype).view(mask.shape[0], 1, 1, mask.shape[1], mask.shape[1])
    fa, fb = (a * m).flatten(3), (b * m).flatten(3)
    return torch.nn.functional.cosine_similarity(fa, fb, dim=-1).sum(0)


@hookimpl
def bertprobe_register_probes(registry: Any) -> None:
    registry.add(AttentionAuditProbe)
