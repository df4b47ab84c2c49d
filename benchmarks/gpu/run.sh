#!/usr/bin/env bash
# Every GPU figure the README's benchmark section asks for, in one call of the device tool (staged by
# benchmarks/gpu/stage.sh; on an H200 it took 7-8 minutes: 422 s, then 495 s), most wanted first, so that a call
# stopped at its limit still brings back the first figures: the heavy suites' probes at BERT-base size
# (issue #38) in bf16 with the harness's attention kernels (no cuDNN on CUDA) and with PyTorch's own order
# (cuDNN first, as the first GPU run had it), what a new batch shape costs with each, then fp32 and
# behaviour; throughput per dtype; the head-pruning probe and its single-head sweep in fp32 and bf16;
# and the internals and sst2 suites on the fixture. Writes two
# files to $OUT (or ./gpu-out), as the device tool brings back few files: gpu.log (every step's output and
# time, written as it goes) and reports.tgz (the suites' report.json and report.md). DEVICE=cpu LIMIT=48
# runs the same steps, shortened, on a CPU as a smoke test. Logs of runs: benchmarks/gpu/logs/.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-gpu-out}; mkdir -p "$out"
device=${DEVICE:-cuda}
source benchmarks/gpu/env.sh || exit 2
limit=${LIMIT:-}
log=$out/gpu.log; : > "$log"
reports=$(mktemp -d)
"$py" - <<'PY' 2>&1 | tee -a "$log"
import torch, transformers
print("torch", torch.__version__, "transformers", transformers.__version__, "cuda", torch.cuda.is_available())
if torch.cuda.is_available():
    print(torch.cuda.get_device_name(0), f"{torch.cuda.mem_get_info()[1] / 2**30:.0f} GiB")
PY
if [ -n "$limit" ]; then
  step base_size "$py" benchmarks/base_size.py --device "$device" --models bert-base --dtypes float32 \
    --suites sst2 --only accuracy --examples "$limit"
  step base_size_pytorch "$py" benchmarks/base_size.py --device "$device" --models bert-base --dtypes float32 \
    --suites sst2 --only accuracy --examples "$limit" --sdpa pytorch
  step throughput "$py" benchmarks/throughput.py --device "$device" --repeat 1 --sizes 16,32
  step heads_dtypes "$py" benchmarks/heads.py --device "$device" --dtypes float32,bfloat16 --limit "$limit"
else
  base=("$py" benchmarks/base_size.py --device "$device" --models bert-base --threads 16)
  # first the harness's attention kernels on CUDA (no cuDNN) against PyTorch's own order, in bf16, where the
  # first H200 run paid seconds per probe at new batch shapes; fp32 chose the memory-efficient kernel anyway
  step base_size_bf16 "${base[@]}" --dtypes bfloat16 --suites sst2,backdoor,internals
  step base_size_bf16_pytorch "${base[@]}" --dtypes bfloat16 --suites sst2,backdoor --sdpa pytorch
  step attention_profile "$py" benchmarks/gpu/attention_profile.py --device "$device"
  step attention_profile_pytorch "$py" benchmarks/gpu/attention_profile.py --device "$device" --sdpa pytorch
  step base_size_fp32 "${base[@]}" --dtypes float32 --suites internals,backdoor
  step base_size_more "${base[@]}" --dtypes float32,bfloat16 --suites behaviour
  step throughput "$py" benchmarks/throughput.py --device "$device"
  step heads "$py" benchmarks/heads.py --device "$device"
  step heads_bf16 "$py" benchmarks/heads.py --device "$device" --dtype bfloat16
  step heads_dtypes "$py" benchmarks/heads.py --device "$device" --dtypes float32,bfloat16
fi
export BERTPROBE_SST2_LIMIT=${limit:-872}
for suite in internals sst2; do
  for dtype in auto float32 bfloat16; do
    [ -n "$limit" ] && [ "$dtype" != auto ] && continue
    step "suite_${suite}_$dtype" "$py" -m bertprobe.cli run "suites/$suite.yaml" --device "$device" --dtype "$dtype" \
      --out "$reports" --quiet
  done
done
(cd "$reports" && tar czf - --exclude=latest */report.json */report.md) > "$out/reports.tgz"
echo "wrote $log and $out/reports.tgz"
