# Sourced by the GPU scripts, from the repository root: the Python to use ($py), the wheels staged in
# .device/whl installed where the machine lacks them, and the fixtures' paths (staged in .device, else
# ../shared). Staged by benchmarks/gpu/stage.sh.
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
