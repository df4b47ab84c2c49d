"""The evaluator of ``head-pruning``: the rows the sweeps evaluate, batched once, and a model's per-example
outcomes with heads removed (masked, or given uniform attention), from a cached layer on where it fits."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from bertprobe.data.dataset import Dataset
from bertprobe.model.architectures import head_grid, heads_per_layer
from bertprobe.model.budgets import ACTIVATION_SHARE, free_memory
from bertprobe.model.interventions import (
    LayerCache,
    encoder_layers,
    evaluate_units,
    head_intervention,
    hidden_size,
)
from bertprobe.model.pruning import head_importance
from bertprobe.model.target import Target
from bertprobe.probes.head_pruning.rows import class_rows
from bertprobe.progress import progress
from bertprobe.stats import clustered


class Evaluator:
    """Pre-tokenised, pre-collated batches reused by every ablation; returns per-example correctness."""

    def __init__(self, target: Target, data: Dataset, batch_size: int | None, metric: str = "auto",
                 subset: Sequence[int] | None = None, section: Any = None) -> None:
        """``subset``: the examples of ``data`` evaluated (a sequential block), None for all; a task decides what
        depends on the whole data on all of it (a reader abstains only where the data hold unanswerable questions).
        ``section``: the probe's section for the model's task (``sweep_rows``: a tagger's word-aligned rows, a
        reader's windows), None for the probe's own rows (``rows.class_rows``)."""
        self.target = target
        self.sites = target.attention_sites()
        self.rows = (class_rows if section is None else section.sweep_rows)(target, data, metric, subset)
        # what a forward pass gives per row (a reader: start and end; a bi-encoder: its hidden states)
        self.logits_of = self.rows.logits_of or target.task.output_logits
        self.score = self.rows.score
        self.encoded = self.rows.encoded
        self.labels = self.rows.labels  # per row
        self.dropped = self.rows.dropped  # a tagger's sentences cut by max_length: not scored here
        self.examples = self.rows.examples
        # a reader's questions come several per context, no independent evidence: the intervals resample contexts
        clusters = target.task.example_clusters(self.examples)
        self.groups = clusters if clustered(clusters) else None
        self.batches = list(target.batches(self.encoded, batch_size))
        self.passes = 0
        self.sweep_passes = 0.0  # the ablation sweeps' unit evaluations, in full-pass equivalents ...
        self.sweep_units = 0  # ... against one full pass per unit
        self.budget: int | None = None  # stacking budget (None: the device's default, see interventions.stack_size)
        self.cache: LayerCache | None = None
        self.cache_note = "off"
        self.margins: np.ndarray | None = None  # the plain pass's per-example margins (``OutcomeScore.margin``)
        self.census = 0  # examples the sequential sweeps evaluated in full first (``sequential.census_first``)

    def enable_cache(self, budget_mb: float | None) -> None:
        """Cache the layer inputs of the next plain pass (``correct()``), if they fit the budget."""
        layers = encoder_layers(self.target.model, self.sites)
        if layers is None:
            self.cache_note = "off: the encoder's layers are shared or not a plain list"
            return
        param = next(self.target.model.parameters())
        need = LayerCache.estimate(self.batches, hidden_size(self.target.model), len(layers), param.element_size())
        budget = free_memory(param.device) // ACTIVATION_SHARE if budget_mb is None else int(budget_mb * 2**20)
        if need > budget:
            self.cache_note = f"off: it would hold {need / 2**20:.0f} MiB, over the budget of {budget / 2**20:.0f} MiB"
            return
        self.cache = LayerCache(layers)
        self.cache_note = f"{need / 2**20:.1f} MiB"

    @property
    def shape(self) -> tuple[int, int]:
        return head_grid(self.sites)

    @property
    def real(self) -> torch.Tensor:
        """``L x H`` bool: which grid cells are heads (a physically pruned layer has fewer)."""
        layers, width = self.shape
        out = torch.zeros(layers, width, dtype=torch.bool)
        for layer, n in enumerate(heads_per_layer(self.sites)):
            out[layer, :n] = True
        return out

    def _collect(self, raw: np.ndarray) -> np.ndarray:
        """Per-example outcomes from the rows' raw outcomes (the same array where an example is one row)."""
        return raw if self.rows.collect is None else self.rows.collect(raw)

    def correct_many(self, masks: list[torch.Tensor] | None = None, uniform: list[torch.Tensor] | None = None,
                     budget: int | None = None) -> list[np.ndarray]:
        """Correctness under each of several interventions, stacked along the batch where the device pays
        (not counted in ``passes``: a sweep's units may run in other processes; the probe counts them)."""
        cache = self.cache if self.cache is not None and self.cache.inputs else None
        if self.rows.judge is not None:
            judge = self.rows.judge
        else:
            judge = None if self.score.name == "accuracy" else self.score.outcome
        outs = evaluate_units(self.target.model, self.sites, self.batches, self.labels, masks=masks,
                              uniform=uniform, budget=budget if budget is not None else self.budget, cache=cache,
                              judge=judge, logits_of=self.logits_of)
        return [self._collect(o.numpy()) for o in outs]

    def correct(self, mask: torch.Tensor | None = None, uniform: torch.Tensor | None = None) -> np.ndarray:
        device = self.target.device
        out: torch.Tensor | None = None  # on the device until the end
        labels = self.labels.to(device)
        self.passes += 1
        plain = mask is None and uniform is None
        judge = self.rows.judge if self.rows.judge is not None else self.score.outcome
        margin = self.score.margin if plain and self.rows.margins is None else None
        margins = torch.empty(len(self.labels), device=device) if margin is not None else None
        capture = self.cache.capture() if plain and self.cache is not None and not self.cache.inputs else contextlib.nullcontext()
        with torch.inference_mode(), head_intervention(self.target.model, self.sites, mask=mask, uniform=uniform), capture:
            for idx, batch in progress(self.batches, desc="predict" if plain else "predict (intervened)"):
                where = torch.tensor(idx, device=device)
                logits = self.logits_of(self.target.forward(batch))
                outcome = judge(logits, labels[where])
                if out is None:
                    out = torch.empty((len(self.labels), *outcome.shape[1:]), dtype=outcome.dtype, device=device)
                out[where] = outcome
                if margin is not None and margins is not None:
                    margins[where] = margin(logits).to(margins.dtype)
        assert out is not None
        raw = out.cpu().numpy()
        if margins is not None:
            self.margins = margins.cpu().numpy()
        elif plain and self.rows.margins is not None:
            self.margins = self.rows.margins(raw)
        return self._collect(raw)

    def outcomes_of(self, model: Any) -> np.ndarray:
        """Per-example outcomes of another module on these batches (a physically pruned copy)."""
        parts = []
        judge = self.rows.judge if self.rows.judge is not None else self.score.outcome
        with torch.inference_mode():
            for idx, batch in self.batches:
                parts.append((idx, judge(self.logits_of(model(**batch)), self.labels[idx].to(self.target.device)).cpu().numpy()))
        raw = np.concatenate([p for _, p in parts])[np.argsort(np.concatenate([i for i, _ in parts]))]
        return self._collect(raw)

    def importance(self, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Michel's E_x |dL(x)/d xi_h| at the given mask (ones by default), one forward+backward pass (the rows' own
        where the section gives one: a bi-encoder's contrastive loss)."""
        if self.rows.importance is not None:
            return self.rows.importance(mask)
        return head_importance(self.target, self.batches, self.labels, mask,
                               owner=self.rows.owner)
