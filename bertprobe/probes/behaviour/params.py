"""The behaviour probe's params (``BehaviourProbe.Params``), read by its own code and by each of its sections."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class BehaviourParams:
    """``cases``: JSONL files of cases. ``templates``: template tests (see ``templates.py``).
    ``perturbations``: names or mappings ``{name, variants, class, direction, tolerance, field}`` applied to
    the suite's data (default: the whole catalogue; ``[]`` turns them off). ``lexicons``: your own word
    lists by name (a built-in name replaces that list). ``max_cases``: cases per template test.
    ``max_examples``: data examples the perturbations see (a seeded sample). ``findings``: failing cases
    shown per test. ``bootstrap``: resamples of the fairness gaps' intervals (0: none; the failure
    rates' need none: Wilson's, on the effective sample size where a reader's cases share a context). On an extractive reader
    (``answers.py``): ``answer_metric`` (f1 or em) and ``answer_bar``, what an mft answer must score against its
    expected answers; ``builtin_templates``: the MFT templates after CheckList's SQuAD suite; ``origins``: their
    person templates again over surnames of each origin group. ``mlm`` and the ``mlm_*`` params: the masked-LM
    substitution test (``mlm_cases.py``), on classifiers. On a bi-encoder or a reranker (``retrieval.py``): the
    perturbations edit BEIR queries (``max_examples`` of them) and an INV case fails when the gold passage leaves
    the top ``retention_k``; ``templates`` and ``cases`` are similarity cases (anchor, paraphrase, contrast);
    ``builtin_templates``: the NevIR-style negation, number and antonym templates; ``origins``: the queries holding a
    person's name again with a surname of each origin group.
    """

    cases: str | tuple[str, ...] = ()
    templates: tuple[dict[str, Any], ...] = ()
    perturbations: tuple[Any, ...] | None = None
    lexicons: dict[str, tuple[str, ...]] = field(default_factory=dict)
    max_cases: int = 100
    max_examples: int = 300
    findings: int = 5
    bootstrap: int = 1000
    batch_size: int | None = None  # examples per forward pass (default: sized to the device)
    answer_metric: str = "f1"  # extractive QA: an mft answer scored by SQuAD's F1 or em against its expected answers
    answer_bar: float = 0.8  # extractive QA: the score an mft answer must reach to pass
    # extractive QA: the built-in MFT templates (after CheckList's SQuAD suite); bi-encoders, rerankers: NevIR-style ones
    builtin_templates: bool = True  # run the built-in templates (extractive QA, bi-encoders and rerankers)
    # extractive QA: the person templates; bi-encoders, rerankers: the queries naming a person (fairness)
    origins: bool = True  # again with surnames of each origin group
    retention_k: int = 10  # bi-encoders, rerankers: an inv case fails when the gold passage leaves this top k
    # CheckList's fill-ins, BAE-R's replacements; the model named may be a model of the matrix, never the classifier
    mlm: str | None = None  # a masked LM whose fill-ins make the INV test "INV: MLM substitution (BAE-style)"; None: none
    mlm_top_k: int = 20  # candidates read at each masked word, most probable first
    mlm_min_prob: float = 0.02  # a candidate's least probability at the masked word, in (0, 1)
    mlm_words: int = 4  # words masked per sentence: a seeded sample of its content words, each masked once
    mlm_edits: int = 3  # substitutions kept per sentence (the edited texts of its case), best of each word first
    mlm_cases: int = 200  # sentences the test edits (its cases at most): a seeded sample of the data's texts
    mlm_protect: tuple[str, ...] = ("pos_adj", "neg_adj", "pos_verb", "neg_verb")  # lexicons never masked nor proposed
    mlm_stop: tuple[str, ...] = ()  # more words never proposed (the shipped English stop words always are)

    def __post_init__(self) -> None:
        if self.max_cases < 1 or self.max_examples < 1:
            raise ValueError("max_cases and max_examples must be at least 1")
        if self.retention_k < 1:
            raise ValueError(f"retention_k must be at least 1, not {self.retention_k}")
        if self.answer_metric not in ("f1", "em"):
            raise ValueError(f"answer_metric must be f1 or em, not {self.answer_metric!r}")
        if self.mlm is not None and (not isinstance(self.mlm, str) or not self.mlm.strip()):
            raise ValueError("mlm must name a masked LM (a path, a hub id or a model of the matrix)")
        if not 0.0 < self.mlm_min_prob < 1.0:
            raise ValueError(f"mlm_min_prob must lie in (0, 1), not {self.mlm_min_prob}")
        for name in ("mlm_top_k", "mlm_words", "mlm_edits", "mlm_cases"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")
        if not 0.0 <= self.answer_bar <= 1.0:
            raise ValueError(f"answer_bar must lie in [0, 1], not {self.answer_bar}")
