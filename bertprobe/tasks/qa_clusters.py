"""Which questions a reader's intervals resample together: the questions of one context (a cluster bootstrap).

SQuAD asks about five questions of each paragraph, and a reader that misreads a paragraph tends to miss its
questions together: they are no independent evidence, and an interval that resamples questions one by one is too
narrow. So the QA intervals are drawn over contexts: a question's cluster is its context, and an adversarial
variant's (Jia & Liang 2017: the original's context with a distractor added) is its original's, where the original
is in the data. A share (an exact match, a success rate) takes Wilson's interval on the Korn-Graubard effective
sample size (``stats.clustered_wilson``), a graded mean (an F1) the cluster bootstrap (``stats.bootstrap_ci`` with
``groups``); where no two questions share a context, they are Wilson's and the i.i.d. bootstrap's over questions
(``stats.mean_interval``; ``interval_over`` names the branch taken). Articles (several paragraphs of one Wikipedia
page) are not a cluster level: paragraphs are.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from bertprobe.data.dataset import Example
from bertprobe.stats import (
    BOOTSTRAP,
    CLUSTER_BOOTSTRAP,
    CLUSTERED_WILSON,
    SMALL_SAMPLE,
    WILSON,
    WILSON_CLUSTERS,
    clustered,
    interval_method,
)
from bertprobe.stats import mean_interval as stats_mean_interval

ORIGINAL = "adversarial_of"  # a Jia & Liang variant's meta key: its original's id (tasks.qa_adversarial)


def question_clusters(examples: Sequence[Example]) -> list[str]:
    """Each question's cluster key: its context, or for an adversarial variant its original's context."""
    context = {ex.id: ex.text_pair or "" for ex in examples if not ex.meta.get(ORIGINAL)}
    return [context.get(ex.meta.get(ORIGINAL) or ex.id, ex.text_pair or "") for ex in examples]


def interval_over(values: Sequence[float], groups: Sequence[str] | None, resamples: int = 1, short: bool = False,
                  unit: str = "questions") -> str:
    """How ``stats.mean_interval`` draws the interval of the mean of ``values`` (``groups``: each one's context;
    ``resamples``: the bootstrap's), in words for a metric's description (``short``: a title's or a table cell's);
    ``unit``: what the values are (questions, cases). ``stats.clustered_wilson`` is the interval of a share."""
    method = interval_method(values, resamples, groups)
    long = {
        WILSON: f"Wilson interval over {unit}",
        CLUSTERED_WILSON: f"Wilson interval over contexts: on the effective number of {unit}, their design effect "
                          "from the variance between contexts (Korn & Graubard 1998)",
        WILSON_CLUSTERS: f"Wilson interval over contexts: one trial per context, fewer than {SMALL_SAMPLE}",
        BOOTSTRAP: f"bootstrap interval over {unit}",
        CLUSTER_BOOTSTRAP: f"cluster bootstrap interval over contexts: a context's {unit} resampled together",
    }[method]
    suffix = {CLUSTERED_WILSON: " (effective size)", WILSON_CLUSTERS: " (one trial each)"}.get(method, "")
    return long.split(":")[0] + suffix if short else long


def intervals_over(samples: Sequence[tuple[Sequence[float], Sequence[str] | None]], resamples: int = 1,
                   unit: str = "questions") -> str:
    """``interval_over``'s short words for several means (a table's rows, a figure's bars), each distinct branch
    once, joined with "or": a title that names every method its rows' intervals took."""
    named = dict.fromkeys(interval_over(v, g, resamples, True, unit) for v, g in samples if len(v))
    return " or ".join(named) or "no interval"


def cluster_keys(groups: Sequence[str] | None) -> list[str] | None:
    """Short stable keys for clusters named by their contexts (sha256, 16 hex digits), to store beside each
    question's outcomes; None where no two questions share a context (nothing to pair by cluster)."""
    if not clustered(groups):
        return None
    assert groups is not None
    return [hashlib.sha256(g.encode("utf-8")).hexdigest()[:16] for g in groups]


SMALL_GROUP = SMALL_SAMPLE  # below this many questions (or contexts) a group's F1 interval is Wilson's


def mean_interval(values: Sequence[float], params: Any, seed: int,
                  groups: Sequence[str] | None = None) -> tuple[float, float] | None:
    """The interval of the mean of ``values`` over questions (None when intervals are off: ``params.bootstrap``
    0): ``stats.mean_interval`` at ``params.confidence`` with ``groups`` (each question's context,
    ``question_clusters``): a share's (an exact match) is Wilson's on its effective sample size over contexts, a
    graded mean's (an F1) a bootstrap that resamples contexts from ``SMALL_GROUP`` contexts up, else Wilson's with
    one trial per context (``interval_over``)."""
    if not params.bootstrap or not values:
        return None
    return stats_mean_interval(values, params.bootstrap, params.confidence, seed, groups)
