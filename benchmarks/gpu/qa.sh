#!/usr/bin/env bash
# Extractive QA on a GPU (issue #53), in one call of the device tool, staged by `benchmarks/gpu/stage.sh squad`:
#   run(command="bash benchmarks/gpu/qa.sh", carry=[".device"])
# suites/squad.yaml on the fixture's whole held-out split (2,777 questions) on CUDA (dtype auto: the checkpoint's
# stored dtype, fp16 for the fixture), then suites/bf16.yaml
# (fp32 against bf16, paired question by question) on CUDA, then the CPU figures' cross-check: EM/F1 must equal
# the CPU's 58.44 / 71.20 in the matrix's fp32 model. Writes $OUT/gpu-qa.log (each step's output and time) and $OUT/qa-reports.tgz
# (report.json and report.md of each run). DEVICE=cpu LIMIT=40 runs the same steps, shortened, as a smoke test.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-gpu-out}; mkdir -p "$out"
device=${DEVICE:-cuda}
source benchmarks/gpu/env.sh || exit 2
limit=${LIMIT:-100000}
log=$out/gpu-qa.log; : > "$log"
reports=$(mktemp -d)
"$py" - <<'PY' 2>&1 | tee -a "$log"
import torch, transformers, tokenizers
print("torch", torch.__version__, "transformers", transformers.__version__, "tokenizers", tokenizers.__version__,
      "cuda", torch.cuda.is_available())
if torch.cuda.is_available():
    print(torch.cuda.get_device_name(0))
PY
common=(--model "$BERTPROBE_QA_MODEL" --data "$BERTPROBE_QA_DATA" --device "$device" --limit "$limit" --out "$reports"
        --set "report.formats=[json,markdown]")
export BERTPROBE_NO_PROGRESS=1
step squad_auto_dtype "$py" -m bertprobe run suites/squad.yaml "${common[@]}"
step bf16_matrix "$py" -m bertprobe run suites/bf16.yaml "${common[@]}"
"$py" - "$reports" <<'PY' 2>&1 | tee -a "$log"
import json, pathlib, sys
for path in sorted(p for p in pathlib.Path(sys.argv[1]).glob("*/report.json") if not p.parent.is_symlink()):
    report = json.loads(path.read_text())
    for p in report["probes"]:
        m = p.get("metrics", {})
        if p["probe"] == "accuracy" and "f1" in m:
            print(f"{path.parent.name} {p.get('model')}: EM {100 * m['exact_match']:.2f} F1 {100 * m['f1']:.2f} "
                  f"({int(m.get('examples', 0))} questions, {m.get('examples_per_s', 0):.1f} questions/s)")
    for r in report.get("paired") or []:
        if r.get("metric") in ("f1", "exact_match"):
            print(f"  paired {r['model']} - {r['baseline']} {r['metric']}: {r['delta']:+.4f} {r.get('ci')} "
                  f"p {r.get('p_value')} ({r.get('test')})")
PY
tar -czf "$out/qa-reports.tgz" -C "$reports" . && echo "reports: $out/qa-reports.tgz" | tee -a "$log"
