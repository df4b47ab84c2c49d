"""Which questions a reader's intervals resample together: the questions of one context (a cluster bootstrap).

SQuAD asks about five questions of each paragraph, and a reader that misreads a paragraph tends to miss its
questions together: they are no independent evidence, and an interval that resamples questions one by one is too
narrow. So the QA intervals resample contexts (``stats.bootstrap_ci`` with ``groups``): a question's cluster is
its context, and an adversarial variant's (Jia & Liang 2017: the original's context with a distractor added) is
its original's, where the original is in the data. Where no two questions share a context, the draws are the
i.i.d. bootstrap's over questions. Articles (several paragraphs of one Wikipedia page) are not a cluster level:
paragraphs are.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from bertprobe.data.dataset import Example
from bertprobe.stats import clustered, mean_interval, wilson_interval

ORIGINAL = "adversarial_of"  # a Jia & Liang variant's meta key: its original's id (tasks.qa_adversarial)


def question_clusters(examples: Sequence[Example]) -> list[str]:
    """Each question's cluster key: its context, or for an adversarial variant its original's context."""
    context = {ex.id: ex.text_pair or "" for ex in examples if not ex.meta.get(ORIGINAL)}
    return [context.get(ex.meta.get(ORIGINAL) or ex.id, ex.text_pair or "") for ex in examples]


def interval_over(groups: Sequence[str] | None, short: bool = False) -> str:
    """How the interval of a mean over these questions is drawn, for a metric's description (``short``: a title's)."""
    if clustered(groups):
        return "cluster bootstrap interval over contexts" + ("" if short else ": a context's questions resampled together")
    return "bootstrap interval over questions"


def cluster_keys(groups: Sequence[str] | None) -> list[str] | None:
    """Short stable keys for clusters named by their contexts (sha256, 16 hex digits), to store beside each
    question's outcomes; None where no two questions share a context (nothing to pair by cluster)."""
    if not clustered(groups):
        return None
    assert groups is not None
    return [hashlib.sha256(g.encode("utf-8")).hexdigest()[:16] for g in groups]


def share_interval(hits: Sequence[float], groups: Sequence[str] | None, resamples: int, confidence: float = 0.95,
                   seed: int = 0) -> tuple[float, float]:
    """The interval of a share of questions (0/1 ``hits``): Wilson's over questions where no two share a context
    (independent trials), else over contexts (``stats.mean_interval`` with ``groups``: a cluster bootstrap from
    ``stats.SMALL_SAMPLE`` contexts up, below Wilson's with one trial per context). NaN bounds without questions."""
    if clustered(groups):
        return mean_interval(hits, resamples, confidence, seed, groups)
    return wilson_interval(round(sum(hits)), len(hits), confidence)
