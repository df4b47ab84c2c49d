#!/usr/bin/env bash
# Prepare an AVX2-only ONNX Runtime on an AVX-512 machine (sourced by onnx_avx2_speed.sh and test_command_avx2.sh):
# copies the installed onnxruntime package to $ORT_AVX2_DIR (default /tmp/ort-avx2), overwrites every cpuid and
# xgetbv of its native library with int3 + nop padding, and builds benchmarks/cpuid_avx2.c, whose SIGTRAP handler
# answers them as an AVX2-only CPU would. Afterwards: LD_PRELOAD="$dir/cpuid_avx2.so" PYTHONPATH="$dir:..." runs it,
# and ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 hold torch to AVX2.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="${ORT_AVX2_DIR:-/tmp/ort-avx2}"
mkdir -p "$dir"
cc -O2 -shared -fPIC -Wall -o "$dir/cpuid_avx2.so" "$here/cpuid_avx2.c"
src="$(python -c 'import onnxruntime, os; print(os.path.dirname(onnxruntime.__file__))')"
rm -rf "$dir/onnxruntime" && cp -r "$src" "$dir/onnxruntime"
lib="$(ls "$dir"/onnxruntime/capi/onnxruntime_pybind11_state*.so)"
objdump -d --no-show-raw-insn "$lib" | grep -E '^ *[0-9a-f]+:\s+(cpuid|xgetbv)\s*$' > "$dir/sites.txt" || true
python - "$lib" "$dir/sites.txt" <<'PY'
"""Overwrite each listed cpuid/xgetbv with int3 + nop padding (file offset = address in the executable
segment, checked against the segment table; the bytes are checked before they are changed)."""
import subprocess
import sys

lib, sites = sys.argv[1], sys.argv[2]
loads = []  # (vaddr, offset, filesz) of the LOAD segments
for line in subprocess.run(["readelf", "-lW", lib], capture_output=True, text=True, check=True).stdout.splitlines():
    f = line.split()
    if f and f[0] == "LOAD":
        loads.append((int(f[2], 16), int(f[1], 16), int(f[4], 16)))
code = bytearray(open(lib, "rb").read())
done = {"cpuid": 0, "xgetbv": 0}
for line in open(sites):
    addr, insn = line.split(":")[0].strip(), line.split()[-1]
    vaddr = int(addr, 16)
    off = next(o + vaddr - v for v, o, n in loads if v <= vaddr < v + n)
    want, new = {"cpuid": (b"\x0f\xa2", b"\xcc\x90"), "xgetbv": (b"\x0f\x01\xd0", b"\xcc\x90\x90")}[insn]
    if bytes(code[off:off + len(want)]) != want:
        sys.exit(f"{lib}: {insn} expected at {addr}, found {code[off:off + len(want)].hex()}")
    code[off:off + len(want)] = new
    done[insn] += 1
open(lib, "wb").write(code)
print(f"patched {done['cpuid']} cpuid and {done['xgetbv']} xgetbv sites in {lib}")
PY
