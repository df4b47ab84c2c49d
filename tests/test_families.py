"""Every probe that touches model internals runs on every family the harness loads."""

from __future__ import annotations

import pytest

from bertprobe.data import Dataset, Example
from bertprobe.probe import ProbeContext
from bertprobe.probes.attention_audit import AttentionAuditProbe, AttentionParams
from bertprobe.probes.head_pruning.params import HeadParams
from bertprobe.probes.head_pruning.probe import HeadPruningProbe
from bertprobe.probes.universal_trigger.probe import TriggerParams, UniversalTriggerProbe
from bertprobe.testing import sentiment_examples, tiny_target

FAMILIES = ["bert", "roberta", "distilbert", "albert", "electra", "deberta-v2"]


@pytest.fixture(scope="module", params=FAMILIES)
def target(request, tmp_path_factory):
    return tiny_target(tmp_path_factory.mktemp(request.param), arch=request.param, layers=2, heads=4)


def data() -> Dataset:
    return Dataset([Example(t, label=y) for t, y in sentiment_examples(24, 11)])


def test_trigger_search_runs(target):
    params = TriggerParams(target_label="positive", candidates=4, iterations=1, batch_size=8)
    result = UniversalTriggerProbe().run(target, data(), params, ProbeContext())
    assert len(result.details["trigger_ids"]) == 3 and result.value("forward_passes") > 0
    assert 0 <= result.value("accuracy_after") <= 1


def test_head_pruning_runs(target):
    params = HeadParams(bootstrap=0, step=0.5, mode="uniform")
    result = HeadPruningProbe().run(target, data(), params, ProbeContext())
    assert len(result.details["ablation"]) == 8 and len(result.details["importance"]) == 2
    assert result.details["pruning_curve"][-1]["heads_pruned"] == 8


def test_attention_audit_runs(target):
    result = AttentionAuditProbe().run(target, data(), AttentionParams(similarity_examples=4, clusters=2), ProbeContext())
    assert len(result.details["heads"]) == 8 and result.details["examples"] == 24
    assert target.model.config._attn_implementation != "eager" or target.model.config.model_type.startswith("deberta")
