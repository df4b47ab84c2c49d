"""Probe ``syntax-heads``: which attention heads track dependency syntax, and what role each head plays.

Papers:
  * Clark, Khandelwal, Levy, Manning 2019, "What Does BERT Look At? An Analysis of BERT's Attention"
    (BlackboxNLP): per dependency relation, the single head whose most-attended word is the gold
    head (or dependent) most often, against the best fixed-offset baseline; and an attention-only
    probe, p(head = i | j) proportional to exp(sum_k w_k a^k_ji + u_k a^k_ij), scored as UAS.
  * Voita, Talbot, Moiseev, Sennrich, Titov 2019, "Analyzing Multi-Head Self-Attention: Specialized
    Heads Do the Heavy Lifting, the Rest Can Be Pruned" (ACL): positional, syntactic and rare-word heads.

Where we deviate:
  * Universal Dependencies (English EWT) instead of the Penn Treebank converted to Stanford
    Dependencies, which is not freely available. Relations map as: ``dobj`` -> ``obj``, ``nsubj`` ->
    ``nsubj`` (with ``nsubj:pass`` folded in unless ``subtypes: true``), ``det`` -> ``det``; Clark's
    ``prep``/``pobj`` become UD's ``case`` (a preposition attached to its noun) and ``obl``/``nmod``
    (the noun attached to the verb or noun). UD attaches content words to content words, so
    ``case`` points from the preposition to the noun, the reverse of Stanford's ``pobj``.
  * Sentences stream in length-sorted batches of at most ``batch_size`` sentences and ``cells``
    attention cells (sentences x tokens^2), all heads at once: no per-sentence or per-head Python
    loop, and memory bounded by the batch, not the treebank (plus at most ``parser_sentences``
    word-level maps kept in float16 for the parser).
  * Words are the treebank's syntactic words: multiword tokens ("don't") are skipped in favour of
    their parts, empty nodes dropped; sentences are the words joined by spaces. Sentences that do not
    fit ``max_length`` tokens are skipped (counted in ``sentences_skipped``).
  * Word-level maps follow Clark: attention to a split word is summed over its tokens, from a split
    word averaged over its tokens; special tokens are removed and rows renormalised. The most-attended
    word may be the word itself (Clark did not exclude it either).
  * The probe has no GloVe features (Clark: 61 UAS without, 77 with) and no bias, and is trained with
    Adam on at most ``parser_sentences`` sentences of the training file (memory stays bounded).
  * Positional and rare-word roles are measured on tokens (special tokens removed), as Voita did on
    subwords; the rare-word role uses token frequencies counted over the data, and a head's
    "maximum attention" in a sentence is the key with most attention summed over the sentence's
    queries. Voita identified roles on an NMT encoder with relevance (LRP); we apply the same
    definitions to every head without relevance. Thresholds are params.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from bertprobe.data.dataset import Dataset, DataSpec, Example
from bertprobe.data.treebank import read_conllu
from bertprobe.errors import ProbeError
from bertprobe.hookmarkers import hookimpl
from bertprobe.model.target import Target
from bertprobe.probe import Probe, ProbeContext
from bertprobe.probes.syntax_heads.parser import AttentionParser, pad_batch, right_branching
from bertprobe.probes.syntax_heads.relations import (
    Baselines,
    HeadStatistics,
    RoleParams,
    head_roles,
    offset_baselines,
    relation_of,
)
from bertprobe.probes.syntax_heads.wordlevel import word_attention
from bertprobe.results import Finding, ProbeResult


@dataclass(frozen=True)
class SyntaxParams:
    eval_data: str | None = None  # treebank the heads are scored on (default: every other sentence of the data)
    min_count: int = 100  # dependents a relation needs to be reported
    subtypes: bool = False  # keep UD subtypes apart (nsubj:pass as its own relation)
    max_offset: int = 10  # largest offset of the fixed-offset baselines
    batch_size: int = 32  # sentences per forward pass
    cells: int = 131072  # attention cells (sentences x tokens^2) per batch, bounding memory
    parser_sentences: int = 2000  # training sentences of the attention-only parser
    parser_epochs: int = 10  # training epochs of the attention-only parser
    positional: float = 0.9  # a head is positional when this share of its maximum attention is at one fixed offset (Voita)
    syntactic_margin: float = 0.1  # a head is syntactic when it beats a relation's offset baseline by this much
    rare_word: float = 0.3  # a head is rare-word when this share of its maximum attention goes to the sentence's rarest token
    compare_model: str | None = None  # another checkpoint scored the same way, for a side-by-side
    major: tuple[str, ...] = ("det", "nsubj", "obj", "case")  # relations named in the summary and findings
    findings: int = 2  # example sentences per major relation

    def __post_init__(self) -> None:
        for name in ("min_count", "batch_size", "parser_sentences", "parser_epochs", "max_offset", "cells"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        for name in ("positional", "rare_word"):
            if not 0 < getattr(self, name) <= 1:
                raise ValueError(f"{name} must lie in (0, 1]")


def layer_head(k: int, heads: int) -> str:
    """Clark's 1-based ``layer-head`` name of flattened head k."""
    return f"{k // heads + 1}-{k % heads + 1}"


@dataclass
class Prepared:
    """A batch's model inputs with the word map of every token."""

    examples: list[Example]
    batch: dict[str, torch.Tensor]
    word_index: torch.Tensor  # B x T
    n_words: torch.Tensor  # B


def prepared_batches(target: Target, examples: list[Example], batch_size: int,
                     cells: int = 131072) -> tuple[list[list[int]], list[Any], int]:
    """Length-sorted batches of sentence indices, the encoded rows, and how many sentences did not fit.

    A batch holds at most ``batch_size`` sentences and ``cells`` attention cells per head (sentences x
    tokens^2), so long sentences come in smaller batches and the peak memory of a pass stays bounded
    (``cells`` x heads x 4 bytes per attention tensor: 38 MB for 72 heads)."""
    rows = target.encode_words(examples)
    ok = [i for i, r in enumerate(rows) if r is not None]
    ok.sort(key=lambda i: len(rows[i][0]["input_ids"]))  # type: ignore[index]
    batches: list[list[int]] = []
    for i in ok:
        width = len(rows[i][0]["input_ids"])  # type: ignore[index]
        if batches and len(batches[-1]) < batch_size and (len(batches[-1]) + 1) * width * width <= cells:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches, rows, len(rows) - len(ok)


def prepare(target: Target, examples: list[Example], rows: list[Any], chunk: list[int]) -> Prepared:
    batch = target.collate([rows[i][0] for i in chunk])
    width = batch["input_ids"].shape[1]
    word_index = torch.full((len(chunk), width), -1, dtype=torch.long)
    for b, i in enumerate(chunk):
        words = rows[i][1]
        word_index[b, : len(words)] = torch.tensor(words)
    n_words = torch.tensor([len(examples[i].words or ()) for i in chunk])
    return Prepared([examples[i] for i in chunk], batch, word_index, n_words)


def word_maps(target: Target, prep: Prepared) -> tuple[torch.Tensor, torch.Tensor]:
    """(token maps ``B x K x T x T``, word maps ``B x K x N x N``) of one batch, on the CPU in float32."""
    with target.eager_attention(), torch.inference_mode():  # SDPA returns no attention weights
        att = torch.stack(target.forward(prep.batch, output_attentions=True).attentions, dim=1).float()
    b, layers, heads, t, _ = att.shape
    att = att.reshape(b, layers * heads, t, t).cpu()
    return att, word_attention(att, prep.word_index, int(prep.n_words.max()))


class SyntaxAnalysis:
    """One model's pass over the treebank: relation statistics, roles, the parser and findings."""

    def __init__(self, target: Target, params: SyntaxParams, progress: Any) -> None:
        self.target, self.params, self.progress = target, params, progress

    def run(self, train: list[Example], evaluate: list[Example]) -> dict[str, Any]:
        p = self.params
        began = time.perf_counter()
        trees = [(ex.layers["head"], ex.layers["deprel"]) for ex in train]
        base = offset_baselines(trees, p.subtypes, p.max_offset)
        relations = sorted((r for r, c in base.counts.items() if c >= p.min_count), key=lambda r: -base.counts[r])
        if not relations:
            raise ProbeError(f"no relation has {p.min_count} dependents in the data; lower min_count")
        batches, rows, skipped = prepared_batches(self.target, train, p.batch_size, p.cells)
        freq: dict[int, int] = {}
        for row in rows:
            if row is not None:
                for tok, w in zip(row[0]["input_ids"], row[1]):
                    if w >= 0:
                        freq[tok] = freq.get(tok, 0) + 1
        grid = self.target.attention_sites()
        layers, heads = len(grid), grid[0].num_heads
        stats = HeadStatistics(relations, layers * heads)
        reservoir: list[tuple[torch.Tensor, tuple[int, ...]]] = []
        pool: list[tuple[Example, torch.Tensor]] = []
        for chunk in self.progress(batches, total=len(batches), desc="syntax heads"):
            prep = prepare(self.target, train, rows, chunk)
            att, words = word_maps(self.target, prep)
            n = words.shape[-1]
            gold = torch.full((len(chunk), n), -1, dtype=torch.long)
            rels = torch.full((len(chunk), n), -1, dtype=torch.long)
            for b, ex in enumerate(prep.examples):
                for j, (h, rel) in enumerate(zip(ex.layers["head"], ex.layers["deprel"])):
                    if h:
                        gold[b, j] = h - 1
                        rels[b, j] = stats.index.get(relation_of(rel, p.subtypes), -1)
            pred = stats.add_words(words, gold, rels)
            content = prep.word_index >= 0
            stats.add_tokens(att, content, self._rarest(prep, freq))
            for b, ex in enumerate(prep.examples):
                size = int(prep.n_words[b])
                if len(reservoir) < p.parser_sentences:
                    reservoir.append((words[b, :, :size, :size].half(), ex.layers["head"]))
                if size <= 20 and len(pool) < 300:
                    pool.append((ex, pred[b, :, :size].to(torch.int16)))
        parser = AttentionParser(layers * heads)
        history = parser.fit([(m.float(), h) for m, h in reservoir], epochs=p.parser_epochs)
        uas, rb = self._evaluate(parser, evaluate)
        return {
            "baselines": base, "relations": relations, "stats": stats, "grid": (layers, heads),
            "roles": head_roles(stats, base, relations, (layers, heads),
                                RoleParams(p.positional, p.syntactic_margin, p.rare_word)),
            "uas": uas, "uas_right_branching": rb, "parser_loss": history, "parser": parser,
            "sentences": len(train) - skipped, "skipped": skipped, "pool": pool,
            "seconds": time.perf_counter() - began,
        }

    @staticmethod
    def _rarest(prep: Prepared, freq: dict[int, int]) -> torch.Tensor:
        """Position of each sentence's least frequent content token (-1 with fewer than two content tokens)."""
        out = torch.full((len(prep.examples),), -1, dtype=torch.long)
        ids = prep.batch["input_ids"].cpu()
        for b in range(len(prep.examples)):
            where = (prep.word_index[b] >= 0).nonzero().squeeze(1).tolist()
            if len(where) >= 2:
                out[b] = min(where, key=lambda t: (freq.get(int(ids[b, t]), 0), t))
        return out

    def _evaluate(self, parser: AttentionParser, examples: list[Example]) -> tuple[float, float]:
        batches, rows, _ = prepared_batches(self.target, examples, self.params.batch_size, self.params.cells)
        correct = total = rb_correct = rb_total = 0
        for chunk in self.progress(batches, total=len(batches), desc="attention-only parser"):
            prep = prepare(self.target, examples, rows, chunk)
            _, words = word_maps(self.target, prep)
            _, gold, lengths = pad_batch([(words[b, :, :n, :n], ex.layers["head"])
                                          for b, (ex, n) in enumerate(zip(prep.examples, prep.n_words.tolist()))])
            c, t = parser.correct(words, gold, lengths)
            correct, total = correct + c, total + t
            for ex in prep.examples:
                c, t = right_branching(ex.layers["head"])
                rb_correct, rb_total = rb_correct + c, rb_total + t
        if not total:
            raise ProbeError("no evaluation sentence fits the model; check eval_data")
        return correct / total, rb_correct / max(1, rb_total)


class SyntaxHeadsProbe(Probe):
    """Syntactic heads (Clark et al. 2019) and head roles (Voita et al. 2019); see the module docstring.

    Metrics: ``accuracy_<rel>`` (best head, dependent -> head) and ``baseline_<rel>`` (best fixed offset)
    for every relation with ``min_count`` dependents; ``relations_above_baseline`` (share of those whose
    best head, in either direction, beats the baseline); ``uas`` and ``uas_right_branching`` of the
    attention-only parser; ``share_positional``, ``share_syntactic``, ``share_rare_word``.
    """

    name = "syntax-heads"
    description = "Heads that track dependency relations, the attention-only parser, head roles (Clark 2019; Voita 2019)"
    requires = frozenset({"attentions", "uniform-heads", "data:words", "data:layer:head", "data:layer:deprel"})
    tasks = frozenset({"classification", "multi-label", "multiple-choice", "masked-lm", "encoder", "token-classification",
                       "question-answering", "sentence-embedding", "reranker"})
    metrics = {
        "accuracy_*": "one relation: share of dependents whose best head's most-attended word is the gold head",
        "baseline_*": "one relation: the best fixed-offset baseline's accuracy",
        "relations_above_baseline": "share of the relations whose best head beats the offset baseline",
        "uas": "unlabelled attachment score of the attention-only parser",
        "uas_right_branching": "UAS when every word's head is the next word",
        "share_positional": "share of heads with the positional role (Voita)",
        "share_syntactic": "share of heads with the syntactic role",
        "share_rare_word": "share of heads with the rare-word role",
        "sentences": "sentences analysed",
        "sentences_skipped": "sentences longer than max_length tokens",
        "compare_uas": "UAS of compare_model",
        "compare_relations_above_baseline": "relations_above_baseline of compare_model",
        "analysis_seconds": "wall time of the analysis",
    }
    metric_directions = {"accuracy_*": True, "baseline_*": None, "relations_above_baseline": True, "uas": True,
                         "uas_right_branching": None, "share_*": None, "sentences": None, "sentences_skipped": None,
                         "compare_uas": None, "compare_relations_above_baseline": None, "analysis_seconds": False}
    Params = SyntaxParams
    key_metrics = ("uas", "relations_above_baseline")  # descriptive: no default bound
    path_params = ("eval_data",)
    paper = ("Clark, Khandelwal, Levy, Manning 2019. What Does BERT Look At? (BlackboxNLP); Voita, Talbot, "
             "Moiseev, Sennrich, Titov 2019. Specialized Heads Do the Heavy Lifting, the Rest Can Be Pruned (ACL)")

    def run(self, target: Target, data: Dataset | None, params: SyntaxParams, ctx: ProbeContext) -> ProbeResult:
        assert data is not None
        train, evaluate = self._split(data, params, ctx)
        mine = SyntaxAnalysis(target, params, ctx.progress).run(train, evaluate)
        result = ProbeResult(probe=self.name)
        above = self._add_relation_metrics(result, mine)
        result.add_metric("relations_above_baseline", above, True,
                          f"share of the {len(mine['relations'])} relations whose best head beats the offset baseline")
        result.add_metric("uas", mine["uas"], True, "attention-only parser, unlabelled attachment score")
        result.add_metric("uas_right_branching", mine["uas_right_branching"], None, "every word's head is the next word")
        roles = mine["roles"]
        for role in ("positional", "syntactic", "rare_word"):
            result.add_metric(f"share_{role}", float(roles[role].float().mean()), None, f"share of heads with the {role} role")
        result.add_metric("sentences", float(mine["sentences"]), kind="count")
        result.add_metric("sentences_skipped", float(mine["skipped"]), None, "sentences longer than max_length tokens", kind="count")
        result.add_metric("analysis_seconds", mine["seconds"], False, kind="cost")
        table = self._relation_table(mine)
        result.details.update({
            "relations": table,
            "roles": {k: roles[k].int().tolist() for k in ("positional", "syntactic", "rare_word")},
            "syntactic_heads": {layer_head(k, mine["grid"][1]): v for k, v in roles["syntactic_relations"].items()},
            "parser": {"epochs": len(mine["parser_loss"]), "final_loss": mine["parser_loss"][-1],
                       "top_heads": self._top_parser_heads(mine)},
            "train_sentences": len(train), "eval_sentences": len(evaluate),
            "summary": self._summary(mine, table),
            "key_finding": self._key_finding(mine, table),
        })
        figures = self._figures(mine, table)
        if params.compare_model:
            other = self._compare(result, ctx, target, params, train, evaluate, mine)
            figures.append(other)
        result.details["figures"] = figures
        self._findings(result, mine, params)
        return result

    @staticmethod
    def _split(data: Dataset, params: SyntaxParams, ctx: ProbeContext) -> tuple[list[Example], list[Example]]:
        """Training sentences (the suite's data) and the evaluation file's, or every other sentence."""
        if params.eval_data:
            if ctx.load_data is None:
                other = read_conllu(Path(params.eval_data))
            else:
                other = ctx.load_data(DataSpec(path=params.eval_data))
            if not all(ex.words and "head" in ex.layers for ex in other.examples):
                raise ProbeError(f"eval_data '{params.eval_data}' has no dependency annotation; give a .conllu file")
            return data.examples, other.examples
        return data.examples[::2], data.examples[1::2]

    @staticmethod
    def _best(mine: dict[str, Any], rel: str, direction: str) -> tuple[int, float]:
        acc = mine["stats"].accuracy(direction)[mine["stats"].index[rel]]
        k = int(acc.argmax())
        return k, float(acc[k])

    def _add_relation_metrics(self, result: ProbeResult, mine: dict[str, Any]) -> float:
        base: Baselines = mine["baselines"]
        above = 0
        for rel in mine["relations"]:
            k, acc = self._best(mine, rel, "dep_to_head")
            _, back = self._best(mine, rel, "head_to_dep")
            heads = mine["grid"][1]
            result.add_metric(f"accuracy_{rel}", acc, True, f"best head {layer_head(k, heads)}: dependent -> head ({base.counts[rel]} dependents)")
            result.add_metric(f"baseline_{rel}", base.accuracy[rel], None, f"fixed offset {base.offset[rel]:+d}")
            above += max(acc, back) > base.accuracy[rel]
        return above / len(mine["relations"])

    def _relation_table(self, mine: dict[str, Any]) -> list[dict[str, Any]]:
        base: Baselines = mine["baselines"]
        heads = mine["grid"][1]
        rows = []
        for rel in mine["relations"]:
            k1, a1 = self._best(mine, rel, "dep_to_head")
            k2, a2 = self._best(mine, rel, "head_to_dep")
            rows.append({"relation": rel, "count": base.counts[rel],
                         "dep_to_head_head": layer_head(k1, heads), "dep_to_head": round(a1, 4),
                         "head_to_dep_head": layer_head(k2, heads), "head_to_dep": round(a2, 4),
                         "baseline": round(base.accuracy[rel], 4), "offset": base.offset[rel]})
        return rows

    @staticmethod
    def _top_parser_heads(mine: dict[str, Any]) -> list[str]:
        parser: AttentionParser = mine["parser"]
        weight = parser.w.abs() + parser.u.abs()
        return [layer_head(int(k), mine["grid"][1]) for k in weight.argsort(descending=True)[:5]]

    @staticmethod
    def _summary(mine: dict[str, Any], table: list[dict[str, Any]]) -> dict[str, str]:
        best = sorted(table, key=lambda r: -(max(r["dep_to_head"], r["head_to_dep"]) - r["baseline"]))[:4]
        return {
            "strongest relations": "; ".join(
                f"{r['relation']} {max(r['dep_to_head'], r['head_to_dep']):.1%} at head "
                f"{r['dep_to_head_head'] if r['dep_to_head'] >= r['head_to_dep'] else r['head_to_dep_head']} "
                f"(offset baseline {r['baseline']:.1%})" for r in best),
            "attention-only parser": f"UAS {mine['uas']:.1%} (right-branching {mine['uas_right_branching']:.1%})",
            "roles": ", ".join(f"{int(mine['roles'][k].sum())} {k.replace('_', '-')}" for k in ("positional", "syntactic", "rare_word"))
                     + f" of {mine['grid'][0] * mine['grid'][1]} heads",
        }

    @staticmethod
    def _key_finding(mine: dict[str, Any], table: list[dict[str, Any]]) -> str:
        """'20 of 24 relations have a head beating the best fixed offset (strongest: obj 73.9% at head 3-1 =
        L2H0, offset 35.8%); attention-only parser UAS 53.1%'."""
        def best(r: dict[str, Any]) -> float:
            return max(r["dep_to_head"], r["head_to_dep"])

        above = sum(best(r) > r["baseline"] for r in table)
        text = f"{above} of {len(table)} relations have a head beating the best fixed offset"
        if table:
            top = max(table, key=lambda r: best(r) - r["baseline"])
            head = top["dep_to_head_head"] if top["dep_to_head"] >= top["head_to_dep"] else top["head_to_dep_head"]
            layer, index = (int(x) - 1 for x in head.split("-"))  # Clark's 1-based name, then the other probes' L0H0
            text += (f" (strongest: {top['relation']} {best(top):.1%} at head {head} = L{layer}H{index}, "
                     f"offset {top['baseline']:.1%})")
        return text + f"; attention-only parser UAS {mine['uas']:.1%}"

    @staticmethod
    def _figures(mine: dict[str, Any], table: list[dict[str, Any]]) -> list[dict[str, Any]]:
        layers, heads = mine["grid"]
        roles = mine["roles"]
        code = roles["positional"].int() + 2 * roles["syntactic"].int() + 4 * roles["rare_word"].int()
        return [
            {"kind": "bars", "title": "best single head per relation against the best fixed offset",
             "data": {"labels": [r["relation"] for r in table],
                      "series": [{"name": "dependent -> head", "values": [r["dep_to_head"] for r in table]},
                                 {"name": "head -> dependent", "values": [r["head_to_dep"] for r in table]},
                                 {"name": "offset baseline", "values": [r["baseline"] for r in table]}]},
             "axes": {"y": "accuracy"}},
            {"kind": "heatmap", "title": "head roles: 1 positional, 2 syntactic, 4 rare-word (summed when several)",
             "data": {"matrix": code.tolist(), "rows": [f"layer {i + 1}" for i in range(layers)],
                      "cols": [str(j + 1) for j in range(heads)]}},
            {"kind": "heatmap", "title": "share of queries whose most-attended token is a fixed neighbour (positional role)",
             "data": {"matrix": roles["positional_share"].tolist(), "rows": [f"layer {i + 1}" for i in range(layers)],
                      "cols": [str(j + 1) for j in range(heads)]}},
        ]

    def _compare(self, result: ProbeResult, ctx: ProbeContext, target: Target, params: SyntaxParams,
                 train: list[Example], evaluate: list[Example], mine: dict[str, Any]) -> dict[str, Any]:
        """The same analysis on ``compare_model``; each relation's change (this model minus the other)."""
        if ctx.load_target is None:
            raise ProbeError("compare_model needs the harness to load a second model")
        other_target = ctx.load_target(ctx.resolve_model(params.compare_model, target.spec))
        if "uniform-heads" not in other_target.capabilities:
            raise ProbeError(f"compare_model {params.compare_model}: its layers have unequal head counts")
        other = SyntaxAnalysis(other_target, params, ctx.progress).run(train, evaluate)
        rows = []
        for rel in mine["relations"]:
            if rel not in other["stats"].index:
                continue
            _, here = self._best(mine, rel, "dep_to_head")
            k, there = self._best(other, rel, "dep_to_head")
            rows.append({"relation": rel, "this_model": round(here, 4), "compare_model": round(there, 4),
                         "compare_head": layer_head(k, other["grid"][1]), "change": round(here - there, 4)})
        result.add_metric("compare_uas", other["uas"], None, f"UAS of {params.compare_model}")
        above = sum(max(self._best(other, r, "dep_to_head")[1], self._best(other, r, "head_to_dep")[1]) > other["baselines"].accuracy[r]
                    for r in other["relations"]) / max(1, len(other["relations"]))
        result.add_metric("compare_relations_above_baseline", above, None, f"relations_above_baseline of {params.compare_model}")
        result.details["compare"] = {"model": params.compare_model, "relations": rows, "uas": other["uas"]}
        return {"kind": "bars", "title": f"change of the best head's accuracy per relation (this model minus {params.compare_model})",
                "data": {"labels": [r["relation"] for r in rows], "series": [{"name": "change", "values": [r["change"] for r in rows]}]},
                "axes": {"y": "accuracy change"}}

    def _findings(self, result: ProbeResult, mine: dict[str, Any], params: SyntaxParams) -> None:
        """Sentences where the best head of a major relation finds the gold head word, and where it misses."""
        heads = mine["grid"][1]
        for rel in params.major:
            if rel not in mine["stats"].index:
                continue
            k, _ = self._best(mine, rel, "dep_to_head")
            hits: list[Finding] = []
            misses: list[Finding] = []
            for ex, pred in mine["pool"]:
                for j, (h, deprel) in enumerate(zip(ex.layers["head"], ex.layers["deprel"])):
                    if not h or relation_of(deprel, params.subtypes) != rel:
                        continue
                    words = ex.words or ()
                    guess = int(pred[k, j])
                    found = guess == h - 1
                    bucket = hits if found else misses
                    if len(bucket) < params.findings:
                        bucket.append(Finding(
                            title=f"{rel}: head {layer_head(k, heads)} from '{words[j]}' "
                                  f"{'finds' if found else 'misses'} its head '{words[h - 1]}'",
                            input=ex.text, expected=words[h - 1], observed=words[guess],
                            extra={"kind": "syntax", "relation": rel, "head": layer_head(k, heads),
                                   "highlight": [words[j], words[guess]]},
                        ))
                    break
                if len(hits) >= params.findings and len(misses) >= params.findings:
                    break
            result.findings.extend(hits + misses)


@hookimpl
def bertprobe_register_probes(registry: Any) -> None:
    registry.add(SyntaxHeadsProbe)
