"""The params of ``head-pruning`` (``HeadParams``): what the sweeps remove, how they are read, and what they cost."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class HeadParams:
    normalize: bool = True  # divide each layer's importance scores by their L2 norm before ranking (Michel's default)
    ablation: bool = True  # remove each head alone and measure the accuracy drop
    mode: Literal["mask", "uniform"] = "mask"  # how a head is removed: mask (output zeroed, Michel) or uniform (uniform attention, Kovaleva)
    layers: bool = True  # remove each layer's heads together
    pruning: bool = True  # prune heads from least to most important and draw the accuracy curve
    step: float = 0.1  # share of heads pruned per step of the curve
    tolerance: float = 0.01  # accuracy drop a pruning step may cost and still count as prunable
    iterative: bool = False  # recompute importance after each pruning step (Michel's iterative variant)
    physical: bool = False  # remove the heads' weights for real and measure the speed-up
    physical_fraction: float = 0.5  # share of heads physically removed for the speed measurement
    speed_batch_size: int = 64  # batch size of the throughput measurement
    speed_seconds: float = 10.0  # time budget of the physical-pruning speed measurement
    batch_size: int | None = None  # examples per forward pass (default: sized to the device)
    stack: int = 24  # ablation units handed to the evaluator at once (stacked in one pass on a GPU)
    stack_budget: int | None = None  # activation elements per stacked pass (None: 0 on CPU; GPU: a quarter of free memory, <= 2^31)
    layer_cache: bool = True  # ablations start from their lowest intervened layer (cached layer inputs)
    cache_budget_mb: float | None = None  # the most the layer cache may hold (None: a quarter of free memory)
    bootstrap: int = 1000  # paired bootstrap resamples of the drops' intervals
    confidence: float = 0.95  # level of the intervals and of the prunable test
    findings: int = 5  # most important heads listed in the report
    metric: str = "auto"  # what ablations and the curve measure: auto (accuracy; multi-label: micro_f1; NER: entity_f1; a reader: f1 per question; a bi-encoder: ndcg@10), subset_accuracy, sentence_exact, em, mrr@10, recall@10
    max_examples: int | None = None  # at most this many examples (questions for a reader), a seeded sample in data order; None: all (a bi-encoder: retrieval_queries)
    retrieval_queries: int = 100  # a bi-encoder: queries sampled where max_examples is not set (each unit re-embeds them and the corpus subset)
    distractors: int = 200  # a bi-encoder: documents beside the sampled queries' relevant ones in the corpus subset the sweeps rank
    sequential: bool = True  # ablations on growing blocks of examples, each stopped once decided (false: every unit on all)
    sequential_min: int = 2000  # fewest examples run sequentially (below, a few percent saved do not pay for the blocks)
    sequential_block: int = 256  # examples of the first look
    sequential_growth: float = 1.5  # each next look holds this many times the examples of the one before
    census_share: float = 0.05  # sequential sweeps first evaluate this share of examples, those whose plain decision is closest to changing (smallest margin), in full; 0: none
    interim_share: float = 0.5  # error of a unit settled before the end, per side, as a share of 1 - confidence (0.5: the exact interval's own 2.5% per side; time-uniform); the final look is the exact interval

    def __post_init__(self) -> None:
        if not 0 < self.step <= 1:
            raise ValueError("step must lie in (0, 1]")
        if not 0 <= self.physical_fraction < 1:
            raise ValueError("physical_fraction must lie in [0, 1)")
        if self.tolerance < 0:
            raise ValueError("tolerance must be >= 0")
        if self.max_examples is not None and self.max_examples < 1:
            raise ValueError("max_examples must be at least 1 (leave it out to use every example)")
        if self.retrieval_queries < 1 or self.distractors < 0:
            raise ValueError("retrieval_queries must be at least 1 and distractors at least 0")
        if self.sequential_min < 0:
            raise ValueError("sequential_min must be at least 0")
        if self.sequential_block < 16:
            raise ValueError("sequential_block must be at least 16")
        if self.sequential_growth <= 1:
            raise ValueError("sequential_growth must be above 1")
        if not 0 <= self.census_share < 1:
            raise ValueError("census_share must lie in [0, 1)")
        if not 0 < self.interim_share < 1:
            raise ValueError("interim_share must lie strictly between 0 and 1")
