"""The shipped suites against the real fixtures in ../shared (skipped when they are absent)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from conftest import REPO, SST2_DEV, SST2_MODEL

from bertprobe.cli import main

pytestmark = pytest.mark.integration

needs_sst2 = pytest.mark.skipif(
    not (SST2_MODEL.is_dir() and SST2_DEV.is_file()), reason="../shared SST-2 fixture model/data not present"
)


@needs_sst2
def test_sst2_suite_on_fixture(tmp_path, monkeypatch):
    monkeypatch.setenv("BERTPROBE_SST2_MODEL", str(SST2_MODEL))
    monkeypatch.setenv("BERTPROBE_SST2_DATA", str(SST2_DEV))
    monkeypatch.setenv("BERTPROBE_DEVICE", "cpu")
    result = CliRunner().invoke(main, ["run", str(REPO / "suites" / "sst2.yaml"), "--out", str(tmp_path), "--only", "accuracy"])
    assert result.exit_code == 0, result.output
    (run_dir,) = tmp_path.glob("sst2-*")
    report = json.loads((run_dir / "report.json").read_text())
    acc = report["probes"][0]
    # The fixture's README: SST-2 dev accuracy 0.892 in fp32; we load the fp16 weights into fp32.
    assert acc["metrics"]["examples"] == 872
    assert acc["metrics"]["accuracy"] == pytest.approx(0.892, abs=0.005)
    assert report["dtype"] == "float32"
