#!/usr/bin/env bash
# Stage what a GPU run of the benchmarks needs into .device/ (ignored by git through .git/info/exclude):
# the SST-2 fixture model, its dev set, and wheels of the packages the GPU machine lacks (datasets,
# dill, multiprocess, conllu), for its Python 3.12. Then, with the `device` tool:
#   run(command="bash benchmarks/gpu/run.sh", carry=[".device"])
# Usage: bash benchmarks/gpu/stage.sh [sst2|squad]  (BERTPROBE_SHARED: the fixtures, default ../shared)
# sst2 (the default) stages the SST-2 fixture for run.sh; squad the extractive-QA fixture and its held-out split
# for qa.sh (one fixture at a time: the device tool carries at most 64 MiB).
set -euo pipefail
cd "$(dirname "$0")/../.."
shared=${BERTPROBE_SHARED:-../shared}
fixture=${1:-sst2}
case $fixture in
  sst2) model=minilm-l6-sst2; files=(sst2/dev.tsv) ;;
  squad) model=minilm-l6-squad; files=(squad/test-split.json) ;;
  *) echo "stage.sh: unknown fixture '$fixture' (sst2 or squad)" >&2; exit 2 ;;
esac
for need in "$shared/models/$model" "${files[@]/#/$shared/data/}"; do
  [ -e "$need" ] || { echo "stage.sh: $need is missing (set BERTPROBE_SHARED to the fixtures' folder)" >&2; exit 2; }
done
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qx '/.device/' "$exclude" 2>/dev/null || echo '/.device/' >> "$exclude"
rm -rf .device && mkdir -p .device/models .device/whl
cp -r "$shared/models/$model" .device/models/
for f in "${files[@]}"; do mkdir -p ".device/data/$(dirname "$f")"; cp "$shared/data/$f" ".device/data/$f"; done
version() { python -m pip show "$1" 2>/dev/null | sed -n 's/^Version: //p'; }
pkgs=()
for name in datasets dill multiprocess conllu; do
  v=$(version "$name"); pkgs+=("$name${v:+==$v}")
done
python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform any -d .device/whl "${pkgs[@]}"
du -sh .device | awk '{print "staged .device/: " $1 " (the device tool carries at most 64 MiB with the tree)"}'
