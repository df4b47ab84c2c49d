"""A suite written for another kind of model is refused in one line before anything loads (#65 item 1): a reader
given a classification suite once decoded 872 questions for 25 minutes, then failed on `accuracy missing`."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from bertprobe.cli import main
from bertprobe.testing import save_tiny_model

SUITE = """suite: classes
model: {{path: '{model}', device: cpu}}
data: {{path: '{data}'}}
probes:
  - probe: accuracy
    expect:
      accuracy: {{min: 0.85}}
  - probe: universal-trigger
    params: {{target_label: positive, length: 1, candidates: 2, iterations: 1}}
  - probe: calibration
report: {{dir: '{reports}'}}
"""


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("qa"), task="question-answering")


def test_a_reader_given_a_classification_suite_is_refused_in_one_line_by_validate_and_run(reader: Path, tmp_path: Path,
                                                                                         sst_tsv: Path) -> None:
    suite = tmp_path / "classes.yaml"
    suite.write_text(SUITE.format(model=reader, data=sst_tsv, reports=tmp_path / "reports"))
    for command in ("validate", "run"):
        result = CliRunner().invoke(main, [command, str(suite)])
        assert result.exit_code == 2, result.output
        line = next(x for x in result.output.splitlines() if "question-answering model, but this suite" in x)
        assert "expect.accuracy of accuracy, which accuracy never writes for them (it writes exact_match, f1" in line
        assert "params.target_label of universal-trigger names class 'positive', and they have no classes" in line
    assert not (tmp_path / "reports").exists() or not any((tmp_path / "reports").iterdir())


def test_the_same_suite_fits_a_classifier(tiny_clf_dir: Path, tmp_path: Path, sst_tsv: Path) -> None:
    suite = tmp_path / "classes.yaml"
    suite.write_text(SUITE.format(model=tiny_clf_dir, data=sst_tsv, reports=tmp_path / "reports"))
    result = CliRunner().invoke(main, ["validate", str(suite)])
    assert result.exit_code == 0, result.output


def test_a_classifier_given_the_retrieval_suite_is_refused_before_it_runs(tiny_clf_dir: Path, sst_tsv: Path) -> None:
    """The other way round: the probe's own code (classes) never writes a section's metric (nDCG@10)."""
    suite = Path(__file__).resolve().parents[1] / "suites" / "retrieval.yaml"
    result = CliRunner().invoke(main, ["validate", str(suite), "--model", str(tiny_clf_dir), "--data", str(sst_tsv)])
    assert result.exit_code == 2, result.output
    assert "expect.ndcg@10 of accuracy, which accuracy never writes for them (it writes accuracy, accuracy_*" \
        in result.output
