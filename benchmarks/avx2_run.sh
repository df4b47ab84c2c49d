#!/usr/bin/env bash
# Any command with torch and ONNX Runtime held to their AVX2 kernels on an AVX-512 machine (as test_command_avx2.sh
# does for the test command), with its wall time: what a suite costs on an AVX2-only CPU.
#   benchmarks/avx2_run.sh python -m bertprobe run suites/deploy-onnx.yaml --data ../shared/data/sst2/dev.tsv ...
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/ort_avx2_prepare.sh" >/dev/null
cd "$here/.."
start=$(date +%s)
status=0
ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 ORT_AVX2_SHIM=1 \
  LD_PRELOAD="$dir/cpuid_avx2.so" PYTHONPATH="$dir:${PYTHONPATH:-$PWD}" "$@" || status=$?
echo "== wall time: $(( $(date +%s) - start )) s on AVX2 kernels (exit $status); load: $(cut -d' ' -f1-3 /proc/loadavg)"
exit 0
