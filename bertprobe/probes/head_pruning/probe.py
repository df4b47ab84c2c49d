"""Probe ``head-pruning``: head importance, single-head and layer ablation, pruning curve.

Papers:
  * Michel, Levy, Neubig 2019, "Are Sixteen Heads Really Better than One?" (NeurIPS): importance
    I_h = E_x |dL(x)/d xi_h| of a head-mask variable xi_h, from one forward and backward pass; heads
    pruned from least to most important; up to 40% of BERT-base's heads prunable on MNLI.
  * Kovaleva, Romanov, Rogers, Rumshisky 2019, "Revealing the Dark Secrets of BERT" (EMNLP): a head
    is "disabled" by giving it uniform attention; disabling some heads improved accuracy.

Implementation and deviations:
  * transformers 5 has no ``head_mask``; masks and uniform attention are forward hooks
    (``bertprobe.model``), valid for eager and SDPA attention.
  * Importance uses a per-example mask (``B x L x H``), so |dL(x)/d xi_h| is taken per example as the
    paper's equation says; Michel's code takes the absolute value of batch-summed gradients.
  * Layer-wise normalisation of importance (``normalize``, Michel's default) divides each layer's
    scores by their L2 norm; both raw and normalised maps are reported.
  * Ablation deltas carry a paired percentile-bootstrap confidence interval over examples.
  * ``prunable_fraction`` accounts for the finite test set: the largest step of the curve such that it
    and every smaller step have a paired accuracy drop (bootstrapped over examples) not significantly
    larger than ``tolerance``; its interval starts at the largest step whose drops are significantly
    within it. The plain reading (every step's drop at most ``tolerance``) moved from 0.19 to 0.50 when
    one example of 872 changed at the baseline (fp16 against fp32); it is kept in
    ``details["prunable_fraction_plain"]``. Michel et al. read the curve by eye.
  * ``max_single_head_drop`` carries the paired bootstrap CI of that head's drop.
  * Sequential sweeps (``sequential``, on by default; not in the papers): single-head and layer ablations
    and the pruning curve's steps first run on a census, the 5% of examples (``census_share``) whose plain
    decision is closest to changing (smallest top-two logit gap), which holds most changed predictions and is
    summed exactly; then on growing blocks of the rest (256, 384, 576 ..., in an order fixed by the seed; from
    ``sequential_min``, 2,000, examples), and a unit stops once its paired
    interval lies wholly inside the tolerance band or wholly outside it (a curve step: wholly above or
    below ``-tolerance``), by a betting confidence sequence valid at every look
    (``head_pruning.sequential``, ``head_pruning.betting``);
    ambiguous units run to the end and get the exact mode's interval. Each row and curve point says how
    many examples it used and where it settled; ``prunable_fraction``'s interval is read from the steps'
    intervals; ``ablation_passes`` counts full-pass equivalents. ``sequential: false`` is the exact mode
    (every unit on every example). Metrics recomputed from sums (micro-F1, entity F1) and data of at most
    one block always run exact.
  * Readers (extractive QA), not in the papers: a question may span several windows, so the task gives the
    sweep its rows (``Task.example_rows``, ``tasks.qa_rows``; this probe's ``answers`` section): importance is
    the gradient of HF's QA loss (start and end cross-entropies) summed over a question's windows before the
    absolute value, and ablations and the curve score each question's F1 (or ``metric: em``) of the answer
    decoded over its windows; the census margin is the chosen span's confidence. ``max_examples`` samples the questions (each unit costs a pass).
    Where questions share a context (SQuAD's paragraphs: ``tasks.qa_clusters``), every interval (the
    ablations', the curve's, ``prunable_fraction``'s) resamples contexts (a cluster bootstrap), the sweeps
    run exact (sequential blocks of questions would split contexts) and the per-question outcome carries its
    context's key, so a paired gate resamples contexts too.
  * Speed, not in the papers: single-head and layer ablations are units of one ``HeadSweep``
    (resumable; an executor such as ``ray`` shards them over workers with identical numbers). The
    plain pass caches the hidden states entering every layer (``layer_cache``), and each ablation runs
    from its lowest intervened layer: on a 6-layer model the single-head sweep skips 42% of the layer
    computations. The cache holds examples x padded length x hidden x (layers - 1) values (167 MiB
    for SST-2 dev on MiniLM-L6 in fp32); over ``cache_budget_mb`` (default a quarter of free
    memory) or with shared layers (ALBERT) it is off and the summary says why.
  * Bi-encoders (sentence embeddings, ``ranks_texts``), not in the papers: a head mask changes both the queries'
    and the passages' embeddings, so each unit embeds a sample of ``retrieval_queries`` queries and a corpus subset
    (their relevant documents and ``distractors`` others) under its mask and scores each query's nDCG@10 over that
    subset (this probe's ``rankings`` section); importance differentiates a contrastive proxy, the in-batch-negatives
    cross-entropy of (query, relevant passage) pairs. nDCG@10 over a subset is not the full corpus's.

Where the code lives: ``params`` (``HeadParams``), ``evaluator`` (the batches and an intervened model's outcomes),
``sweep`` (``HeadSweep``: units a worker rebuilds; ``sweep_units``), ``curve`` (the pruning curve and
``prunable_fraction``), ``report`` (figures, key finding), ``sequential`` and ``betting`` (the sequential sweeps),
``rows`` (what the sweeps evaluate) and the sections by kind of model: ``entities`` (a tagger's word-aligned rows,
``word_tags``), ``answers`` (a reader's windows, ``span_answers``) and ``rankings`` (a bi-encoder's queries and
passages, ``ranks_texts``); the probe's own rows serve the rest.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from bertprobe.data.dataset import Dataset
from bertprobe.hookmarkers import hookimpl
from bertprobe.model.architectures import heads_per_layer
from bertprobe.model.pruning import least_important, normalize_by_layer
from bertprobe.model.target import Target
from bertprobe.model.timing import compare_speed
from bertprobe.probe import Probe, ProbeContext
from bertprobe.probes.head_pruning import answers, entities, rankings
from bertprobe.probes.head_pruning.curve import (
    prunable_fraction,
    prunable_fraction_interval,
    prunable_from_intervals,
    pruning_curve,
)
from bertprobe.probes.head_pruning.evaluator import Evaluator
from bertprobe.probes.head_pruning.params import HeadParams
from bertprobe.probes.head_pruning.report import head_figures, pruning_finding
from bertprobe.probes.head_pruning.rows import portable
from bertprobe.probes.head_pruning.sweep import HeadSweep, sampled, sweep_units, why_exact
from bertprobe.results import Finding, ProbeResult
from bertprobe.results.figures import heatmap_spec, layer_head_heatmap
from bertprobe.results.outcomes import Outcomes, example_ids
from bertprobe.stats import gini
from bertprobe.tasks.qa_clusters import cluster_keys


class HeadPruningProbe(Probe):
    """Head importance map, single-head and layer ablations, pruning curve (Michel 2019; Kovaleva 2019).

    Metrics: ``importance_gini``, ``max_single_head_drop``, ``heads_improving_when_removed``,
    ``layer_max_drop``, ``prunable_fraction``, ``speedup`` (with ``physical: true``), ``baseline``.

    Its section for a kind of model holds ``sweep_rows(target, data, metric, subset) -> rows.SweepRows``: what the
    sweeps evaluate (built in: ``entities`` for ``word_tags``, ``answers`` for ``span_answers``, ``rankings`` for
    ``ranks_texts``; none: one
    ``target.encode`` row per example, ``rows.class_rows``).
    """

    name = "head-pruning"
    description = "Head importance (Michel 2019), head/layer ablation (Kovaleva 2019) and pruning curve"
    requires = frozenset({"predictions", "heads", "data:labels"})
    tasks = frozenset({"classification", "multiple-choice", "multi-label", "token-classification", "question-answering",
                       "sentence-embedding"})
    metrics = {
        "importance_gini": "concentration of raw importance over heads (0 even, 1 one head)",
        "max_single_head_drop": "largest accuracy drop from removing one head (CI: paired bootstrap of that head's drop)",
        "heads_improving_when_removed": "heads whose removal raises accuracy",
        "layer_max_drop": "largest accuracy drop from removing one layer's heads (CI: paired bootstrap)",
        "prunable_fraction": "largest share of heads pruned whose paired accuracy drop is not significantly above tolerance",
        "speedup": "relative examples/s gain with physical_fraction of the heads removed (median of interleaved repeats)",
        "speedup_latency": "relative examples/s gain at batch 1 (latency)",
        "baseline": "accuracy of the unmodified model",
        "importance_cost_passes": "importance wall time in units of one plain evaluation pass",
        "ablation_passes": "single-head and layer ablations and pruning-curve steps in full-pass equivalents (sequential sweeps stop decided units early)",
        "ablation_passes_saved": "share of one full pass per unit the sequential sweep did not need",
    }
    Params = HeadParams
    key_metrics = ("max_single_head_drop", "layer_max_drop", "prunable_fraction")  # descriptive: no default bound
    paper = "Michel, Levy, Neubig 2019. Are Sixteen Heads Really Better than One? (NeurIPS); Kovaleva, Romanov, Rogers, Rumshisky 2019. Revealing the Dark Secrets of BERT (EMNLP)"
    metric_directions = {"baseline": True, "importance_gini": None, "importance_cost_passes": False, "layer_max_drop": False, "prunable_fraction": True, "max_single_head_drop": False, "heads_improving_when_removed": None, "speedup": True, "speedup_latency": True, "ablation_passes": False, "ablation_passes_saved": None}

    def run(self, target: Target, data: Dataset | None, params: HeadParams, ctx: ProbeContext) -> ProbeResult:
        assert data is not None
        # retrieval data: a sample of the queries against their relevant documents and sampled distractors
        # (every unit re-embeds both: ``rankings``)
        ranked = data.corpus is not None
        most = params.max_examples if params.max_examples is not None or not ranked else params.retrieval_queries
        distractors = params.distractors if ranked else None
        data = sampled(data, most, ctx.seed, distractors)
        section = ctx.section(self.name, target.task)  # a tagger's, a reader's or a bi-encoder's rows; None: the probe's own
        sweep = HeadSweep(params.batch_size, params.stack_budget, params.layer_cache, params.cache_budget_mb,
                          params.metric, max_examples=most, sample_seed=ctx.seed, section=portable(section),
                          distractors=distractors)
        ev = sweep.evaluator(target, data)  # its layer cache is filled by the plain pass below
        sweep.bind(target, data, state=ev)
        layers, heads = ev.shape
        result = ProbeResult(probe=self.name)
        t0 = time.perf_counter()
        base_correct = ev.correct()
        eval_seconds = time.perf_counter() - t0
        base = ev.score.value(base_correct)
        exact = base_correct if base_correct.ndim == 1 else base_correct[:, 1:].sum(axis=1) == 0  # no fp, no fn
        outcome = ev.score.name if ev.score.graded else "correct"  # a reader: each question's F1 (a score)
        result.outcomes.append(Outcomes.from_values(outcome, example_ids(ev.examples), exact.tolist(),
                                                    "score" if ev.score.graded else "binary", cluster_keys(ev.groups)))
        if ev.dropped:
            result.details.setdefault("warnings", []).append(
                f"{ev.dropped} sentences longer than max_length are left out of the head sweeps")
        result.add_metric("baseline", base, True, f"{ev.score.name} of the unmodified model",
                          outcome=outcome if ev.score.decomposable else None)
        result.details["metric"] = ev.score.name
        if ev.rows.notes:
            result.details.setdefault("warnings", []).extend(ev.rows.notes)

        t0 = time.perf_counter()
        raw = ev.importance()
        importance_seconds = time.perf_counter() - t0
        norm = normalize_by_layer(raw)
        ranking = norm if params.normalize else raw
        result.add_metric("importance_gini", gini(raw.flatten().numpy()), None,
                          "concentration of raw importance over heads (0 even, 1 one head)")
        result.add_metric("importance_cost_passes", importance_seconds / max(eval_seconds, 1e-9), False,
                          "importance wall time in units of one plain evaluation pass", kind="cost")
        result.details["importance"] = raw.tolist()
        result.details["importance_normalized"] = norm.tolist()
        maps = [heatmap_spec("head importance (raw)", layer_head_heatmap(raw)),
                heatmap_spec("head importance (normalised per layer)", layer_head_heatmap(norm))]

        if params.ablation:
            deltas = self._ablate(result, ev, sweep, data, base_correct, params, ctx)
            maps.append(heatmap_spec("accuracy change when the head is removed", layer_head_heatmap(deltas)))
        if params.layers:
            units = [(f"layer{layer}", ("mask", [(layer, h) for h in range(heads) if ev.real[layer, h]]))
                     for layer in range(layers)]
            rows = []
            for layer, row in enumerate(sweep_units(units, ev, sweep, data, base_correct, params, ctx,
                                                          "layer ablation", [10_000 + layer for layer in range(layers)])):
                rows.append({"layer": layer, "drop": -row["delta"], "ci": (-row["ci"][1], -row["ci"][0]) if row["ci"] else None,
                             **{k: row[k] for k in ("examples", "settled") if k in row}})
            result.details["layer_ablation"] = rows
            worst_layer = max(rows, key=lambda r: r["drop"])
            result.add_metric("layer_max_drop", worst_layer["drop"], False,
                              "largest accuracy drop from removing one layer's heads (CI: paired bootstrap of that "
                              "layer's drop)", ci=worst_layer["ci"], kind="extreme")
        if params.pruning:
            curve = pruning_curve(ev, ranking, params, base, ctx, sweep, data, base_correct)
            result.details["pruning_curve"] = [{k: v for k, v in p.items() if k not in ("pruned", "correct")}
                                               for p in curve]
            if any("settled" in p for p in curve):  # sequential: each step's own interval
                value, low, high = prunable_from_intervals(curve[1:], params.tolerance)
            else:
                steps = [p for p in curve if "correct" in p]
                value, low, high = prunable_fraction_interval(
                    base_correct, [p["correct"] for p in steps], [p["fraction"] for p in steps], params.tolerance,
                    params.confidence, max(params.bootstrap, 200), ctx.seed, ev.score, ev.groups)
            result.add_metric("prunable_fraction", value, True,
                              f"largest share of heads pruned whose paired accuracy drop is not significantly larger "
                              f"than {params.tolerance:g} (one-sided {params.confidence:.0%} bootstrap); the interval "
                              "runs from the share significantly within it", ci=(low, high))
            result.details["prunable_fraction_plain"] = prunable_fraction(curve, base, params.tolerance)
            if params.physical:
                self._physical(result, target, ev, curve, params, ranking)
        if ev.sweep_units:
            used, exact = ev.sweep_passes, ev.sweep_units
            result.add_metric("ablation_passes", used, False, "single-head and layer ablations and pruning-curve steps in "
                              "full-pass equivalents "
                              "(examples evaluated / examples)", kind="cost")
            result.add_metric("ablation_passes_saved", 1 - used / exact, None, "share of the exact sweep's passes (one "
                              "full pass per unit) the sequential sweep did not need", kind="cost")
            census = f"; a census of the {ev.census:,} closest decisions first" if ev.census else ""
            how = why_exact(ev, params, base_correct) or f"{1 - used / exact:.0%} saved{census}"
            result.details["summary"] = {**result.details.get("summary", {}),
                                         "ablation passes": f"{used:.1f} full-pass equivalents for {exact} units ({how})"}
        result.details["figures"] = maps + head_figures(result, params.tolerance)
        result.details["evaluations"] = ev.passes
        top = raw.flatten().argsort(descending=True)[:3].tolist()
        result.details["summary"] = {
            **result.details.get("summary", {}),
            "most important heads": ", ".join(f"L{f // heads}H{f % heads}" for f in top),
            "evaluations": f"{ev.passes:.4g} passes over {len(ev.examples)} examples"
                           + (f" ({len(ev.labels)} windows)" if ev.rows.owner is not None else ""),
            "layer cache": ev.cache_note,
        }
        result.details["key_finding"] = pruning_finding(result, params.tolerance)
        return result

    def _ablate(self, result: ProbeResult, ev: Evaluator, sweep: HeadSweep, data: Dataset, base_correct: np.ndarray,
                params: HeadParams, ctx: ProbeContext) -> torch.Tensor:
        """Each head removed alone: the ablation table, its metrics and findings; returns the accuracy changes."""
        layers, heads = ev.shape
        table = []
        deltas = torch.zeros(layers, heads)
        pairs = [(layer, head) for layer in range(layers) for head in range(heads) if ev.real[layer, head]]
        # each head is a work unit (a resumed run continues the sweep where it stopped; an executor may
        # shard them); groups of units share forward passes, stacked along the batch where the device pays
        units = [(f"L{layer}H{head}", (params.mode, [(layer, head)])) for layer, head in pairs]
        rows = sweep_units(units, ev, sweep, data, base_correct, params, ctx, f"head ablation ({params.mode})",
                                 [layer * heads + head for layer, head in pairs])
        for (layer, head), row in zip(pairs, rows):
            deltas[layer, head] = row["delta"]
            table.append({"layer": layer, "head": head, **row})
        result.details["ablation"] = table
        worst = min(table, key=lambda r: r["delta"]) if table else None
        drop_ci = (-worst["ci"][1], -worst["ci"][0]) if worst and worst["ci"] else None
        result.add_metric("max_single_head_drop", float(-deltas.min()) + 0.0, False,
                          "largest accuracy drop from removing one head (CI: paired bootstrap of that head's drop)",
                          ci=drop_ci, kind="extreme")
        result.add_metric("heads_improving_when_removed", float((deltas > 0).sum()), None,
                          "heads whose removal raises accuracy", kind="count")
        hurt = [r for r in sorted(table, key=lambda r: r["delta"]) if r["delta"] < 0][: params.findings]
        helps = [r for r in sorted(table, key=lambda r: -r["delta"]) if r["delta"] > 0][: params.findings]
        for row, title in [(r, "removal hurts") for r in hurt] + [(r, "removal helps") for r in helps]:
            ci = f" (CI {row['ci'][0]:+.4f}..{row['ci'][1]:+.4f})" if row["ci"] else ""
            if row["examples"] < len(base_correct):  # a sequential unit stopped once decided
                ci += f" on {row['examples']} of {len(base_correct)} examples ({row['settled']})"
            result.findings.append(Finding(
                title=f"layer {row['layer']} head {row['head']}: {title}",
                observed=f"accuracy change {row['delta']:+.4f}{ci}",
                score=row["delta"],
            ))
        return deltas

    def _physical(self, result: ProbeResult, target: Target, ev: Evaluator, curve: list[dict[str, Any]],
                  params: HeadParams, ranking: torch.Tensor) -> None:
        from bertprobe.model.pruning import count_parameters, prune_heads

        started = time.perf_counter()
        layers, heads = ev.shape
        drop = least_important(ranking, params.physical_fraction, heads_per_layer(ev.sites))
        n = len(drop)
        try:
            pruned, notes = prune_heads(target.model, drop)
        except ValueError as exc:
            result.details["physical"] = {"skipped": str(exc)}
            return
        # throughput: large batches; latency: one example per pass. Interleaved, repeated, bounded in time.
        batches = [b for _, b in target.batches(ev.encoded, params.speed_batch_size)]
        throughput = compare_speed(target.model, pruned, batches, target.device, params.speed_seconds * 0.7)
        singles = [target.collate([ev.encoded.rows[i]]) for i in range(min(64, len(ev.encoded)))]
        latency = compare_speed(target.model, pruned, singles, target.device, params.speed_seconds * 0.3)
        before, after = throughput["per_s_before"], throughput["per_s_after"]
        mask = torch.ones(layers, heads)
        for layer, head in drop:
            mask[layer, head] = 0
        masked_accuracy = ev.score.value(ev.correct(mask=mask))
        pruned_correct = ev.outcomes_of(pruned)
        result.add_metric("speedup", throughput["speedup"], True,
                          f"relative examples/s gain at batch {params.speed_batch_size} with {params.physical_fraction:.0%} "
                          "of heads physically pruned (median of interleaved repeats; CI: their range)",
                          kind="cost", ci=throughput["spread"])
        result.add_metric("speedup_latency", latency["speedup"], True,
                          "relative gain in examples/s at batch 1 (latency), median of interleaved repeats",
                          kind="cost", ci=latency["spread"])
        result.details.setdefault("summary", {})["physical pruning"] = (
            f"{n} heads: throughput {throughput['speedup']:+.1%} (range {throughput['spread'][0]:+.1%}.."
            f"{throughput['spread'][1]:+.1%}), latency {latency['speedup']:+.1%}")
        result.details["physical"] = {
            "heads_pruned": n, "examples_per_s_before": before, "examples_per_s_after": after,
            "throughput": throughput, "latency": latency,
            "parameters_before": count_parameters(target.model), "parameters_after": count_parameters(pruned),
            "accuracy_masked": masked_accuracy, "accuracy_pruned": ev.score.value(pruned_correct),
            "notes": notes, "seconds": time.perf_counter() - started,
        }


@hookimpl
def bertprobe_register_probes(registry: Any) -> None:
    registry.add(HeadPruningProbe)


@hookimpl
def bertprobe_register_sections(registry: Any) -> None:
    registry.add("head-pruning", entities, when="word_tags")
    registry.add("head-pruning", answers, when="span_answers")
    registry.add("head-pruning", rankings, when="ranks_texts")
