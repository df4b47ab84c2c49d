"""Probe ``textattack``: TextAttack's per-example attack recipes against a bertprobe target.

Paper: Morris, Lifland, Yoo, Grigsby, Jin, Qi 2020, "TextAttack: A Framework for Adversarial Attacks,
Data Augmentation, and Adversarial Training in NLP" (EMNLP demos), and each recipe's own paper:
DeepWordBug (Gao et al. 2018), Pruthi et al. 2019, Input Reduction (Feng et al. 2018), TextFooler (Jin
et al. 2020), BAE (Garg & Ramakrishnan 2020).

How it runs: the target is wrapped in a thin TextAttack model wrapper over ``Target.logits``, so every
batch of an attack's queries is tokenised once, length-sorted and batched on the target's device
(TextAttack's own ``--model-batch-size`` was long ignored, its issue #245). Each attacked example is
one outcome (succeeded, failed or skipped: already misclassified), published per example so a model
matrix and ``bertprobe compare`` can pair them.

Where it deviates: only three published recipes run without the network (``deepwordbug``, ``pruthi``,
``input-reduction``). Two offline variants stand in for the rest:
  * ``embedding-swap``: TextFooler's search (greedy, word importance by deletion) and word swaps, with
    neighbours from the *target model's own* input-embedding matrix instead of counter-fitted GloVe
    vectors, and without TextFooler's POS and Universal Sentence Encoder constraints (both download);
  * ``mlm-swap``: BAE-R's masked-LM replacements from a local masked LM (``mlm_model``), without BAE's
    Universal Sentence Encoder constraint.
A recipe that needs the network fails with one line naming what it would download.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from bertprobe import Finding, Outcomes, Probe, ProbeContext, ProbeError, ProbeResult, Target, example_ids, hookimpl
from bertprobe.data import Dataset, Example

OFFLINE = {
    "deepwordbug": "DeepWordBugGao2018",
    "pruthi": "Pruthi2019",
    "input-reduction": "InputReductionFeng2018",
}
VARIANTS = ("embedding-swap", "mlm-swap")
CODES = {"skipped": 0, "failed": 1, "succeeded": 2}  # the categorical attack_outcome per example
NEEDS_NETWORK = {
    "textfooler": "counter-fitted word embeddings (paragramcf) and the Universal Sentence Encoder from TF Hub",
    "bae": "the bert-base-uncased masked LM and the Universal Sentence Encoder from TF Hub",
    "bert-attack": "the bert-base-uncased masked LM and the Universal Sentence Encoder",
    "textbugger": "GloVe word embeddings and the Universal Sentence Encoder",
    "pwws": "NLTK's WordNet",
    "pso": "HowNet sememes and counter-fitted embeddings",
    "alzantot": "counter-fitted embeddings and the Google 1-billion-word language model",
    "faster-alzantot": "counter-fitted embeddings and the Google 1-billion-word language model",
    "iga": "counter-fitted embeddings",
    "kuleshov": "counter-fitted embeddings, the Universal Sentence Encoder and GPT-2",
    "checklist": "spaCy and NLTK data for its name/location/number swaps",
    "clare": "distilroberta-base and the Universal Sentence Encoder",
    "a2t": "counter-fitted embeddings and a DistilBERT sentence encoder",
    "hotflip": "nothing, but it attacks only TextAttack's own LSTM/word-CNN models, not a transformer",
    "morpheus": "NLTK data for inflections",
    "seq2sick": "nothing, but it attacks sequence-to-sequence models only",
}


@dataclass(frozen=True)
class TextAttackParams:
    recipe: str = "deepwordbug"  # deepwordbug, pruthi, input-reduction (offline TextAttack recipes), another TextAttack recipe, or embedding-swap / mlm-swap
    num_examples: int = 50  # labelled examples sampled (seeded); those already misclassified are skipped
    query_budget: int | None = 2000  # model queries allowed per example (None: unlimited)
    seed: int | None = None  # seed of the sample and the attack (default: the suite's)
    batch_size: int = 64  # texts per forward pass of the model wrapper
    max_candidates: int = 30  # replacement words tried per position (embedding-swap, mlm-swap)
    min_cos_sim: float = 0.5  # least cosine similarity of a swapped word's embedding (embedding-swap)
    mlm_model: str | None = None  # the masked LM proposing replacements (mlm-swap): a path or a model name of the run
    mlm_max_length: int = 64  # tokens of context the masked LM sees (mlm-swap)
    findings: int = 10  # successful attacks shown in the report

    def __post_init__(self) -> None:
        if self.num_examples < 1:
            raise ValueError("num_examples must be at least 1")
        if self.query_budget is not None and self.query_budget < 1:
            raise ValueError("query_budget must be at least 1 (or null for no budget)")


def recipe_key(name: str) -> str:
    """A recipe name as TextAttack's CLI writes it (``deepwordbug``), from either spelling."""
    plain = name.strip().lower()
    for key, cls in OFFLINE.items():
        if plain in (key, cls.lower()):
            return key
    aliases = {"textfoolerjin2019": "textfooler", "baegarg2019": "bae", "bertattackli2020": "bert-attack",
               "textbuggerli2018": "textbugger", "pwwsren2019": "pwws", "checklistribeiro2020": "checklist",
               "hotfliebrahimi2017": "hotflip"}
    return aliases.get(plain, plain)


def check_recipe(name: str) -> str:
    key = recipe_key(name)
    if key in OFFLINE or key in VARIANTS:
        return key
    offline = ", ".join([*OFFLINE, *VARIANTS])
    if key in NEEDS_NETWORK:
        raise ProbeError(f"recipe {name!r} needs {NEEDS_NETWORK[key]}, which bertprobe does not download; "
                         f"offline recipes: {offline} (embedding-swap is TextFooler-like, mlm-swap BAE-like)")
    raise ProbeError(f"unknown recipe {name!r}; offline recipes: {offline}")


class TargetWrapper:
    """TextAttack's model-wrapper protocol over ``Target.logits``: a list of texts in, class scores out."""

    def __init__(self, target: Target, batch_size: int) -> None:
        self.target = target
        self.model = target.model
        self.batch_size = batch_size
        self.queries = 0

    def __call__(self, text_input_list: list[Any]) -> np.ndarray:
        examples = [Example(*t) if isinstance(t, tuple) else Example(str(t)) for t in text_input_list]
        self.queries += len(examples)
        encoded = self.target.encode(examples, cache=False)
        return self.target.logits(encoded, self.batch_size).softmax(-1).numpy()

    def get_grad(self, text_input: str) -> Any:
        raise NotImplementedError("gradient-based recipes are not offered")


def as_model_wrapper(target: Target, batch_size: int) -> Any:
    """A ``textattack.models.wrappers.ModelWrapper`` subclass instance around the target."""
    from bertprobe_textattack.shims import prepare

    prepare()
    from textattack.models.wrappers import ModelWrapper

    class Wrapper(TargetWrapper, ModelWrapper):
        pass

    return Wrapper(target, batch_size)


def embedding_neighbours(target: Target, k: int) -> Any:
    """A TextAttack WordEmbedding over the target's own input embeddings: whole alphabetic words only,
    with each word's ``k`` nearest neighbours by cosine (computed in chunks; passed as ``nn_matrix``,
    since TextAttack 0.3.11's None path crashes)."""
    from textattack.shared import WordEmbedding

    vocab = target.tokenizer.get_vocab()
    special = set(target.tokenizer.all_special_ids)
    words = sorted((tok.lstrip("Ġ▁"), idx) for tok, idx in vocab.items()
                   if idx not in special and not tok.startswith("##") and tok.lstrip("Ġ▁").isalpha())
    seen: dict[str, int] = {}
    for word, idx in words:
        seen.setdefault(word.lower(), idx)
    names = list(seen)
    matrix = target.model.get_input_embeddings().weight.detach().float().cpu()[list(seen.values())]
    unit = torch.nn.functional.normalize(matrix, dim=1)
    nn = torch.empty(len(names), k + 1, dtype=torch.long)
    for start in range(0, len(names), 2048):
        nn[start : start + 2048] = (unit[start : start + 2048] @ unit.T).topk(k + 1, dim=1).indices
    word2index = {w: i for i, w in enumerate(names)}
    return WordEmbedding(matrix.numpy(), word2index, dict(enumerate(names)), nn_matrix=nn.numpy())


def build_attack(key: str, wrapper: Any, target: Target, params: TextAttackParams, ctx: ProbeContext) -> Any:
    from textattack import Attack
    from textattack.constraints.pre_transformation import RepeatModification, StopwordModification
    from textattack.goal_functions import UntargetedClassification
    from textattack.search_methods import GreedyWordSwapWIR

    if key in OFFLINE:
        import textattack.attack_recipes as recipes

        return getattr(recipes, OFFLINE[key]).build(wrapper)
    goal = UntargetedClassification(wrapper)
    constraints: list[Any] = [RepeatModification(), StopwordModification()]
    if key == "embedding-swap":
        from textattack.constraints.semantics import WordEmbeddingDistance
        from textattack.transformations import WordSwapEmbedding

        embedding = embedding_neighbours(target, params.max_candidates)
        transformation = WordSwapEmbedding(max_candidates=params.max_candidates, embedding=embedding)
        constraints.append(WordEmbeddingDistance(embedding=embedding, min_cos_sim=params.min_cos_sim))
    else:
        if not params.mlm_model:
            raise ProbeError("recipe mlm-swap needs mlm_model: a local masked LM (path or model name of the run)")
        from textattack.transformations import WordSwapMaskedLM
        from transformers import AutoModelForMaskedLM, AutoTokenizer

        path = ctx.resolve_model(params.mlm_model, target.spec).path
        mlm = AutoModelForMaskedLM.from_pretrained(path, dtype=torch.float32)
        tok = AutoTokenizer.from_pretrained(path)
        transformation = WordSwapMaskedLM(method="bae", masked_language_model=mlm, tokenizer=tok,
                                          max_candidates=params.max_candidates, max_length=params.mlm_max_length)
    return Attack(goal, constraints, transformation, GreedyWordSwapWIR("delete"))


class TextAttackProbe(Probe):
    """TextAttack recipes (Morris et al. 2020); see the module docstring for the offline variants.

    Metrics: ``attack_success_rate`` (successful / attacked, attacked = not skipped),
    ``accuracy_under_attack`` (examples still right after the attack / all), ``original_accuracy``,
    ``avg_perturbed_word_pct`` (over successful attacks), ``avg_queries`` (over attacked examples),
    ``seconds_per_example``.
    """

    name = "textattack"
    description = "TextAttack attack recipes (DeepWordBug, Pruthi, input reduction; offline TextFooler/BAE-like swaps)"
    requires = frozenset({"classifier"})
    metrics = {
        "attack_success_rate": "successful attacks / attacked examples (attacked: not skipped as already wrong)",
        "accuracy_under_attack": "examples still predicted right after the attack / all sampled",
        "original_accuracy": "accuracy over the sample before the attack",
        "avg_perturbed_word_pct": "mean percentage of words changed, over successful attacks",
        "avg_queries": "mean model queries, over attacked examples",
        "seconds_per_example": "wall time per attacked example",
        "examples_attacked": "examples the attack ran on",
    }
    metric_directions = {"attack_success_rate": False, "accuracy_under_attack": True, "original_accuracy": True,
                         "avg_perturbed_word_pct": True, "avg_queries": True, "seconds_per_example": False,
                         "examples_attacked": None}
    Params = TextAttackParams
    paper = "Morris et al. 2020. TextAttack (EMNLP demos); the recipe's own paper (see the module docstring)"

    def run(self, target: Target, data: Dataset | None, params: TextAttackParams, ctx: ProbeContext) -> ProbeResult:
        assert data is not None
        key = check_recipe(params.recipe)
        from bertprobe_textattack.shims import prepare

        prepare()
        from textattack.attack_results import FailedAttackResult, SkippedAttackResult, SuccessfulAttackResult
        from textattack.shared import AttackedText

        seed = ctx.seed if params.seed is None else params.seed
        random.seed(seed)
        np.random.seed(seed % (2**32))
        torch.manual_seed(seed)
        labelled = [ex for ex in data.examples if ex.label is not None]
        order = list(range(len(labelled)))
        random.Random(seed).shuffle(order)
        chosen = [labelled[i] for i in order[: params.num_examples]]
        ids = dict(zip(map(id, data.examples), example_ids(data.examples)))
        wrapper = as_model_wrapper(target, params.batch_size)
        attack = build_attack(key, wrapper, target, params, ctx)
        if params.query_budget is not None:
            attack.goal_function.query_budget = params.query_budget
        names = target.label_names
        outcome_ids, outcomes, records = [], [], []
        began = time.perf_counter()
        for ex in ctx.progress(chosen, total=len(chosen), desc=f"textattack {key}"):
            text = ex.text if ex.text_pair is None else (ex.text, ex.text_pair)
            attacked = AttackedText(text if isinstance(text, str) else
                                                      {"premise": text[0], "hypothesis": text[1]})
            result = attack.attack(attacked, int(ex.label))
            if isinstance(result, SkippedAttackResult):
                status = "skipped"
            elif isinstance(result, SuccessfulAttackResult):
                status = "succeeded"
            elif isinstance(result, FailedAttackResult):
                status = "failed"
            else:
                status = "failed"  # maximized results do not apply to classification goals
            before, after = result.original_result.attacked_text, result.perturbed_result.attacked_text
            changed = sorted(before.all_words_diff(after)) if status == "succeeded" else []
            records.append({
                "status": status, "queries": result.perturbed_result.num_queries, "words": len(before.words),
                "changed": changed, "original": before.text, "perturbed": after.text,
                "changed_words": [after.words[i] for i in changed if i < len(after.words)],
                "label": int(ex.label), "output": int(result.perturbed_result.output),
            })
            outcome_ids.append(ids.get(id(ex), ex.id))
            outcomes.append(status)
        seconds = time.perf_counter() - began
        return self._result(records, outcome_ids, outcomes, names, key, seconds, params)

    def _result(self, records: list[dict[str, Any]], outcome_ids: list[str], outcomes: list[str], names: list[str],
                key: str, seconds: float, params: TextAttackParams) -> ProbeResult:
        result = ProbeResult(probe=self.name)
        n = len(records)
        attacked = [r for r in records if r["status"] != "skipped"]
        succeeded = [r for r in records if r["status"] == "succeeded"]
        result.outcomes.append(Outcomes.from_values("attack_outcome", outcome_ids, [CODES[o] for o in outcomes], "categorical"))
        result.outcomes.append(Outcomes.from_values("correct_under_attack", outcome_ids, [o == "failed" for o in outcomes]))
        hit = [(i, o == "succeeded") for i, o in zip(outcome_ids, outcomes) if o != "skipped"]
        result.outcomes.append(Outcomes.from_values("attack_succeeded", [i for i, _ in hit], [h for _, h in hit]))
        result.details["outcome_codes"] = {str(v): k for k, v in CODES.items()}
        result.add_metric("original_accuracy", len(attacked) / n, True, "examples right before the attack")
        result.add_metric("attack_success_rate", len(succeeded) / len(attacked) if attacked else 0.0, False,
                          "successful attacks / attacked examples (right before the attack)", outcome="attack_succeeded")
        result.add_metric("accuracy_under_attack", (len(attacked) - len(succeeded)) / n, True,
                          "examples still right after the attack", outcome="correct_under_attack")
        result.add_metric("avg_perturbed_word_pct", 100 * float(np.mean([len(r["changed"]) / max(1, r["words"]) for r in succeeded]))
                          if succeeded else None, True, "words changed by a successful attack, percent")
        result.add_metric("avg_queries", float(np.mean([r["queries"] for r in attacked])) if attacked else None, True,
                          "model queries per attacked example")
        result.add_metric("seconds_per_example", seconds / n, False, kind="cost")
        result.add_metric("examples_attacked", float(len(attacked)), kind="count")
        result.details["recipe"] = key
        result.details["summary"] = {
            "recipe": key, "attacked": f"{len(attacked)} of {n} (the rest were already misclassified)",
            "succeeded": f"{len(succeeded)} ({len(succeeded) / max(1, len(attacked)):.0%})",
        }
        result.details["figures"] = [{"kind": "bars", "title": f"{key}: outcome of each attacked example",
                                      "data": {"labels": ["succeeded", "failed", "skipped"],
                                               "series": [{"name": "examples", "values": [outcomes.count(s) for s in
                                                                                          ("succeeded", "failed", "skipped")]}]},
                                      "axes": {"y": "examples"}}]
        for r in succeeded[: params.findings]:
            result.findings.append(Finding(
                title=f"{key}: {len(r['changed'])} of {r['words']} words changed the label",
                input=r["original"], perturbed=r["perturbed"], expected=names[r["label"]] if names else str(r["label"]),
                observed=names[r["output"]] if names else str(r["output"]),
                extra={"kind": "textattack", "highlight": r["changed_words"], "queries": r["queries"]},
            ))
        return result


@hookimpl
def bertprobe_register_probes(registry: Any) -> None:
    registry.add(TextAttackProbe)
