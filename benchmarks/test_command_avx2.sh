#!/usr/bin/env bash
# The README's test command with torch and ONNX Runtime both held to their AVX2 kernels, on an AVX-512 machine:
# what the command costs on an AVX2-only CPU (#65: a quiet AVX2-only EPYC took 769 s where this machine took 583 s).
# Torch by its own switches; ONNX Runtime by the patched copy ort_avx2_prepare.sh makes. Prints the wall time.
#
# Usage: benchmarks/test_command_avx2.sh [pytest options]     (default: the README's `-q`)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/ort_avx2_prepare.sh"
cd "$here/.."
echo "== the README's test command, torch and ONNX Runtime on AVX2 kernels; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
start=$(date +%s)
status=0
ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 ORT_AVX2_SHIM=1 \
  LD_PRELOAD="$dir/cpuid_avx2.so" PYTHONPATH="$dir:${PYTHONPATH:-$PWD}" python -m pytest "${@:--q}" || status=$?
echo "== wall time: $(( $(date +%s) - start )) s on AVX2 kernels (exit $status); load after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $status
