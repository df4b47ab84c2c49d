"""The textattack plugin: recipe checks, the batched model wrapper, and attacks on the SST-2 fixture.

Runs in the plugin's own environment (install.sh), never in the core test command.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bertprobe_textattack.probe import TextAttackParams, TextAttackProbe, as_model_wrapper, check_recipe  # noqa: E402

from bertprobe import ModelSpec, load_target  # noqa: E402
from bertprobe.data import Dataset, Example  # noqa: E402
from bertprobe.errors import ProbeError  # noqa: E402
from bertprobe.probe import ProbeContext  # noqa: E402
from bertprobe.testing import tiny_target  # noqa: E402

SHARED = Path(os.environ.get("BERTPROBE_SHARED", Path(__file__).resolve().parents[4] / "shared"))
MODEL = SHARED / "models" / "minilm-l6-sst2"
DEV = SHARED / "data" / "sst2" / "dev.tsv"


def test_network_recipes_fail_in_one_line_naming_the_download():
    with pytest.raises(ProbeError, match="Universal Sentence Encoder.*offline recipes: deepwordbug"):
        check_recipe("TextFoolerJin2019")
    with pytest.raises(ProbeError, match="unknown recipe 'nope'"):
        check_recipe("nope")
    assert check_recipe("DeepWordBugGao2018") == "deepwordbug"


def test_wrapper_batches_through_the_target_and_counts_queries(tmp_path):
    target = tiny_target(tmp_path / "m")
    wrapper = as_model_wrapper(target, batch_size=2)
    texts = ["the movie was good", "bad", "a very long and boring film was this", "fun"]
    probs = wrapper(texts)
    assert probs.shape == (4, 2) and abs(probs.sum(1) - 1).max() < 1e-5
    expected = target.predict([Example(t) for t in texts])
    assert probs.argmax(1).tolist() == expected
    assert wrapper.queries == 4
    assert not target.encode_cache  # queries seen once never fill a run's cache


def _dev(n: int) -> Dataset:
    rows = [line.rstrip("\n").split("\t") for line in DEV.read_text(encoding="utf-8").splitlines()[1:]]
    return Dataset([Example(r[0].strip(), label=int(r[1])) for r in rows[:n]], name="sst2-dev")


@pytest.mark.skipif(not (MODEL.is_dir() and DEV.is_file()), reason="../shared SST-2 fixture not present")
# embedding-swap keeps swaps with cosine >= 0.5 in the model's own embeddings: meaning-preserving
# (designed -> design, instead -> rather) and so weaker; at 0.3 it reaches 0.88 but swaps antonyms (lacks -> provides)
@pytest.mark.parametrize("recipe, least", [("deepwordbug", 0.3), ("embedding-swap", 0.1)])
def test_attacks_on_the_fixture(recipe, least):
    target = load_target(ModelSpec(path=str(MODEL), device="cpu"))
    result = TextAttackProbe().run(target, _dev(40), TextAttackParams(recipe=recipe, num_examples=8, query_budget=300),
                                   ProbeContext(seed=3))
    success = result.value("attack_success_rate")
    assert result.value("original_accuracy") >= 0.6
    assert least <= success <= 1.0  # an undefended SST-2 model falls to both
    assert result.value("accuracy_under_attack") < result.value("original_accuracy")
    assert 0 < result.value("avg_perturbed_word_pct") < 60
    assert result.value("avg_queries") > 1
    outcome = {o.name: o for o in result.outcomes}["attack_outcome"]
    assert len(outcome.values) == 8 and set(outcome.values) <= {0.0, 1.0, 2.0}  # skipped, failed, succeeded
    succeeded = {o.name: o for o in result.outcomes}["attack_succeeded"]
    assert sum(succeeded.values) / len(succeeded.values) == pytest.approx(success)
    finding = result.findings[0]
    assert finding.perturbed != finding.input and finding.expected != finding.observed
    assert finding.extra["highlight"] and all(w in finding.perturbed for w in finding.extra["highlight"])
