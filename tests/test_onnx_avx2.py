"""benchmarks/onnx_avx2.py (issue #54, the AVX2 path of ONNX Runtime int8): its helpers without an emulator, and
the emulator's refusal of AVX-512 (the evidence that an emulated run used no AVX-512 kernel) where qemu-user is."""

from __future__ import annotations

import importlib.util
import platform
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
_spec = importlib.util.spec_from_file_location("onnx_avx2", BENCHMARKS / "onnx_avx2.py")
onnx_avx2 = importlib.util.module_from_spec(_spec)  # loaded by path: benchmarks/ stays off sys.path (its
_spec.loader.exec_module(onnx_avx2)  # textattack.py, syntax.py... would shadow packages)


def test_scatter_puts_batch_rows_back_in_input_order() -> None:
    plans = [[2, 0], [3], [1]]
    outputs = [np.array([[2.0, -2.0], [0.0, 0.5]]), np.array([[3.0, 3.5]]), np.array([[1.0, 1.5]])]
    got = onnx_avx2.scatter(plans, outputs, 5)
    want = np.array([[0.0, 0.5], [1.0, 1.5], [2.0, -2.0], [3.0, 3.5], [np.nan, np.nan]], dtype=np.float32)
    np.testing.assert_array_equal(got, want)  # row 4 was in no batch: NaN, left out of the comparisons
    with pytest.raises(ValueError, match="2 batches planned, 1 outputs"):
        onnx_avx2.scatter(plans[:2], outputs[:1], 5)
    with pytest.raises(ValueError, match="a batch of 2 examples gave 1 rows"):
        onnx_avx2.scatter([[0, 1]], [np.zeros((1, 2))], 2)


def test_agreement_counts_accuracy_and_equal_predictions() -> None:
    preds, reference, gold = np.array([1, 0, 1, 1, 0]), np.array([1, 1, 1, 0, 0]), np.array([1, 0, 0, 1, 1])
    got = onnx_avx2.agreement(preds, reference, gold)
    assert got == {"n": 5, "accuracy": pytest.approx(3 / 5), "equal": 3, "share": pytest.approx(3 / 5)}


def test_report_compares_each_path_with_torch_and_with_native() -> None:
    gold = np.array([1, 0, 1, 0])
    torch_fp32 = np.array([[0.0, 1.0], [1.0, 0.0], [0.0, 1.0], [0.2, 0.1]], dtype=np.float32)  # predicts 1 0 1 0
    native = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 0.0], [0.1, 0.2]], dtype=np.float32)  # 1 0 0 1
    emulated = native.copy()
    emulated[2] = [0.0, 1.0]  # flips back to 1: equal to torch again, unequal to native
    emulated[1] = [1.0, 0.25]  # same prediction, another logit
    emulated[3] = np.nan  # not run emulated: left out
    arrays = {"gold": gold, "torch fp32": torch_fp32, "torch fp32 avx2": torch_fp32 + 1e-6,
              "ORT int8 native": native, "ORT int8 emulated": emulated}
    text = onnx_avx2.report(arrays, "Haswell", "AVX-512 VNNI")
    assert "max |logit difference| 1e-06, 4 of 4 predictions equal" in text.splitlines()[1]
    rows = {line.split("  ")[0] + "|" + line[35:60].strip(): line.split()
            for line in text.splitlines() if line.startswith("ORT")}
    native_row, emulated_row = rows["ORT int8|AVX-512 VNNI (native)"], rows["ORT int8|AVX2 (Haswell, emulated)"]
    # examples, max |dlogit| vs native, rows bitwise equal, accuracy, equal to torch (n, share), equal to native
    assert native_row[-10:] == ["4", "0", "4", "0.5000", "2", "(", "50.0%)", "4", "of", "4"]
    assert emulated_row[-9:] == ["3", "1", "1", "1.0000", "3", "(100.0%)", "2", "of", "3"]


def test_missing_emulator_is_one_line_with_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        onnx_avx2.emulator("/nonexistent/qemu-x86_64")
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "apt-get install qemu-user" in err and "--qemu" in err


def test_emulated_command_and_probe_status() -> None:
    assert onnx_avx2.emulated("/usr/bin/qemu-x86_64", "Haswell", "/py", "s.py") == [
        "/usr/bin/qemu-x86_64", "-cpu", "Haswell", "/py", "s.py"]
    assert onnx_avx2.probe_status(0) == "ran"
    assert onnx_avx2.probe_status(-signal.SIGILL).startswith("SIGILL")
    assert onnx_avx2.probe_status(1) == "failed (exit 1)"


@pytest.mark.emulated
@pytest.mark.skipif(shutil.which("qemu-x86_64") is None, reason="qemu-user (qemu-x86_64) is not installed")
@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="runs this x86-64 interpreter under qemu")
def test_haswell_emulator_runs_avx2_and_refuses_avx512_vnni() -> None:
    """Under qemu -cpu Haswell cpuid shows AVX2 without AVX-512, the AVX2 multiply of MLAS's u8s8 kernel runs, and
    the AVX-512 VNNI one dies of SIGILL: an emulated ONNX Runtime that finishes used no AVX-512 kernel."""
    qemu, python, script = shutil.which("qemu-x86_64"), str(Path(sys.executable).resolve()), str(BENCHMARKS / "onnx_avx2.py")
    ended = {name: subprocess.run(onnx_avx2.emulated(qemu, "Haswell", python, script, "--probe", code),
                                  capture_output=True, timeout=120).returncode
             for name, code in onnx_avx2.PROBES.items()}
    assert ended == {"AVX2 vpmaddubsw ymm": 0, "AVX-512 VNNI vpdpbusd zmm": -signal.SIGILL}
    seen = subprocess.run(onnx_avx2.emulated(qemu, "Haswell", python, script, "--features"), capture_output=True,
                          text=True, timeout=120).stdout
    assert "AVX2 yes" in seen and "AVX512F no" in seen and "AVX512VNNI no" in seen
