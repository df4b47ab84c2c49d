"""HotFlip gradients and batched candidate scoring over spliced rows.

Ebrahimi et al. 2018 (HotFlip) and Wallace et al. 2019: the first-order change of the attack loss
when the token in a trigger slot is replaced by vocabulary token v is ``(e_v - e_cur) . grad``, one
matrix product with the input-embedding matrix for the whole vocabulary.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from bertprobe.model.target import Target
from bertprobe.probes.attacks.goals import ClassGoal, LabelStateGoal
from bertprobe.probes.attacks.splice import SplicedRows
from bertprobe.progress import progress


class TriggerScorer:
    """Attack objective, HotFlip gradients and batched scoring of triggers on one ``SplicedRows``.

    ``goal`` is the class the attacker wants (``targeted``) or the true class it wants to leave.
    A quantized target has no backward pass: gradients come from ``Target.gradient_model`` (the
    float weights it was quantized from) and every score from the target itself.
    """

    def __init__(self, target: Target, rows: SplicedRows, goal: int, targeted: bool,
                 max_rows_per_forward: int | None = None, per_candidate: bool = False,
                 attack: ClassGoal | LabelStateGoal | None = None) -> None:
        self.target, self.rows = target, rows
        self.goal, self.targeted = goal, targeted
        # what the attack wants (a label's state on a multi-label model); default: the class goal above
        self.attack = attack if attack is not None else (ClassGoal(-1, goal) if targeted else ClassGoal(goal))
        self.max_rows = max_rows_per_forward or (4096 if target.device.type == "cuda" else 256)
        self.per_candidate = per_candidate
        self.forward_passes = 0
        self.rows_scored = 0
        self.backward_rows = 0  # rows that also went backward (gradients), counted in rows_scored too
        self.grad_model = target.gradient_model if target.gradient_model is not None else target.model
        self.embedding = self.grad_model.get_input_embeddings()

    def objective(self, logits: torch.Tensor, rows: tuple[int, ...] | None = None) -> torch.Tensor:
        """Per-row loss the attacker minimises: CE to the goal class, or minus CE of the true class (or the
        binary cross-entropy of a label toward its goal state; or, for entity suppression, CE toward O)."""
        return self.attack.objective(logits, rows)

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Logits of the target on ``batch`` (counted)."""
        self.forward_passes += 1
        self.rows_scored += batch["input_ids"].shape[0]
        return self.outputs(self.target.model, batch)

    def outputs(self, model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """What the objective reads per row of ``batch`` through ``model`` (the target's, or the float copy that
        gradients come from): the task's output logits; a scorer of another kind of output (a bi-encoder's pooled
        embedding) overrides it."""
        return self.target.task.output_logits(model(**batch))

    def _chunks(self, triggers: torch.Tensor, rows: tuple[int, ...]):
        per_forward = 1 if self.per_candidate else max(1, self.max_rows // len(rows))
        for start in range(0, triggers.shape[0], per_forward):
            chunk = triggers[start : start + per_forward]
            yield start, chunk, self.forward(self.rows.build(rows, chunk)).view(len(chunk), len(rows), -1)

    def score(self, triggers: torch.Tensor, rows: tuple[int, ...]) -> torch.Tensor:
        """Mean objective of each trigger over ``rows`` (lower is better for the attacker)."""
        out = torch.empty(triggers.shape[0])
        with torch.inference_mode():
            for start, chunk, logits in self._chunks(triggers, rows):
                loss = self.objective(logits.reshape(-1, logits.shape[-1]), rows).view(len(chunk), len(rows))
                out[start : start + len(chunk)] = loss.mean(1).cpu()
        return out

    def hits(self, triggers: torch.Tensor, rows: tuple[int, ...]) -> torch.Tensor:
        """Whether each row reaches the attack's goal with each trigger spliced in: ``len(triggers) x len(rows)``."""
        out = torch.empty(triggers.shape[0], len(rows), dtype=torch.bool)
        with torch.inference_mode():
            for start, chunk, logits in self._chunks(triggers, rows):
                out[start : start + len(chunk)] = self.attack.hit(logits, rows).view(len(chunk), len(rows)).cpu()
        return out

    def buckets(self, rows: tuple[int, ...]) -> list[tuple[int, ...]]:
        """``rows`` in groups of similar length for a backward pass: on a CPU, groups of 8 (padding a batch to its
        longest row wastes more than a smaller batch loses: 1.25x faster on SST-2); on a GPU, all at once."""
        if self.target.device.type == "cuda" or len(rows) <= 8:
            return [rows]
        ordered = sorted(rows, key=lambda r: len(self.rows.ids[r]))
        return [tuple(ordered[i : i + 8]) for i in range(0, len(ordered), 8)]

    def backward(self, trigger: torch.Tensor, bucket: tuple[int, ...], hook: Any, over: int) -> None:
        """One forward and backward pass (counted) of ``trigger`` spliced into ``bucket``, with ``hook`` on the input
        embeddings: the gradient of the bucket's share of the objective's mean over ``over`` rows."""
        handle = self.embedding.register_forward_hook(hook)
        try:
            with torch.enable_grad():
                batch = self.rows.build(bucket, trigger.unsqueeze(0))
                self.forward_passes += 1
                self.rows_scored += batch["input_ids"].shape[0]
                self.backward_rows += batch["input_ids"].shape[0]
                logits = self.outputs(self.grad_model, batch)
                (self.objective(logits, bucket).sum() / over).backward()
        finally:
            handle.remove()

    def gradient(self, trigger: torch.Tensor, rows: tuple[int, ...]) -> torch.Tensor:
        """d(mean objective)/d(trigger embeddings), averaged over the rows: ``length x dim`` (the rows taken in
        length buckets, ``buckets``; the sum is the same)."""
        captured: dict[str, torch.Tensor] = {}

        def hook(_module: Any, _inputs: Any, output: torch.Tensor) -> torch.Tensor:
            leaf = output.detach().requires_grad_(True)
            captured["emb"] = leaf
            return leaf

        total = None
        for bucket in self.buckets(rows):
            self.backward(trigger, bucket, hook, len(rows))
            _, _, _, slots = self.rows.template(bucket)
            grad = captured["emb"].grad  # rows x T x D
            picked = grad.gather(1, slots.to(grad.device).unsqueeze(-1).expand(-1, -1, grad.shape[-1])).sum(0)
            total = picked if total is None else total + picked
        assert total is not None
        return total / len(rows)

    def token_scores(self, grad: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
        """First-order gain of every vocabulary token in every slot (``length x vocab``; -inf if not allowed)."""
        weight = self.embedding.weight
        scores = -(grad.to(weight.dtype) @ weight.T).float()  # lower objective = higher score
        mask = allowed.to(scores.device)[: scores.shape[1]]
        if mask.shape[0] < scores.shape[1]:
            mask = torch.cat([mask, mask.new_zeros(scores.shape[1] - mask.shape[0])])
        scores[:, ~mask] = -math.inf
        return scores.cpu()

    def hotflip(self, grad: torch.Tensor, allowed: torch.Tensor, k: int) -> torch.Tensor:
        """Top-``k`` replacement tokens per slot by the first-order change of the objective."""
        return self.token_scores(grad, allowed).topk(k, dim=1).indices


def relaxed_token_scores(scorers: list[TriggerScorer], trigger: torch.Tensor, slot: int, allowed: torch.Tensor,
                         windows: list[tuple[int, ...]], steps: int = 40, lr: float = 0.5) -> torch.Tensor:
    """Trigger inversion by a convex relaxation, after DBS (Shen et al. 2022): slot ``slot`` holds a softmax
    mixture of the allowed tokens' embeddings, whose logits Adam fits to the attack objective (step ``i`` on
    scorer ``i mod len(scorers)``, one per insertion position, and on window ``(i // len(scorers)) mod
    len(windows)`` of its rows: a minibatch). Returns the logits over the whole
    vocabulary (-inf where not allowed): tokens the optimisation leans on rank first.

    Deviation from DBS: a fixed temperature of 1, no dynamic bound scaling, ``steps`` fixed.
    """
    first = scorers[0]
    embedding = first.embedding
    vocab = allowed[: embedding.weight.shape[0]].nonzero().squeeze(1)
    table = embedding.weight.detach().float()[vocab.to(embedding.weight.device)]
    theta = torch.zeros(len(vocab), device=table.device, requires_grad=True)
    optim = torch.optim.Adam([theta], lr=lr)
    for step in progress(range(steps), desc="relaxed inversion"):
        scorer = scorers[step % len(scorers)]
        rows = windows[(step // len(scorers)) % len(windows)]
        optim.zero_grad()
        for bucket in scorer.buckets(rows):  # the gradient of the mean over rows, a length bucket at a time
            slots = scorer.rows.template(bucket)[3][:, slot].to(table.device)
            soft = torch.softmax(theta, 0) @ table

            def hook(_module: Any, _inputs: Any, output: torch.Tensor, slots: torch.Tensor = slots,
                     soft: torch.Tensor = soft) -> torch.Tensor:
                output = output.clone()
                output[torch.arange(output.shape[0], device=output.device), slots] = soft.to(output.dtype)
                return output

            scorer.backward(trigger, bucket, hook, len(rows))
        optim.step()
    out = torch.full((allowed.shape[0],), -math.inf)
    out[vocab.cpu()] = theta.detach().float().cpu()
    return out
