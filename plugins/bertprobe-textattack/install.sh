#!/usr/bin/env bash
# Install bertprobe with the TextAttack plugin into the current Python (a venv of its own is cleanest):
#
#   python -m venv .venv-textattack && . .venv-textattack/bin/activate && plugins/bertprobe-textattack/install.sh
#
# Plain `pip install textattack` backtracks for ~10 minutes and fails: every flair from 0.13 on pins
# transformers<5. So: torch first, the core, then TextAttack's and flair's import-time dependencies
# under constraints that keep torch/transformers/datasets at the core's versions, then textattack,
# flair and transformer-smaller-training-vocab without their dependency pins. `pip check` will still
# report flair's transformers<5 pin; the plugin's shims make the imports work (see bertprobe_textattack/shims.py).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
py="${PYTHON:-python}"
$py -m pip install -q "torch==${TORCH_VERSION:-2.13.0}"
$py -m pip install -q -e "$repo" -e "$here" --no-deps
$py -m pip install -q -e "$repo"
constraints="$(mktemp)"
$py - "$constraints" <<'PY'
import sys
from importlib.metadata import version
with open(sys.argv[1], "w") as fh:
    for name in ("torch", "transformers", "datasets", "tokenizers", "huggingface-hub"):
        fh.write(f"{name}=={version(name)}\n")
    fh.write("conllu<5\n")
PY
$py -m pip install -q -c "$constraints" \
    nltk lru-dict jieba Levenshtein langdetect pinyin OpenHowNet lemminflect more-itertools num2words \
    word2number language_tool_python bert-score editdistance terminaltables \
    boto3 deprecated segtok scikit-learn sentencepiece ftfy lxml bioc gdown pillow conllu
$py -m pip install -q --no-deps textattack==0.3.11 flair==0.15.1 transformer-smaller-training-vocab==0.4.2
rm -f "$constraints"
$py -c "import bertprobe_textattack.shims as s; s.prepare(); import textattack; print('textattack', textattack.__version__ if hasattr(textattack, '__version__') else 'ok')"
