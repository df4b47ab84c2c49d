"""Every name a probe may put in ``requires``: what a loaded target can do, and what its data hold.

``Target.capabilities`` and ``Dataset.features`` answer with these names; a probe that requires a name
not listed here is refused when it registers (a typo would otherwise skip the probe forever). Capabilities
name abilities, never a task: a probe lists the tasks whose outputs it reads in ``Probe.tasks``, and one that
requires a task's name is refused at registration, told so.
"""

from __future__ import annotations

from collections.abc import Iterable

from bertprobe.registry import did_you_mean

TARGET: dict[str, str] = {
    "attentions": "attention maps can be read (every loaded model)",
    "heads": "attention blocks with per-head projections bertprobe can mask and prune",
    "uniform-heads": "every layer has as many heads (not after uneven physical pruning)",
    "gradients": "a backward pass works (not on an int8 variant)",
    "input-gradients": "gradients at the input embeddings, maybe from the float copy of a quantized variant",
    "predictions": "a prediction per example (a class, a choice, tags, an answer span): what ctx.predictions shares",
    "classifier": "a sequence classifier with named classes",
    "mlm": "a masked-LM head",
    "mask-token": "the tokenizer has a mask token",
    "probabilities": "probabilities of its predictions that come true or not (a class, a label, a span)",
    "embeddings": "a sentence embedding per text (a bi-encoder's pooled, maybe normalised, output)",
    "pair-scores": "a relevance score per (query, passage) pair (a cross-encoder)",
}
DATA: dict[str, str] = {
    "data:labels": "every example has a label",
    "data:text-pair": "every example has a second text",
    "data:choices": "every example has choices",
    "data:words": "every example has words and their character spans",
    "data:corpus": "retrieval data: queries judged against a corpus of documents (a BEIR folder)",
}
LAYER_PREFIX = "data:layer:"  # data:layer:<name>, e.g. data:layer:head, data:layer:deprel


def unknown(requires: Iterable[str]) -> list[str]:
    """The names in ``requires`` that are neither a target capability nor a data feature, with a hint."""
    known = [*TARGET, *DATA]
    return [f"'{name}'{did_you_mean(name, known)}" for name in sorted(requires)
            if name not in TARGET and name not in DATA and not (name.startswith(LAYER_PREFIX) and len(name) > len(LAYER_PREFIX))]
