"""The slices probe: exact tests and Benjamini-Hochberg, a planted slice found first, no false flags on
random slices, user regex and column slices."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from bertprobe.data import Dataset, Example
from bertprobe.errors import ProbeError
from bertprobe.model.predictions import Predictions
from bertprobe.probe import ProbeContext
from bertprobe.probes.slices.probe import SlicesParams, SlicesProbe, benjamini_hochberg, fisher_exact, flag_slices
from bertprobe.tasks import SingleLabelClassification


def test_fisher_and_benjamini_hochberg_match_known_values():
    assert fisher_exact(3, 1, 1, 3) == pytest.approx(0.485714, abs=1e-6)  # Fisher's tea-tasting table
    assert fisher_exact(8, 2, 1, 5) == pytest.approx(0.034965, abs=1e-6)
    assert fisher_exact(5, 5, 5, 5) == pytest.approx(1.0)
    assert benjamini_hochberg([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.02, 0.04, 0.04, 0.02])


class Canned:
    """A stand-in target: predictions are given; lengths are word counts."""

    label_names = ["negative", "positive"]
    max_length = 128
    task = SingleLabelClassification(label_names=("negative", "positive"))

    def __init__(self, pred: list[int]) -> None:
        self.pred = pred

    def encode(self, examples):
        from bertprobe.model.target import Encoded

        return Encoded([{} for _ in examples], [len(ex.text.split()) + 2 for ex in examples])


def _run(examples: list[Example], pred: list[int], **params):
    target = Canned(pred)
    logits = torch.nn.functional.one_hot(torch.tensor(pred), 2).float()
    ctx = ProbeContext(seed=3, predictions=lambda t, d, batch_size=None: Predictions(logits, 0.0))
    return SlicesProbe().run(target, Dataset(examples), SlicesParams(**params), ctx)  # type: ignore[arg-type]


def _data(n: int = 600, seed: int = 0, error_rate: float = 0.1):
    rng = random.Random(seed)
    words = "good bad plot acting music story scene cast script ending".split()
    examples, pred = [], []
    for i in range(n):
        label = rng.randint(0, 1)
        text = " ".join(rng.choice(words) for _ in range(rng.randint(3, 12)))
        examples.append(Example(text, label=label, id=str(i), meta={"source": rng.choice(["web", "app"])}))
        pred.append(label if rng.random() > error_rate else 1 - label)
    return examples, pred


def test_both_paths_flag_slices_by_one_rule():
    """flag_slices (shared by class and scored slices): BH-adjusted p below alpha, a drop of at least min_drop and
    min_size units; flagged rows first, then by drop. p adjusted by hand: 0.001*4/1, 0.02*4/3, 0.01*4/2, 0.5*4/4."""
    rows = [{"name": "small", "size": 5, "drop": 0.30, "p": 0.001},
            {"name": "shallow", "size": 50, "drop": 0.02, "p": 0.02},
            {"name": "weak", "size": 40, "drop": 0.10, "p": 0.01},
            {"name": "noise", "size": 60, "drop": 0.20, "p": 0.5}]
    flagged = flag_slices(rows, SlicesParams(min_drop=0.05, alpha=0.05, min_size=20))
    assert [r["name"] for r in flagged] == ["weak"]
    assert [r["name"] for r in rows] == ["weak", "small", "noise", "shallow"]
    assert {r["name"]: r["p_adjusted"] for r in rows} == pytest.approx(
        {"small": 0.004, "weak": 0.02, "shallow": 0.02 * 4 / 3, "noise": 0.5})
    assert flag_slices([], SlicesParams()) == []


def test_a_planted_slice_is_flagged_first_by_drop():
    examples, pred = _data()
    marked = random.Random(1).sample(range(len(examples)), 60)
    for i in marked:  # a rare marker word, and the model gets these wrong
        examples[i] = Example(examples[i].text + " zorblat", label=examples[i].label, id=examples[i].id, meta=examples[i].meta)
        pred[i] = 1 - int(examples[i].label)
    result = _run(examples, pred, vocabulary_slices=20)
    first = result.details["slices"][0]
    assert first["name"] == "contains 'zorblat'" and first["flagged"] and first["size"] == 60
    assert first["accuracy"] == 0 and first["p_adjusted"] < 1e-6
    assert result.value("slices_flagged") >= 1 and result.value("max_slice_drop") == pytest.approx(first["drop"])
    assert result.findings[0].extra["slice"] == "contains 'zorblat'"
    assert "zorblat" in result.details["key_finding"]
    # each flagged slice's own outcomes, which a matrix pairs with the baseline's on the same examples
    subsets = {o.name: o for o in result.outcomes if o.subset_of}
    assert len(subsets) == result.value("slices_flagged")
    zorblat = subsets["accuracy on 'contains 'zorblat''"]
    assert (zorblat.subset_of, zorblat.counted_in, first["outcome"]) == ("correct", "slices_flagged", zorblat.name)
    assert sorted(zorblat.ids) == sorted(examples[i].id for i in marked) and zorblat.values == [0.0] * 60


def test_random_slices_on_random_errors_are_not_flagged():
    """Errors independent of everything: 60 random halves of the data per run, 5 runs; unadjusted, some
    slices pass p < 0.05 by chance; adjusted across slices, none is flagged."""
    flags = raw = 0
    for seed in range(5):
        examples, pred = _data(seed=seed, error_rate=0.2)
        rng = random.Random(seed)
        columns = [f"c{k}" for k in range(60)]
        examples = [Example(ex.text, label=ex.label, id=ex.id, meta={c: rng.choice("xy") for c in columns})
                    for ex in examples]
        result = _run(examples, pred, slice_by=tuple(columns), vocabulary_slices=0)
        random_rows = [s for s in result.details["slices"] if s["name"][0] == "c"]
        assert len(random_rows) == 120
        flags += sum(1 for s in random_rows if s["flagged"])
        raw += sum(1 for s in random_rows if s["p"] < 0.05)
    assert raw > 0 and flags == 0


def test_column_slices_and_a_missing_column():
    examples, pred = _data(n=200)
    result = _run(examples, pred, slice_by=("source",), vocabulary_slices=0)
    names = {s["name"] for s in result.details["slices"]}
    assert {"source = web", "source = app"} <= names
    web = next(s for s in result.details["slices"] if s["name"] == "source = web")
    mask = np.array([ex.meta["source"] == "web" for ex in examples])
    correct = np.array([p == ex.label for p, ex in zip(pred, examples)], dtype=float)
    assert web["size"] == int(mask.sum()) and web["accuracy"] == pytest.approx(correct[mask].mean())
    with pytest.raises(ProbeError, match="no column 'region'; extra columns: source"):
        _run(examples, pred, slice_by=("region",))


def test_extra_columns_of_a_data_file_reach_the_examples(tmp_path):
    from bertprobe.data import DataSpec, load_table

    path = tmp_path / "d.csv"
    path.write_text("review,sentiment,shop\ngreat,1,north\nawful,0,south\n", encoding="utf-8")
    data = load_table(DataSpec(path=str(path), text="review", label="sentiment"))
    assert [ex.meta for ex in data.examples] == [{"shop": "north"}, {"shop": "south"}]


def test_recall_slices_count_only_the_gold_positive_examples():
    examples, pred = _data(n=600, error_rate=0.05)
    rng = random.Random(2)
    marked = rng.sample(range(len(examples)), 120)
    positives = 0
    for i in marked:
        examples[i] = Example(examples[i].text + " zorblat", label=examples[i].label, id=examples[i].id)
        if examples[i].label == 1:  # the model misses every positive with the marker, keeps the negatives right
            pred[i], positives = 0, positives + 1
        else:
            pred[i] = 0
    recall = _run(examples, pred, metric="recall", positive="positive", vocabulary_slices=20)
    first = recall.details["slices"][0]
    assert recall.details["metric"] == "recall" and first["name"] == "contains 'zorblat'"
    assert first["size"] == positives and first["accuracy"] == 0 and first["flagged"]
    gold = np.array([ex.label for ex in examples])
    assert recall.value("recall") == pytest.approx(np.mean(np.array(pred)[gold == 1] == 1))
    precision = _run(examples, pred, metric="precision", vocabulary_slices=20)  # marked examples are never predicted positive
    assert "contains 'zorblat'" not in {s["name"] for s in precision.details["slices"]}
    with pytest.raises(ProbeError, match="positive 'upbeat' is not a class of the model; classes: negative, positive; map it with --label-map upbeat=CLASS"):
        _run(examples, pred, metric="recall", positive="upbeat")


@pytest.mark.parametrize("hook", ["slice_units", "old_units", "slice_scores"])
def test_a_task_written_for_the_old_slice_hooks_is_refused_at_registration_and_told_how_to_move(hook: str) -> None:
    """A task's own slice units are a section of the slices probe now (``probes/slices/``): a plugin task still
    defining ``slice_units`` (either signature) or ``slice_scores`` is refused when it registers, in one line that
    names the section hook."""
    from dataclasses import dataclass
    from typing import ClassVar

    from bertprobe.errors import PluginError
    from bertprobe.hookmarkers import hookimpl
    from bertprobe.plugins import build_plugins

    @dataclass(frozen=True)
    class OldTask(SingleLabelClassification):
        name: ClassVar[str] = "old-slices"

    methods = {"slice_units": lambda self, target, data, params, ctx: None,
               "old_units": lambda self, data, logits, params: None,
               "slice_scores": lambda self, data, answers: None}
    method = "slice_scores" if hook == "slice_scores" else "slice_units"
    setattr(OldTask, method, methods[hook])

    class OldPlugin:
        @hookimpl
        def bertprobe_register_tasks(self, registry):
            registry.add(OldTask)

    with pytest.raises(PluginError, match=rf"^task 'old-slices' from plugin '.*' defines {method}, which bertprobe no "
                                          r"longer calls: register a section of probe 'slices' for the task instead "
                                          r"\(registry.add\(PROBE, SECTION, task='old-slices'\) in a "
                                          r"bertprobe_register_sections hook") as caught:
        build_plugins(extra=[OldPlugin()], entry_points=False)
    assert "\n" not in str(caught.value)
