#!/usr/bin/env bash
# ONNX Runtime int8 against torch fp32, both on their AVX2 kernels, at this CPU's speed, on an AVX-512 machine.
#
# Torch is held to AVX2 by its own switches (ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2
# MKL_ENABLE_INSTRUCTIONS=AVX2). ONNX Runtime has none: MLAS picks its kernels from `cpuid` and `xgetbv`
# (onnxruntime/core/mlas/lib/platform.cpp). So this script copies the installed onnxruntime package to a
# scratch folder, overwrites every `cpuid` (0f a2) and `xgetbv` (0f 01 d0) of its native library (the sites
# objdump lists) with `int3` plus `nop` padding, and preloads benchmarks/cpuid_avx2.c, whose SIGTRAP handler
# answers them as an AVX2-only CPU would (no AVX-512 or AVX-VNNI bit in cpuid leaf 7, no AVX-512 state in
# XCR0). MLAS then takes its AVX2 kernels (MlasGemmU8S8KernelAvx2: vpmaddubsw), which run natively.
# Then benchmarks/onnx_builds.py runs twice, interleaved builds each time: (1) torch and ONNX Runtime on AVX2,
# (2) the untouched install on this CPU's own kernels (AVX-512 VNNI), the reference.
#
# A KVM guest without AVX-512 would be the other route; on this project's machine /dev/kvm is kvm_pvm (a
# PVM host: guests need a PVM-enabled kernel), and a stock kernel (Debian 6.1) hangs before its first line.
#
# Usage: benchmarks/onnx_avx2_speed.sh [onnx_builds.py options, e.g. --threads 2 --rounds 3 --limit 872]
#        ORT_AVX2_SCRIPT=benchmarks/onnx_int8_ceiling.py benchmarks/onnx_avx2_speed.sh [its options]: another
#        benchmark run the same two ways (the int8 GEMM alone, where int8's time goes, other int8 graphs)
# Needs: a C compiler, binutils (objdump), the [onnx] extra. Scratch: $ORT_AVX2_DIR (default /tmp/ort-avx2).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/ort_avx2_prepare.sh"
cd "$here/.."
echo "== AVX2: torch held by its switches, ONNX Runtime by the patched cpuid/xgetbv"
ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 ORT_AVX2_SHIM=1 \
  LD_PRELOAD="$dir/cpuid_avx2.so" PYTHONPATH="$dir:${PYTHONPATH:-$PWD}" python "${ORT_AVX2_SCRIPT:-benchmarks/onnx_builds.py}" "$@"
echo "== this CPU's own kernels (the untouched onnxruntime), the reference"
python "${ORT_AVX2_SCRIPT:-benchmarks/onnx_builds.py}" "$@"
