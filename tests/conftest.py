"""Shared fixtures. No test touches the network: the hub is forced offline."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["BERTPROBE_NO_PROGRESS"] = "1"


def _worker_threads() -> int | None:
    """Torch threads for one pytest-xdist worker (pyproject's addopts run two): the usable cores shared out, so
    that workers x threads never exceed them (2 workers on 2 cores: 1 thread each); None outside xdist."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
    if workers < 2:
        return None
    return max(1, len(os.sched_getaffinity(0)) // workers)


if (_threads := _worker_threads()) is not None:  # before torch is imported; a run's subprocesses inherit it
    os.environ.setdefault("OMP_NUM_THREADS", str(_threads))


def pytest_configure(config: pytest.Config) -> None:
    """Hold torch to the worker's share of the cores even where it was imported before this file."""
    if _worker_threads() is not None and "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("BERTPROBE_SHARED", REPO.parent / "shared"))
SST2_MODEL = SHARED / "models" / "minilm-l6-sst2"
SST2_DEV = SHARED / "data" / "sst2" / "dev.tsv"
ARCT_MODEL = SHARED / "models" / "minilm-l6-arct"


@pytest.fixture(scope="session")
def trained_model(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """``trained_model(name="model", **kwargs)``: a tiny classifier from ``bertprobe.testing.train_tiny_classifier(**kwargs)``
    (``tagger=True``: a multi-label tagger from ``train_tiny_tagger``),
    trained once per set of arguments and kept in pytest's cache folder (``.pytest_cache``), so later test
    runs skip the training. The key holds the arguments, the source of ``bertprobe.testing`` and the torch and
    transformers versions, so a changed recipe trains anew. Each call gets its own copy to read or change.
    """
    import hashlib
    import shutil

    import torch
    import transformers

    from bertprobe import testing

    recipe = hashlib.sha256(Path(testing.__file__).read_bytes()).hexdigest()[:12]
    cache = getattr(request.config, "cache", None)
    store = cache.mkdir("bertprobe-trained") if cache is not None else tmp_path_factory.mktemp("trained")

    def make(name: str = "model", **kwargs: Any) -> Path:
        kwargs.setdefault("arch", "bert")
        key = json.dumps([kwargs, recipe, torch.__version__, transformers.__version__], sort_keys=True, default=str)
        stored = Path(store) / hashlib.sha256(key.encode()).hexdigest()[:16]
        if not (stored / "done").is_file():
            staging = Path(store) / f".training-{os.getpid()}-{stored.name}"  # beside it: the rename is atomic
            shutil.rmtree(staging, ignore_errors=True)
            trainer = testing.train_tiny_tagger if kwargs.get("tagger") else testing.train_tiny_classifier
            trainer(staging, **{k: v for k, v in kwargs.items() if k != "tagger"})
            (staging / "done").write_text(key, encoding="utf-8")
            if not (stored / "done").is_file():  # a half-written folder from an interrupted run
                shutil.rmtree(stored, ignore_errors=True)
            try:
                staging.rename(stored)
            except OSError:  # a parallel worker renamed its copy first
                shutil.rmtree(staging, ignore_errors=True)
        copy = Path(tmp_path_factory.mktemp(name))  # named like the folders tests made before: name0, name1...
        shutil.copytree(stored, copy, ignore=shutil.ignore_patterns("done"), dirs_exist_ok=True)
        return copy

    return make


@pytest.fixture(scope="session")
def tiny_clf_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from bertprobe.testing import save_tiny_model

    return save_tiny_model(tmp_path_factory.mktemp("tiny-clf"))


@pytest.fixture(scope="session")
def tiny_clf(tiny_clf_dir: Path):
    from bertprobe.model import ModelSpec, load_target

    return load_target(ModelSpec(path=str(tiny_clf_dir), device="cpu"))


@pytest.fixture
def sst_tsv(tmp_path: Path) -> Path:
    """A GLUE-style tsv with a bare quote in it."""
    path = tmp_path / "mini.tsv"
    rows = [
        'the movie was good \t1',
        'a "great" film \t1',
        'the plot was awful \t0',
        'boring and dull \t0',
        'it was fun \t1',
        'the worst acting \t0',
    ]
    path.write_text("sentence\tlabel\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


def only_run(out: Path, suite: str) -> tuple[Path, dict[str, Any]]:
    """The one run directory of ``suite`` under ``out`` (failing if there are none or several) and its report.json."""
    (run_dir,) = out.glob(f"{suite}-[0-9]*")  # <suite>-<UTC time>: "arct" must not match "arct-tiny-..."
    return run_dir, json.loads((run_dir / "report.json").read_text())


def sentiment_tsv(path: Path, n: int, seed: int = 11) -> Path:
    """A tsv of ``n`` labelled sentences from ``bertprobe.testing.sentiment_examples``."""
    from bertprobe.testing import sentiment_examples

    rows = sentiment_examples(n, seed=seed)
    path.write_text("sentence\tlabel\n" + "\n".join(f"{t}\t{y}" for t, y in rows) + "\n", encoding="utf-8")
    return path


def write_suite(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def suite_factory(tmp_path: Path, tiny_clf_dir: Path, sst_tsv: Path):
    """Write a suite over the tiny model and mini tsv; ``extra`` is appended to the probes list."""

    def make(probes: str = "  - probe: accuracy\n", model: str | None = None, data: str | None = None, head: str = "") -> Path:
        text = (
            f"suite: tiny\n{head}"
            f"model: {{path: '{model or tiny_clf_dir}', device: cpu}}\n"
            f"data: {{path: '{data or sst_tsv}', text: sentence, label: label}}\n"
            "seed: 3\n"
            f"report: {{dir: '{tmp_path / 'reports'}'}}\n"
            "probes:\n" + probes
        )
        return write_suite(tmp_path / "suite.yaml", text)

    return make


# ---- tiny readers and a tiny treebank, shared by the QA and head tests ---------------------------------------

# The words of the tiny readers' vocabulary (bertprobe.testing.save_tiny_model(task="question-answering")) and of
# the synthetic questions and contexts they read: a reader of other words keeps their order (token ids).
QA_WORDS = tuple("the a an and is was of in to it dog dogs cat cats bird apple apples robin one two three four five "
                 "who what where when which why how many red green blue house tree river ? . ,".split())


def save_tiny_reader(folder: Path, words: tuple[str, ...] = QA_WORDS, seed: int = 3, **kwargs: Any) -> Path:
    """A tiny random extractive-QA model (BertForQuestionAnswering) over ``words``, saved in ``folder``;
    ``kwargs`` go to ``save_tiny_model`` (``initializer_range`` for answers that move when a head is removed)."""
    from bertprobe.testing import save_tiny_model

    return save_tiny_model(folder, task="question-answering", words=words, seed=seed, **kwargs)


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of a tiny reader over QA_WORDS (seed 3), saved once per test module (a module whose questions
    use other words defines its own ``reader``)."""
    return save_tiny_reader(tmp_path_factory.mktemp("reader"))


# "the dog gave a bone to the cat ." / "i have two cats" with a multiword token and an empty node
CONLLU = """# sent_id = s1
# text = the dog gave a bone to the cat .
1\tthe\tthe\tDET\t_\t_\t2\tdet\t_\t_
2\tdog\tdog\tNOUN\t_\t_\t3\tnsubj\t_\t_
3\tgave\tgive\tVERB\t_\t_\t0\troot\t_\t_
4\ta\ta\tDET\t_\t_\t5\tdet\t_\t_
5\tbone\tbone\tNOUN\t_\t_\t3\tobj\t_\t_
6\tto\tto\tADP\t_\t_\t8\tcase\t_\t_
7\tthe\tthe\tDET\t_\t_\t8\tdet\t_\t_
8\tcat\tcat\tNOUN\t_\t_\t3\tobl\t_\t_
9\t.\t.\tPUNCT\t_\t_\t3\tpunct\t_\t_

# sent_id = s2
1-2\tican't\t_\t_\t_\t_\t_\t_\t_\t_
1\ti\ti\tPRON\t_\t_\t3\tnsubj\t_\t_
2\tcan\tcan\tAUX\t_\t_\t3\taux\t_\t_
3\thave\thave\tVERB\t_\t_\t0\troot\t_\t_
3.1\thave\thave\tVERB\t_\t_\t_\t_\t0:root\t_
4\ttwo\ttwo\tNUM\t_\t_\t5\tnummod\t_\t_
5\tcats\tcat\tNOUN\t_\t_\t3\tobj\t_\t_

"""


@pytest.fixture
def treebank(tmp_path: Path) -> Path:
    """A two-sentence CoNLL-U treebank (CONLLU) in the test's folder."""
    path = tmp_path / "mini.conllu"
    path.write_text(CONLLU, encoding="utf-8")
    return path
