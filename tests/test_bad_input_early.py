"""Bad input refused before anything runs, in one line naming it and its fix (#65 item 7): a truncated or empty
.onnx graph (once ONNX Runtime's raw protobuf error, in an aborted run folder), a JSON object that is no data, and
a malformed .json file (once told about .jsonl)."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from bertprobe.cli import main


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.fixture
def graph_folder(tmp_path: Path, tiny_clf_dir: Path) -> Path:
    folder = tmp_path / "build"
    folder.mkdir()
    for file in tiny_clf_dir.iterdir():
        if file.suffix != ".safetensors":
            shutil.copy(file, folder / file.name)
    return folder


@pytest.mark.parametrize(("content", "says"), [(b"", "is empty (0 bytes)"),
                                                (random.Random(0).randbytes(5000), "is not a readable ONNX graph")],
                         ids=["empty", "truncated"])
def test_a_broken_onnx_graph_is_refused_by_validate_and_by_run_before_a_run_folder(
        suite_factory, graph_folder: Path, tmp_path: Path, content: bytes, says: str) -> None:
    pytest.importorskip("onnx")
    (graph_folder / "model.onnx").write_bytes(content)
    suite = suite_factory()
    for command in ("validate", "run"):
        result = invoke(command, str(suite), "--model", str(graph_folder / "model.onnx"))
        assert result.exit_code == 2, result.output
        assert says in result.output and "export the model again" in result.output
        assert "Traceback" not in result.output
    assert not (tmp_path / "reports").exists() or not any((tmp_path / "reports").iterdir())


def test_a_json_object_that_is_no_data_gets_advice_on_data_not_on_columns(suite_factory, tmp_path: Path) -> None:
    data = tmp_path / "notes.json"
    data.write_text('{"version": 2, "notes": "x"}')
    result = invoke("validate", str(suite_factory()), "--data", str(data))
    assert result.exit_code == 2
    assert "holds one JSON object (keys: version, notes), which is neither rows nor SQuAD JSON" in result.output
    assert "text column" not in result.output


def test_a_malformed_json_file_is_told_what_a_json_file_holds(suite_factory, tmp_path: Path) -> None:
    data = tmp_path / "rows.json"
    data.write_text('[{"sentence": "good", "label": 1},\n {"sentence": "bad" "label": 0}]')
    result = invoke("validate", str(suite_factory()), "--data", str(data))
    assert result.exit_code == 2
    assert "a .json file holds one JSON document" in result.output and ".jsonl file holds" not in result.output
