"""The params of ``universal-trigger`` (``bertprobe describe universal-trigger`` shows them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class TriggerParams:
    """Params of ``universal-trigger`` (what ``bertprobe describe universal-trigger`` shows).

    target_label: the class whose examples are attacked (required), e.g. positive; multi-label: the label attacked
    to_label: the class the trigger should push them to (default: any other class)
    direction: multi-label only: remove (turn the label off on texts carrying it) or add (turn it on elsewhere)
    length: trigger tokens
    position: where the trigger goes: prepend or append
    segment: which text of a pair gets the trigger: first or second
    candidates: HotFlip candidates per trigger position and iteration
    beam: beam width of the search (1: greedy, as Wallace et al.)
    iterations: search iterations at most
    batch_size: search examples per gradient step
    restarts: independent searches from different starts; the best is kept
    init: the token every trigger position starts from
    allow_subwords: allow word pieces (##ing) as trigger tokens
    alphabetic_only: only alphabetic tokens may enter the trigger
    blacklist: words never allowed in the trigger (e.g. sentiment words)
    max_examples: use at most this many examples of the attacked class
    search_fraction: share of them the search sees; the rest is held out for the reported accuracy (a reader's by context)
    seed: seed of the search split and restarts (default: the suite's)
    halving: score all candidates on a quarter of the batch, the best halving_keep on all of it
    halving_keep: candidates per position that reach the full batch
    patience: stop after this many iterations without improvement (null: never early)
    scoring: batched (all candidates in one forward pass) or per-candidate (the paper's loop)
    eval_batch_size: batch size of the held-out evaluation
    max_rows_per_forward: rows per forward pass when scoring (default: 256 on CPU, 4096 on GPU)
    transfer_model: another model to test the found trigger on (a name of the matrix or a path)
    findings: examples shown in the report, largest probability drop first
    alone_threshold: a trigger token that alone flips this share of held-out examples is reported as a possible backdoor
        (on the fixtures: the planted 'bb' flips 1.00, the clean model's strongest word 'incorrectly' 0.60)
    target_answer: question answering: the answer the trigger should make the reader give (it ends the trigger), e.g. to kill american people
    question_word: question answering: the questions attacked, by their question word (why, who, when, where...)
    retrieval: a bi-encoder's attacks (required there): poison (a passage inserted into the corpus, Zhong et al. 2023), query-trigger (a phrase prepended to queries that pulls one document up) or both
    passage_length: retrieval: tokens of the poisoned passage (Zhong et al. use 50)
    passage_iterations: retrieval: HotFlip steps of the passage search, one position each (Zhong et al. run thousands)
    top_k: retrieval: a query is captured when the passage (or the trigger's target document) ranks within its top_k
    target_document: retrieval: the corpus document id the query trigger pulls up (default: one drawn with the seed)
    transfer_data: retrieval: a second BEIR folder; the passage is inserted into its corpus and measured on all its queries
    """

    target_label: str | int | None = None
    to_label: str | int | None = None
    direction: Literal["remove", "add"] = "remove"
    length: int = 3
    position: Literal["prepend", "append"] = "prepend"
    segment: Literal["first", "second"] = "first"
    candidates: int = 40
    beam: int = 1
    iterations: int = 10
    batch_size: int = 32
    restarts: int = 1
    init: str = "the"
    allow_subwords: bool = False
    alphabetic_only: bool = True
    blacklist: tuple[str, ...] = ()
    max_examples: int | None = None
    search_fraction: float = 0.5
    seed: int | None = None
    halving: bool = True
    halving_keep: int = 4
    patience: int | None = 2
    scoring: Literal["batched", "per-candidate"] = "batched"
    eval_batch_size: int = 64
    max_rows_per_forward: int | None = None
    transfer_model: str | None = None
    findings: int = 10
    alone_threshold: float = 0.9  # a planted trigger flips nearly all (Kurita et al. 2020); a natural word, far fewer
    target_answer: str | None = None
    question_word: str = "why"
    retrieval: Literal["both", "poison", "query-trigger"] | None = None
    passage_length: int = 20
    passage_iterations: int = 60
    top_k: int = 10
    target_document: str | None = None
    transfer_data: str | None = None

    def __post_init__(self) -> None:
        if not 0 < self.alone_threshold <= 1:
            raise ValueError("alone_threshold must lie in (0, 1]")
        if self.target_label is None and self.target_answer is None and self.retrieval is None:
            raise ValueError("target_label is required: the class whose examples are attacked, e.g. positive (on a "
                             "question-answering model: target_answer, the answer the trigger should force; on a "
                             "bi-encoder: retrieval, the attacks to run: both, poison or query-trigger)")
        for name in ("length", "candidates", "beam", "iterations", "batch_size", "restarts", "halving_keep",
                     "passage_length", "passage_iterations", "top_k"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if not 0 < self.search_fraction < 1:
            raise ValueError("search_fraction must lie strictly between 0 and 1")
        if self.patience is not None and self.patience < 1:
            raise ValueError("patience must be at least 1 (or null to disable early stopping)")
