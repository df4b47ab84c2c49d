"""Find the self-attention blocks of any supported BERT-family encoder.

transformers 5 removed ``head_mask``; interventions therefore hook two linear layers per block:
the value projection (its output holds every head's values) and the output projection (its input
is the concatenation of the heads' context vectors, ``B x T x (H * d)``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from torch import nn

from bertprobe.errors import TargetError

# Module-name suffixes, per family: BERT/RoBERTa/ELECTRA/DeBERTa(-v2)/XLM-R, DistilBERT, ALBERT, MPNet.
_OUT_PROJ = re.compile(r"(attention\.output\.dense|attention\.out_lin|attention\.dense|attention\.attn\.o)$")
_VALUE_PROJ = re.compile(r"(attention\.self\.value|attention\.self\.value_proj|attention\.v_lin|attention\.value|attention\.attn\.v)$")
_QUERY_PROJ = re.compile(r"(attention\.self\.query|attention\.self\.query_proj|attention\.q_lin|attention\.query|attention\.attn\.q)$")
_KEY_PROJ = re.compile(r"(attention\.self\.key|attention\.self\.key_proj|attention\.k_lin|attention\.key|attention\.attn\.k)$")


@dataclass
class AttentionSite:
    """One physical self-attention block; ``layers`` lists the logical layers that call it, in order."""

    name: str
    out_proj: nn.Linear
    value_proj: nn.Linear | None
    num_heads: int
    head_dim: int
    layers: list[int] = field(default_factory=list)
    query_proj: nn.Linear | None = None
    key_proj: nn.Linear | None = None


def _config_int(config: object, *names: str) -> int:
    for name in names:
        value = getattr(config, name, None)
        if isinstance(value, int):
            return value
    raise TargetError(f"model config has none of {', '.join(names)}; cannot locate attention heads")


def attention_sites(model: nn.Module) -> list[AttentionSite]:
    """Return the attention blocks of ``model`` with the logical layers each one serves."""
    config = model.config
    num_layers = _config_int(config, "num_hidden_layers", "n_layers")
    num_heads = _config_int(config, "num_attention_heads", "n_heads")
    head_dim = getattr(config, "attention_head_size", None)
    if not isinstance(head_dim, int) or head_dim <= 0:
        hidden = _config_int(config, "hidden_size", "dim")
        head_dim = hidden // num_heads
    outs = [(n, m) for n, m in model.named_modules() if _OUT_PROJ.search(n) and isinstance(m, nn.Linear)]
    def by_block(pattern: re.Pattern[str]) -> dict[str, nn.Linear]:
        return {
            n.rsplit(".", 2)[0] if ".self." in n else n.rsplit(".", 1)[0]: m
            for n, m in model.named_modules()
            if pattern.search(n) and isinstance(m, nn.Linear)
        }

    values, queries, keys = by_block(_VALUE_PROJ), by_block(_QUERY_PROJ), by_block(_KEY_PROJ)
    if not outs:
        raise TargetError(
            f"cannot find the self-attention output projections of {type(model).__name__}; "
            "head interventions support BERT, RoBERTa, DistilBERT, ALBERT, ELECTRA, DeBERTa, MPNet"
        )
    sites = []
    for name, out in outs:
        block = name.rsplit(".", 2)[0] if ".output." in name else name.rsplit(".", 1)[0]
        # Heads are counted from the module's shape: a physically pruned layer has fewer than the config says.
        if out.in_features % head_dim:
            raise TargetError(f"{name}: {out.in_features} features do not split into heads of {head_dim}")
        sites.append(
            AttentionSite(name, out, values.get(block), out.in_features // head_dim, head_dim,
                          query_proj=queries.get(block), key_proj=keys.get(block))
        )
    if len(sites) == num_layers:
        for i, site in enumerate(sites):
            site.layers = [i]
    elif getattr(config, "model_type", "") == "albert":
        groups = getattr(config, "num_hidden_groups", 1)
        inner = getattr(config, "inner_group_num", 1)
        for layer in range(num_layers):
            group = int(layer / (num_layers / groups))
            for j in range(inner):
                sites[group * inner + j].layers.append(layer * inner + j)
    else:
        raise TargetError(
            f"found {len(sites)} attention blocks for {num_layers} layers in {type(model).__name__}; "
            "this layout is not supported"
        )
    return sites


def num_logical_layers(sites: list[AttentionSite]) -> int:
    return sum(len(s.layers) for s in sites)


def heads_per_layer(sites: list[AttentionSite]) -> list[int]:
    """Heads of each logical layer (they differ after physical pruning)."""
    out = [0] * num_logical_layers(sites)
    for site in sites:
        for layer in site.layers:
            out[layer] = site.num_heads
    return out


def head_grid(sites: list[AttentionSite]) -> tuple[int, int]:
    """(layers, most heads in a layer): the shape of layer x head masks and maps."""
    return num_logical_layers(sites), max(s.num_heads for s in sites)
