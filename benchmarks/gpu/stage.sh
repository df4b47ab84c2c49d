#!/usr/bin/env bash
# Stage what a GPU run of the benchmarks needs into .device/ (ignored by git through .git/info/exclude):
# the SST-2 fixture model, its dev set, and wheels of the packages the GPU machine lacks (datasets,
# dill, multiprocess, conllu), for its Python 3.12. Then, with the `device` tool:
#   run(command="bash benchmarks/gpu/run.sh", carry=[".device"])
# Usage: bash benchmarks/gpu/stage.sh            (BERTPROBE_SHARED: the fixtures, default ../shared)
set -euo pipefail
cd "$(dirname "$0")/../.."
shared=${BERTPROBE_SHARED:-../shared}
for need in "$shared/models/minilm-l6-sst2" "$shared/data/sst2/dev.tsv"; do
  [ -e "$need" ] || { echo "stage.sh: $need is missing (set BERTPROBE_SHARED to the fixtures' folder)" >&2; exit 2; }
done
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qx '/.device/' "$exclude" 2>/dev/null || echo '/.device/' >> "$exclude"
rm -rf .device && mkdir -p .device/models .device/data/sst2 .device/whl
cp -r "$shared/models/minilm-l6-sst2" .device/models/
cp "$shared/data/sst2/dev.tsv" .device/data/sst2/
version() { python -m pip show "$1" 2>/dev/null | sed -n 's/^Version: //p'; }
pkgs=()
for name in datasets dill multiprocess conllu; do
  v=$(version "$name"); pkgs+=("$name${v:+==$v}")
done
python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform any -d .device/whl "${pkgs[@]}"
du -sh .device | awk '{print "staged .device/: " $1 " (the device tool carries at most 64 MiB with the tree)"}'
