#!/usr/bin/env bash
# Why bf16 and fp16 looked slower than fp32 end to end on a GPU (throughput.py) while the model alone was 4x
# faster: predict_breakdown.py times each stage of one prediction per dtype, in both orders, then
# throughput.py runs in its default order (fp32 first). The cause was throughput.py's own transformers.pipeline
# step, which turns tokenizer parallelism off for the rest of the process; it now restores it. About two
# minutes on an H200. Writes $OUT/gpu.log (or ./gpu-out). Staged by benchmarks/gpu/stage.sh; with the device
# tool: run(command="bash benchmarks/gpu/breakdown.sh", carry=[".device"]).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-gpu-out}; mkdir -p "$out"
source benchmarks/gpu/env.sh || exit 2
device=${DEVICE:-cuda}
{
  "$py" -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'cpu')"
  "$py" benchmarks/gpu/predict_breakdown.py --device "$device" --dtype float32,bfloat16,float16
  "$py" benchmarks/gpu/predict_breakdown.py --device "$device" --dtype bfloat16,float16,float32
  "$py" benchmarks/throughput.py --device "$device" --repeat 5
} 2>&1 | tee "$out/gpu.log"
