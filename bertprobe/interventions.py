"""Moved to ``bertprobe.target.interventions``; this name stays for plugins written against the README."""

from bertprobe.target.interventions import (
    LayerCache,
    encoder_layers,
    evaluate_units,
    frozen_parameters,
    head_intervention,
    hidden_size,
    lowest_layer,
    stack_size,
)

__all__ = ["LayerCache", "encoder_layers", "evaluate_units", "frozen_parameters", "head_intervention", "hidden_size",
           "lowest_layer", "stack_size"]
