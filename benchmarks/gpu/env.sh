# Sourced by the GPU scripts, from the repository root: the Python to use ($py), the wheels staged in
# .device/whl installed where the machine lacks them, the fixtures' paths (staged in .device, else
# ../shared), and `step`, which runs and logs one step into the script's $log. Staged by benchmarks/gpu/stage.sh.
py=$(command -v python3 || command -v python)
if [ -d .device/whl ] && ! "$py" -c "import datasets, conllu" 2>/dev/null; then
  "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .device/whl/*.whl || return 2
  export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
fi
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1
[ -d .device/models ] && export BERTPROBE_SHARED=$PWD/.device
shared=${BERTPROBE_SHARED:-../shared}
export BERTPROBE_SST2_MODEL=$shared/models/minilm-l6-sst2 BERTPROBE_SST2_DATA=$shared/data/sst2/dev.tsv
export BERTPROBE_QA_MODEL=$shared/models/minilm-l6-squad BERTPROBE_QA_DATA=$shared/data/squad/test-split.json
step() {  # name, command...: run and log to $log (set by the script); a failing step does not stop the others
  local name=$1; shift
  echo "== $name: $*" | tee -a "$log"
  local start=$SECONDS
  "$@" 2>&1 | tee -a "$log"
  echo "== $name: exit ${PIPESTATUS[0]}, $((SECONDS - start)) s" | tee -a "$log"
}
