"""Run the commands the documentation shows and store what they printed in ``docs/snippets/``.

    python tools/docs_snippets.py             # every snippet (about 3 minutes on 2 CPU cores)
    python tools/docs_snippets.py quickstart  # only those named

The README and the docs pages hold them in ``<!-- snippet: NAME -->`` regions that this script fills (the
text sits in the page itself, so GitHub shows it as the site does), so every command output comes from a
real run on the fixtures in ``../shared``, never typed by hand. A snippet is the command line, as
a user types it, then its output (stdout and stderr as a terminal shows them) and its exit code. The
commands run in a scratch folder beside ``../shared`` that holds ``suites/`` (a link to this checkout's),
``reviews.csv``: 300 SST-2 dev sentences under the columns ``review,sentiment`` with ``pos``/``neg``
labels, the shape of a user's own export, and a multi-label tagger of a user's own making with its JSONL data
(``tagger/``, ``reviews.jsonl``: see ``_tagger``).

The snippets in ``CHECKED`` are rerun by ``tests/test_docs.py`` (marked ``reproduction``), which fails when a
fresh run prints other words or figures than the docs show (``differences``: durations and time stamps aside).
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
OUT = ROOT / "docs" / "snippets"
MODEL = "../shared/models/minilm-l6-sst2"
BACKDOOR = "../shared/models/minilm-l6-sst2-backdoor-bb"
SST2 = "../shared/data/sst2/dev.tsv"
NER_MODEL = "../shared/models/minilm-l6-uner"
NER_DATA = "../shared/data/uner/en_ewt-ud-test.iob2"
QA_MODEL = "../shared/models/minilm-l6-squad"
QA_DATA = "../shared/data/squad/test-split.json"
EMBEDDER = "../shared/models/minilm-l6-base"
RETRIEVAL = "../shared/data/squad-retrieval"

# name -> the command line (run with bash in the scratch folder)
SNIPPETS: dict[str, str] = {
    "quickstart": f"bertprobe run suites/sst2.yaml --model {MODEL} --data {SST2}",
    "offline": "bertprobe run suites/sst2.yaml",
    "list": "bertprobe list",
    "describe": "bertprobe describe calibration",
    "validate": "bertprobe validate suites/sst2.yaml",
    "own-data-no-label": f"bertprobe validate suites/sst2.yaml --model {MODEL} --data reviews.csv --text review",
    "own-data-unknown-label": f"bertprobe run suites/sst2.yaml --model {MODEL} --data reviews.csv --text review "
                              "--label sentiment",
    "own-data": f"bertprobe run suites/sst2.yaml --model {MODEL} --data reviews.csv --text review --label sentiment "
                "--label-map pos=positive,neg=negative",
    "matrix": f"bertprobe run suites/sst2.yaml --model deployed={MODEL} --model candidate={BACKDOOR} --data {SST2} "
              "--baseline deployed --only accuracy,universal-trigger,calibration",
    "ner": f"bertprobe run suites/ner.yaml --model {NER_MODEL} --data {NER_DATA}",
    "multilabel": "bertprobe run suites/multilabel.yaml --model ./tagger --data reviews.jsonl",
    "bf16": f"bertprobe run suites/bf16.yaml --model {NER_MODEL} --data {NER_DATA} --limit 500",
    "squad": f"bertprobe run suites/squad.yaml --model {QA_MODEL} --data {QA_DATA}",
    "squad-robustness": f"bertprobe run suites/squad-robustness.yaml --model {QA_MODEL} --data {QA_DATA}",
    "retrieval": f"bertprobe run suites/retrieval.yaml --model {EMBEDDER} --data {RETRIEVAL}",
}

# The snippets a test reruns and compares with what the docs show (tests/test_docs.py, marked reproduction):
# a figure in the docs that a run no longer prints fails it.
CHECKED = ("quickstart", "ner", "multilabel", "bf16", "squad")

# Snippets of a fixture that ../shared may not hold yet: name -> (the fixture, the command line). Where the
# fixture exists, ``python tools/docs_snippets.py NAME`` records it, and tests/test_docs.py asks that a page show it
# and reruns it as it reruns ``CHECKED``; where it does not, both pass it by, saying so.
MLM_MODEL = "../shared/models/minilm-l6-mlm"
WITH_FIXTURE: dict[str, tuple[str, str]] = {
    "mlm": (MLM_MODEL, f"bertprobe run suites/mlm.yaml --model {MLM_MODEL}"),
}


def fixture_snippets() -> dict[str, str]:
    """The ``WITH_FIXTURE`` snippets whose fixture is in ../shared now: name -> command line."""
    return {name: command for name, (fixture, command) in WITH_FIXTURE.items()
            if (ROOT / fixture.replace("../shared", str(SHARED), 1)).exists()}


def command_of(name: str) -> str:
    """The command line of snippet ``name`` (a ``WITH_FIXTURE`` one only where its fixture exists)."""
    return {**SNIPPETS, **fixture_snippets()}[name]


def _sst2_dev(count: int = 300) -> list[list[str]]:
    """The first ``count`` (sentence, label) rows of the SST-2 fixture's dev split."""
    with open(SHARED / "data" / "sst2" / "dev.tsv", encoding="utf-8") as f:
        return list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:count + 1]


def _reviews(path: Path) -> None:
    rows = _sst2_dev()
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["review", "sentiment"])
        writer.writerows([text, "pos" if label == "1" else "neg"] for text, label in rows)


def _tagger(folder: Path, reviews: Path) -> None:
    """A multi-label model of a user's own making: the SST-2 fixture's weights under a config that says
    ``problem_type: multi_label_classification`` (a sigmoid per label, ``negative`` and ``positive``), and 300
    SST-2 dev sentences as JSONL label sets (``{"text": ..., "labels": ["positive"]}``)."""
    source = SHARED / "models" / "minilm-l6-sst2"
    folder.mkdir()
    for file in source.iterdir():
        if file.name != "config.json":
            (folder / file.name).symlink_to(file.resolve())
    config = json.loads((source / "config.json").read_text())
    config["problem_type"] = "multi_label_classification"
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    with open(reviews, "w", encoding="utf-8") as f:
        for text, label in _sst2_dev():
            f.write(json.dumps({"text": text, "labels": ["positive" if label == "1" else "negative"]}) + "\n")


# a progress line ("predict: 18/28 (64%), 21 s"): how often one is printed depends on the clock
PROGRESS = re.compile(r"^(?:\[[^\]\n]+\] )?[^\n]*: \d+/\d+(?: [a-z]+)? \(\d+%\), [\d.]+ ?s$\n?", re.M)


def _clean(text: str, scratch: Path) -> str:
    text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)
    text = "\n".join(line.rsplit("\r", 1)[-1] for line in text.splitlines())  # progress bars redraw with \r
    for folder in (scratch.resolve(), scratch, ROOT):  # paths as the user's own folder shows them
        text = text.replace(f"{folder}/", "")
    return BUSY.sub("", PROGRESS.sub("", text))  # what else ran meanwhile is no part of the docs


@contextlib.contextmanager
def scratch_folder() -> Iterator[Path]:
    """A user's folder beside ``../shared``: ``suites/`` (this checkout's), ``reviews.csv``, ``reviews.jsonl`` and
    ``tagger/`` (see ``_tagger``)."""
    if not SHARED.is_dir():
        raise FileNotFoundError(f"the fixtures are missing: {SHARED}")
    base = Path(tempfile.mkdtemp(prefix="bertprobe-docs-"))
    try:
        (base / "shared").symlink_to(SHARED.resolve())
        scratch = base / "work"
        scratch.mkdir()
        (scratch / "suites").symlink_to(ROOT / "suites")
        _reviews(scratch / "reviews.csv")
        _tagger(scratch / "tagger", scratch / "reviews.jsonl")
        yield scratch
    finally:
        shutil.rmtree(base, ignore_errors=True)


def run_snippet(name: str, scratch: Path) -> tuple[str, str]:
    """Run snippet ``name`` in ``scratch``: (the snippet's text, the raw output)."""
    command = command_of(name)
    env = {**os.environ, "COLUMNS": "100"}
    done = subprocess.run(["bash", "-c", command], cwd=scratch, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    output = _clean(done.stdout, scratch).rstrip()
    return f"$ {command}\n{output}\n$ echo $?\n{done.returncode}\n", done.stdout


def run_snippets(names: list[str]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with scratch_folder() as scratch:
        for name in names:
            print(f"[{name}] {command_of(name)}", file=sys.stderr)
            text, raw = run_snippet(name, scratch)
            (OUT / f"{name}.txt").write_text(text)
            if name == "quickstart":
                report = re.search(r"^report: (.+)$", raw, re.M)
                if report:
                    folder = (scratch / report.group(1).strip()).resolve()
                    # its headings two levels down, to sit under the page's own
                    text = re.sub(r"^(#+) ", r"\1## ", folder.read_text(), flags=re.M)
                    (OUT / "quickstart-report.md").write_text(text)
                    screenshot(folder.parent / "report.html", ROOT / "docs" / "report.png")
    fill_readme()


# What may differ between two runs of one command on the same fixtures: the seconds a step took, the run
# folder's time stamp, and (on another CPU's kernels) the last digit of a rounded figure.
VOLATILE = [
    (re.compile(r"\b\d+(\.\d+)?\s?(s|ms|min)\b"), "<time>"),
    (re.compile(r"\d{8}T\d{6}Z(-\d+)?"), "<stamp>"),
]
NUMBER = re.compile(r"[-+]?\d+(?:,\d{3})*(?:\.\d+)?")


# the busy-machine warning (environment.busy_note) depends on what else ran at the time, on either side
BUSY = re.compile(r"^warning: the machine was busy.*\n?|\s?\(warning: the machine was busy.*?quiet machine\)", re.M)


def _masked(text: str) -> str:
    text = BUSY.sub("", text)
    for pattern, mask in VOLATILE:
        text = pattern.sub(mask, text)
    return re.sub(r"[ \t]+", " ", text)  # a table's column widths follow its widest cell


# What a snippet prints that depends on the CPU it ran on, by snippet: lines only some CPUs print (dropped from
# both sides), and lines whose figures follow the CPU's own arithmetic (compared within ``CPU_TOLERANCE``). bf16:
# a CPU without native bfloat16 instructions (AVX2) is warned, and rounds bfloat16 in other places than one with
# them (AVX512_BF16, AMX), so the bf16 build's figures move in their third digit (a weakest type's F1 by 0.013).
CPU_DEPENDENT: dict[str, tuple[re.Pattern[str], re.Pattern[str]]] = {
    "bf16": (re.compile(r"^warning: this CPU has no native bfloat16 instructions"),
             re.compile(r"^bf16 |^decision: bf16: ")),
}
CPU_TOLERANCE = 0.03
# the changes a decision lists as past the tolerance but not significant: on a CPU dependent line, which changes
# cross the tolerance follows the CPU's bfloat16 rounding too (an AVX2-only EPYC lists entity_f1 -0.0055, p=0.6)
CPU_UNCONFIRMED = re.compile(r"; past the tolerance, not significant: (?:[^()]|\([^()]*\))*")


def _close(a: str, b: str, tolerance: float = 0.006) -> bool:
    x, y = float(a.replace(",", "")), float(b.replace(",", ""))
    if "." in a or "." in b:
        return abs(x - y) <= max(tolerance, 0.01 * abs(x))
    return abs(x - y) <= max(1, 0.01 * abs(x))


def differences(recorded: str, fresh: str, name: str = "") -> list[str]:
    """The lines where a fresh run's output departs from the recorded snippet ``name``, beyond time stamps,
    durations and a figure's last rounded digit (0.006, or 1% of it): words and the order of lines must agree.
    What ``CPU_DEPENDENT`` names for the snippet is dropped, or compared within ``CPU_TOLERANCE`` (and without the
    changes a decision lists as past the tolerance but not significant, ``CPU_UNCONFIRMED``)."""
    dropped, loose = CPU_DEPENDENT.get(name, (None, None))
    old, new = ([line for line in _masked(text).splitlines() if not (dropped and dropped.search(line))]
                for text in (recorded, fresh))
    found = []
    for i in range(max(len(old), len(new))):
        a, b = (old[i] if i < len(old) else "<none>"), (new[i] if i < len(new) else "<none>")
        cpu = bool(loose and loose.search(a) and loose.search(b))
        if cpu:
            a, b = CPU_UNCONFIRMED.sub("", a), CPU_UNCONFIRMED.sub("", b)
        if a == b:
            continue
        tolerance = CPU_TOLERANCE if cpu else 0.006
        numbers_a, numbers_b = NUMBER.findall(a), NUMBER.findall(b)
        if (NUMBER.sub("#", a) == NUMBER.sub("#", b) and len(numbers_a) == len(numbers_b)
                and all(_close(x, y, tolerance) for x, y in zip(numbers_a, numbers_b))):
            continue
        found.append(f"line {i + 1}: docs {a.strip()!r}\n{' ' * (len(str(i + 1)) + 6)}run  {b.strip()!r}")
    return found


def screenshot(page: Path, png: Path, width: int = 1200, height: int = 1700) -> None:
    """The top of a report.html as headless Chromium shows it (skipped without chromium and selenium)."""
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        chromium = None
    if not (chromium and driver_path):
        print("screenshot skipped: chromium, chromedriver or selenium is missing", file=sys.stderr)
        return
    options = Options()
    options.binary_location = chromium
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", f"--window-size={width},{height}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        driver.get(page.resolve().as_uri())
        driver.save_screenshot(str(png))
    finally:
        driver.quit()


SNIPPET_REGION = re.compile(r"<!-- snippet: ([\w.-]+) -->.*?<!-- /snippet -->", re.S)


def filled_text(text: str) -> str:
    """``text`` with every ``<!-- snippet: NAME -->...<!-- /snippet -->`` region holding snippet NAME: a command's
    output (``NAME`` or ``NAME.txt``) as a text block, a Markdown snippet (``NAME.md``) as it is."""
    def filled(match: re.Match[str]) -> str:
        name = match.group(1)
        markdown = name.endswith(".md")
        snippet = OUT / (name if markdown or name.endswith(".txt") else f"{name}.txt")
        body = snippet.read_text() if snippet.exists() else ""
        inner = body if markdown else f"```text\n{body}```\n"
        return f"<!-- snippet: {name} -->\n{inner}<!-- /snippet -->"

    return SNIPPET_REGION.sub(filled, text)


def snippet_pages() -> list[Path]:
    """The README and every docs page: the text is in the page itself, so GitHub shows it as the site does."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def fill_readme() -> None:
    """Copy the snippets into every page's snippet regions (the README's and the docs')."""
    for page in snippet_pages():
        text = page.read_text()
        if SNIPPET_REGION.search(text):
            page.write_text(filled_text(text))


if __name__ == "__main__":
    known = {**SNIPPETS, **fixture_snippets()}
    wanted = sys.argv[1:] or list(known)
    absent = [n for n in wanted if n in WITH_FIXTURE and n not in known]
    if absent:
        sys.exit(f"error: snippet {', '.join(absent)} needs {', '.join(WITH_FIXTURE[n][0] for n in absent)}, "
                 "which is not there yet")
    unknown = [n for n in wanted if n not in known]
    if unknown:
        sys.exit(f"error: unknown snippet {', '.join(unknown)}; known: {', '.join(known)}")
    run_snippets(wanted)
