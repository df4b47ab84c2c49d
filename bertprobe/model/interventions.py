"""Head interventions through forward hooks (transformers 5 has no ``head_mask``).

* Masking multiplies each head's slice of the output projection's input by ``mask[layer, head]``.
  A mask of zeros is exactly Michel et al.'s head masking, and the gradient of the loss with respect to
  a mask of ones is their importance score.
* "Uniform" disabling (Kovaleva et al. 2019) replaces a head's context vector by the mean of its
  value vectors over the non-padding tokens, which is what uniform attention weights produce.

Both work with eager and SDPA attention, since they never touch the attention function itself.
A mask may be ``L x H`` (the same for every row) or ``B x L x H`` (one mask per batch row, so that
several ablations share one forward pass).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from bertprobe.model.architectures import AttentionSite
from bertprobe.model.budgets import hidden_width, stack_budget
from bertprobe.progress import tracking


@contextlib.contextmanager
def frozen_parameters(model: nn.Module) -> Iterator[None]:
    """Turn off gradients for every parameter (only an input's gradient is wanted), then restore them."""
    flags = [p.requires_grad for p in model.parameters()]
    for p in model.parameters():
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p, flag in zip(model.parameters(), flags):
            p.requires_grad_(flag)


class _LayerCounter:
    """Maps each call of a (possibly shared) attention block to its logical layer."""

    def __init__(self, sites: list[AttentionSite]) -> None:
        self.sites = sites
        self.calls = {id(s.out_proj): 0 for s in sites}

    def reset(self) -> None:
        for key in self.calls:
            self.calls[key] = 0

    def next_layer(self, site: AttentionSite) -> int:
        count = self.calls[id(site.out_proj)]
        self.calls[id(site.out_proj)] = count + 1
        return site.layers[count % len(site.layers)]


def _per_row(values: torch.Tensor, rows: int, layer: int, heads: int) -> torch.Tensor:
    """Select ``layer`` of an ``L x H`` or ``B x L x H`` tensor as ``rows x 1 x heads x 1`` (or ``1 x 1 x heads x 1``).

    ``H`` may exceed the layer's ``heads`` (a pruned layer in a grid sized for the widest layer).
    """
    if values.dim() == 2:
        return values[layer, :heads].reshape(1, 1, -1, 1)
    if values.shape[0] != rows:
        # Multiple-choice models flatten B x C rows: repeat each mask for its C choices.
        values = values.repeat_interleave(rows // values.shape[0], dim=0)
    return values[:, layer, :heads].reshape(rows, 1, -1, 1)


@contextlib.contextmanager
def head_intervention(
    model: nn.Module,
    sites: list[AttentionSite],
    mask: torch.Tensor | None = None,
    uniform: torch.Tensor | None = None,
) -> Iterator[None]:
    """Apply a head mask and/or uniform-attention disabling for the forward passes inside the block.

    ``mask``: float, 1 keeps a head, 0 removes it; may require grad. ``uniform``: bool, True replaces
    the head's attention by uniform weights over non-padding tokens.
    """
    counter = _LayerCounter(sites)
    state: dict[str, Any] = {"attention_mask": None, "values": {}}
    handles: list[Any] = []

    def on_model_start(_module: nn.Module, args: tuple, kwargs: dict) -> None:
        counter.reset()
        state["values"] = {}
        am = kwargs.get("attention_mask")
        state["attention_mask"] = None if am is None else am.reshape(-1, am.shape[-1])

    handles.append(model.register_forward_pre_hook(on_model_start, with_kwargs=True))

    for site in sites:
        if uniform is not None:
            if site.value_proj is None:
                raise ValueError(f"{site.name}: no separate value projection, uniform disabling unsupported")

            def on_value(module: nn.Module, args: tuple, output: torch.Tensor, site: AttentionSite = site) -> None:
                calls = state["values"].setdefault(id(site.out_proj), [])
                calls.append(output)

            handles.append(site.value_proj.register_forward_hook(on_value))

        def on_out(module: nn.Module, args: tuple, site: AttentionSite = site) -> tuple | None:
            x = args[0]
            layer = counter.next_layer(site)
            shape = x.shape
            rows = x.reshape(-1, shape[-2], shape[-1]).shape[0]
            heads = x.reshape(rows, shape[-2], site.num_heads, site.head_dim)
            if uniform is not None:
                flags = _per_row(uniform.to(x.device), rows, layer, site.num_heads).to(torch.bool)
                if bool(flags.any()):
                    values = state["values"][id(site.out_proj)].pop(0)
                    values = values.reshape(rows, shape[-2], site.num_heads, site.head_dim)
                    am = state["attention_mask"]
                    weights = (
                        torch.ones(rows, shape[-2], device=x.device, dtype=x.dtype)
                        if am is None
                        else am.to(x.dtype)
                    )
                    weights = weights / weights.sum(dim=1, keepdim=True).clamp_min(1)
                    mean = torch.einsum("rt,rthd->rhd", weights, values).unsqueeze(1)
                    heads = torch.where(flags, mean.expand_as(heads), heads)
                elif state["values"].get(id(site.out_proj)):
                    state["values"][id(site.out_proj)].pop(0)
            if mask is not None:
                heads = heads * _per_row(mask, rows, layer, site.num_heads).to(device=x.device, dtype=x.dtype)
            return (heads.reshape(shape), *args[1:])

        handles.append(site.out_proj.register_forward_pre_hook(on_out))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def encoder_layers(model: nn.Module, sites: list[AttentionSite]) -> nn.ModuleList | None:
    """The module list of encoder layers, layer i holding site i's attention, or None where layers are
    shared (ALBERT) or laid out otherwise: then no layer can be skipped."""
    if not sites or any(len(s.layers) != 1 for s in sites):
        return None
    for module in model.modules():
        if isinstance(module, nn.ModuleList) and len(module) == len(sites):
            if all(any(m is s.out_proj for m in module[s.layers[0]].modules()) for s in sites):
                return module
    return None


class _Skipped(nn.Module):
    """Stands in for a layer below the lowest intervened one: passes its input on, computing nothing
    (the input of the first computed layer is replaced by the cached one)."""

    def __init__(self, width: int | None) -> None:
        super().__init__()
        self.width = width  # None: the layer returns a tensor; n: a tuple of n

    def forward(self, hidden_states: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        if self.width is None:
            return hidden_states
        return (hidden_states,) + (None,) * (self.width - 1)


class LayerCache:
    """The hidden states entering every encoder layer, per pre-collated batch, from one plain pass.

    An intervention at layer l leaves every layer below l unchanged, so a unit whose lowest intervened
    layer is l runs from l: layers below it are skipped and layer l receives the cached input. On a
    6-layer model's single-head sweep that skips (0+1+...+5)/36 = 42% of the layer computations. It costs
    ``bytes``: examples x padded length x hidden x (layers - 1) values in the model's dtype.
    """

    def __init__(self, layers: nn.ModuleList) -> None:
        self.layers = layers
        self.inputs: list[list[torch.Tensor | None]] = []
        self.width: int | None = None
        self.bytes = 0

    @staticmethod
    def estimate(batches: list[tuple[list[int], dict[str, torch.Tensor]]], hidden: int, layers: int,
                 element_size: int) -> int:
        """Bytes the cache would hold for these batches."""
        cells = sum(b["input_ids"].numel() for _, b in batches)
        return cells * hidden * max(0, layers - 1) * element_size

    @contextlib.contextmanager
    def capture(self) -> Iterator[None]:
        """Record every layer's input (and the layers' output shape) for the forward passes inside,
        one pass per batch in order."""
        handles = []

        def on_input(index: int) -> Any:
            def hook(_module: nn.Module, args: tuple, kwargs: dict) -> None:
                hidden = args[0] if args else kwargs["hidden_states"]
                if index == 0:
                    self.inputs.append([None] * len(self.layers))
                elif self.inputs:
                    self.inputs[-1][index] = hidden.detach()
                    self.bytes += hidden.numel() * hidden.element_size()
            return hook

        def on_output(_module: nn.Module, _args: tuple, output: Any) -> None:
            self.width = len(output) if isinstance(output, (tuple, list)) else None

        for index, layer in enumerate(self.layers):
            handles.append(layer.register_forward_pre_hook(on_input(index), with_kwargs=True))
        handles.append(self.layers[0].register_forward_hook(on_output))
        try:
            yield
        finally:
            for handle in handles:
                handle.remove()

    @contextlib.contextmanager
    def start_at(self, batch: int, layer: int, repeat: int = 1) -> Iterator[None]:
        """Inside, forward passes of batch ``batch`` (repeated ``repeat`` times) compute from ``layer`` on."""
        if layer <= 0:
            yield
            return
        cached = self.inputs[batch][layer]
        assert cached is not None
        if repeat > 1:
            cached = cached.repeat(repeat, *([1] * (cached.dim() - 1)))
        originals = [self.layers[j] for j in range(layer)]

        def feed(_module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
            if args:
                return (cached, *args[1:]), kwargs
            return args, {**kwargs, "hidden_states": cached}

        handle = self.layers[layer].register_forward_pre_hook(feed, with_kwargs=True)
        for j in range(layer):
            self.layers[j] = _Skipped(self.width)
        try:
            yield
        finally:
            for j, original in enumerate(originals):
                self.layers[j] = original
            handle.remove()


def lowest_layer(unit: torch.Tensor, keep: bool) -> int:
    """The lowest layer an ``L x H`` unit intervenes in (a mask below 1, or a True uniform flag); the last
    layer when it intervenes nowhere (running the last layer alone still gives the plain output)."""
    touched = (unit < 1) if keep else unit.bool()
    rows = touched.any(dim=-1).nonzero()
    return int(rows[0]) if len(rows) else unit.shape[0] - 1


def _repeat_rows(batch: dict[str, torch.Tensor], k: int) -> dict[str, torch.Tensor]:
    """The batch repeated ``k`` times along its first dimension (examples, or examples x choices)."""
    return {key: value.repeat(k, *([1] * (value.dim() - 1))) for key, value in batch.items()}


def hidden_size(model: nn.Module) -> int:
    """The model's hidden width from its config (``budgets.hidden_width``)."""
    return hidden_width(getattr(model, "config", None))


def stack_size(rows: int, length: int, hidden: int, layers: int, device: torch.device, units: int,
               budget: int | None = None, element_size: int = 4) -> int:
    """How many intervention units to stack into one forward pass of a ``rows x length`` batch.

    The budget bounds the activations one pass holds (stacked rows x length x hidden x layers elements).
    Its default (``budgets.stack_budget``) is sized to the device: 0 on a CPU, so one unit at a time (a
    CPU is compute-bound at ordinary batch sizes and a bigger pass only adds memory traffic); on a GPU,
    where a pass is launch-bound and stacking pays, a quarter of the free memory, at most 2^31 elements.
    A unit that would not fit alone still runs, one at a time.
    """
    if budget is None:
        budget = stack_budget(device, element_size)
    per_unit = max(1, rows * length * hidden * layers)
    return max(1, min(units, budget // per_unit))


def evaluate_units(
    model: nn.Module, sites: list[AttentionSite], batches: list[tuple[list[int], dict[str, torch.Tensor]]],
    labels: torch.Tensor, masks: list[torch.Tensor] | None = None, uniform: list[torch.Tensor] | None = None,
    budget: int | None = None, cache: LayerCache | None = None,
    judge: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    logits_of: Callable[[Any], torch.Tensor] | None = None,
) -> list[torch.Tensor]:
    """Per-example correctness (bool, input order) for each intervention unit, stacking units along the batch;
    ``judge(logits, gold)`` gives another per-example outcome instead (a task's ``OutcomeScore.outcome``), and
    ``logits_of(output)`` reads the logits from a forward pass's output (default ``output.logits``; a task's
    ``Task.output_logits``).

    Each unit is an ``L x H`` float ``mask`` (1 keeps a head) or a bool ``uniform`` map (True gives the
    head uniform attention). Every pre-collated batch is repeated k times with one unit's mask per
    repeat, so k units share one forward pass; k comes from ``stack_size`` (1 falls back to one unit at
    a time). The numbers equal those of one unit per pass: the hooks take one mask per row. With a
    ``cache`` of these batches' layer inputs, each pass starts at its units' lowest intervened layer.
    """
    units = masks if masks is not None else uniform
    assert units is not None, "give masks or uniform"
    n = len(labels)
    if not units:
        return []
    hidden = hidden_size(model)
    layers = sum(len(s.layers) for s in sites)
    param = next(model.parameters())
    device = param.device
    # predictions stay on the device until the evaluation ends: no synchronising copy after each pass
    out: list[torch.Tensor] = []  # allocated at the first pass, shaped as the judge's outcome
    gold_all = labels.to(device)
    # progress in (unit, batch) evaluations: a batch holds one forward pass per stack of units
    with torch.inference_mode(), tracking(f"{len(units)} intervention(s) x {len(batches)} batches",
                                          len(units) * len(batches)) as tracker:
        for number, (idx, batch) in enumerate(batches):
            ids = batch["input_ids"]
            rows, length = ids.shape[0], ids.shape[-1]
            k = stack_size(rows * (ids.shape[1] if ids.dim() == 3 else 1), length, hidden, layers, device,
                           len(units), budget, param.element_size())
            where = torch.tensor(idx, device=device)
            gold = gold_all[where]
            for start in range(0, len(units), k):
                group = units[start : start + k]
                stacked = _repeat_rows(batch, len(group)) if len(group) > 1 else batch
                per_row = torch.stack(group).repeat_interleave(rows, dim=0)  # (k * rows) x L x H
                kwargs = {"mask": per_row.float()} if masks is not None else {"uniform": per_row.bool()}
                start_layer = min(lowest_layer(u, masks is not None) for u in group) if cache is not None else 0
                skip = cache.start_at(number, start_layer, len(group)) if cache is not None else contextlib.nullcontext()
                with head_intervention(model, sites, **kwargs), skip:
                    output = model(**stacked)
                    logits = output.logits if logits_of is None else logits_of(output)
                if judge is None:
                    outcome = logits.argmax(-1).view(len(group), rows) == gold
                else:
                    flat = judge(logits, gold.repeat(len(group), *([1] * (gold.dim() - 1))))  # rows in unit order
                    outcome = flat.view(len(group), rows, *flat.shape[1:])
                if not out:
                    out = [torch.empty((n, *outcome.shape[2:]), dtype=outcome.dtype, device=device) for _ in units]
                for j in range(len(group)):
                    out[start + j][where] = outcome[j]
                tracker.advance(len(group))
        tracker.finish()
    return [o.cpu() for o in out]
