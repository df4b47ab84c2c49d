"""Every built-in probe reports progress (terminal and run log) on its long loops.

Each probe runs under the harness on a tiny random model with a fake clock that advances one second per
forward pass of a model, so a loop of forward passes that reports nothing shows as a long silent stretch.
A new probe, or a new silent loop of model calls in an old one, fails here.
"""

from __future__ import annotations

import functools
import json
import re

import pytest
import torch
from conftest import CONLLU
from test_spurious_cues import write_arct
from transformers import PreTrainedModel

import bertprobe.run.session as session_module
from bertprobe.harness import run_suite
from bertprobe.plugins import build_plugins
from bertprobe.progress import Reporter
from bertprobe.run.control import RunControl
from bertprobe.suite.load import load_suite
from bertprobe.testing import save_tiny_model, sentiment_examples

MOST_SILENT = 6  # forward passes a probe may run without a progress report (first after 1, then every 2)


class ForwardClock:
    """A clock whose seconds are the forward passes of models (the outermost model of a nested call)."""

    def __init__(self) -> None:
        self.passes, self.depth = 0, 0

    def __call__(self) -> float:
        return float(self.passes)

    def pre(self, module, _args) -> None:
        if isinstance(module, PreTrainedModel):
            self.passes += self.depth == 0
            self.depth += 1

    def post(self, module, _args, _out) -> None:
        if isinstance(module, PreTrainedModel):
            self.depth -= 1


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("progress")
    data = tmp / "d.tsv"
    data.write_text("sentence\tlabel\n" + "\n".join(f"{t}\t{y}" for t, y in sentiment_examples(80, 5)) + "\n")
    rows = [("the film is good", "the film is not good", i % 2, "it was fun", "movies are great") for i in range(40)]
    treebank = tmp / "t.conllu"
    treebank.write_text("".join(CONLLU.replace("sent_id = s", f"sent_id = {i}s") for i in range(20)), encoding="utf-8")
    squad = tmp / "q.json"
    context = "Tesla was born in 1856 in Smiljan . He moved to New York in 1884 ."
    qas = [{"id": f"q{i}", "question": q, "answers": [{"text": a, "answer_start": context.index(a)}]}
           for i, (q, a) in enumerate([("When did Tesla move to New York?", "1884"), ("Where was Tesla born in 1856?",
                                       "Smiljan"), ("In what year was Tesla born?", "1856")] * 4)]
    squad.write_text(json.dumps({"data": [{"title": "T", "paragraphs": [{"context": context, "qas": qas}]}]}))
    blimp = tmp / "blimp.jsonl"
    blimp.write_text("".join(json.dumps({"sentence_good": "the dog is good .", "sentence_bad": "the dog are good .",
                                         "field": "morphology", "linguistics_term": "subject_verb_agreement",
                                         "UID": "sva", "pairID": str(i)}) + "\n" for i in range(24)))
    crows = tmp / "crows.csv"
    crows.write_text(",sent_more,sent_less,stereo_antistereo,bias_type,annotations,anon_writer,anon_annotators\n" + "".join(
        f"{i},she was a bad actor {i} .,he was a bad actor {i} .,stereo,gender,[],a,[]\n" for i in range(24)))
    return {"clf": save_tiny_model(tmp / "clf", layers=2, heads=4), "data": data, "squad": squad,
            "clf2": save_tiny_model(tmp / "clf2", layers=2, heads=4, seed=1),
            "blimp": blimp, "crows": crows,
            "qa": save_tiny_model(tmp / "qa", task="question-answering"),
            "mc": save_tiny_model(tmp / "mc", task="multiple-choice", labels=("0", "1")),
            "arct": write_arct(tmp / "arct.txt", rows), "mlm": save_tiny_model(tmp / "mlm", task="masked-lm"),
            "enc": save_tiny_model(tmp / "enc", task="encoder"), "treebank": treebank}


PROBES = {  # probe -> its entry in the suite (model and data of its own where it needs them)
    "accuracy": "{probe: accuracy}",
    "calibration": "{probe: calibration, params: {bootstrap: 50}}",
    "slices": "{probe: slices}",
    "behaviour": "{probe: behaviour, params: {bootstrap: 50, max_examples: 40}}",
    "universal-trigger": "{probe: universal-trigger, params: {target_label: positive, candidates: 4, iterations: 3, "
                         "batch_size: 8}}",
    "backdoor-scan": "{probe: backdoor-scan, params: {candidates: 20, finalists: 8, inits: 2, relax_steps: 5, "
                     "search_examples: 8, held_out: 16, screen_examples: 8, extend: 1, extend_candidates: 3}}",
    "head-pruning": "{probe: head-pruning, params: {bootstrap: 0, step: 0.25}}",
    "attention-audit": "{probe: attention-audit, params: {batch_size: 16, similarity_examples: 4}}",
    "spurious-cues": "{probe: spurious-cues, model: {path: '%(mc)s', device: cpu}, data: {loader: arct, path: '%(arct)s'}, "
                     "params: {min_applicability: 1, ngrams: [1]}}",
    "cloze": "{probe: cloze, model: {path: '%(mlm)s', device: cpu}, params: {sets: ['builtin:counting', 'builtin:negation']}}",
    "blimp": "{probe: blimp, model: {path: '%(mlm)s', device: cpu}, params: {data: '%(blimp)s', batch_tokens: 32}}",
    "crows-pairs": "{probe: crows-pairs, model: {path: '%(mlm)s', device: cpu}, params: {data: '%(crows)s', "
                   "batch_tokens: 32}}",
    "syntax-heads": "{probe: syntax-heads, model: {path: '%(enc)s', device: cpu}, data: {path: '%(treebank)s'}, "
                    "params: {min_count: 1}}",
    "distractor": "{probe: distractor, model: {path: '%(qa)s', device: cpu}, data: {path: '%(squad)s'}, "
                  "params: {bootstrap: 20, batch_size: 2}}",
    "serving-skew": "{probe: serving-skew, params: {reference: '%(clf2)s'}}",  # another model: every replay runs
    "typo-consistency": "{probe: typo-consistency}",  # the example plugin: target.predict reports for free
}


def test_every_built_in_probe_has_an_entry_here():
    probes = build_plugins().probes
    assert {name for name in probes.names() if probes.origin(name).startswith("bertprobe.")} <= set(PROBES)


@pytest.mark.parametrize("probe", sorted(PROBES))
def test_a_probe_reports_progress_on_its_loops_in_the_terminal_and_the_log(probe, files, tmp_path, monkeypatch):
    if probe not in build_plugins().probes.names():
        pytest.skip(f"{probe} is not installed")
    clock = ForwardClock()
    monkeypatch.setattr(session_module, "Reporter", functools.partial(Reporter, clock=clock))
    monkeypatch.setattr(session_module, "progress_shown", lambda: True)  # as on a terminal...
    monkeypatch.setattr(session_module, "progress_enabled", lambda: False)  # ...that shows lines, not bars
    timeline: list[tuple[str, float]] = []
    emit = session_module.Session.emit

    def timed(self, event, **payload):
        timeline.append((event, clock()))
        emit(self, event, **payload)

    monkeypatch.setattr(session_module.Session, "emit", timed)
    suite = tmp_path / "s.yaml"
    entry = PROBES[probe] % {k: str(v) for k, v in files.items()}
    suite.write_text(f"suite: s\nmodel: {{path: '{files['clf']}', device: cpu}}\ndata: {{path: '{files['data']}'}}\n"
                     f"seed: 1\nreport: {{formats: [json]}}\nprobes:\n  - {entry}\n")
    lines: list[str] = []
    pre = torch.nn.modules.module.register_module_forward_pre_hook(clock.pre)
    post = torch.nn.modules.module.register_module_forward_hook(clock.post)
    try:
        session = run_suite(load_suite(suite), build_plugins(), control=RunControl(out=str(tmp_path / "r"), threads=1,
                                                                                   log=lines.append))
    finally:
        pre.remove()
        post.remove()
    (result,) = session.report.probes
    assert result.status not in ("error", "skipped"), result.message
    shown = [line for line in lines if re.fullmatch(rf"\[{probe}\] [^:]+: \d+/\d+ \(\d+%\), \d+ s", line)]
    assert shown, f"{probe} printed no progress line: {lines}"
    events = [json.loads(line) for line in (session.run_dir / "events.jsonl").read_text().splitlines()]
    logged = [e for e in events if e["event"] == "progress"]
    assert logged and all(e["id"] == probe and e["total"] for e in logged)
    assert len(logged) == len(shown)  # each line is a record of the log too
    # no long stretch of forward passes without a report, from the probe's start to its result
    start = next(t for e, t in timeline if e == "probe_start")
    marks = [start] + [t for e, t in timeline if e == "progress"] + [next(t for e, t in timeline if e == "probe_result")]
    silent = max(b - a for a, b in zip(marks, marks[1:]))
    assert silent <= MOST_SILENT, f"{probe}: {silent:.0f} forward passes without progress ({clock.passes} in all)"
