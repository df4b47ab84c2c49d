"""A corpus of broken and hostile inputs: suites, models, data, plugins, strings and signals.

Each case builds its artefact in ``tmp_path`` from tiny models and runs the CLI. Every case checks:
the exit code; that stderr's last line is one ``error: ...`` line matching a pattern that names the
problem, with no traceback anywhere; and, where a run folder was created, that ``report.json`` is not
left ``running`` and keeps every result ``events.jsonl`` recorded.
"""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import bertprobe.plugins
from bertprobe import Probe, ProbeResult, hookimpl
from bertprobe.cli import main


@dataclass
class Env:
    """What a case builds with: a scratch folder, a tiny model, data, and a suite writer."""

    tmp: Path
    model: Path
    data: Path
    monkeypatch: Any
    extra_plugins: list[Any] = field(default_factory=list)

    def suite(self, probes: str = "  - probe: accuracy\n    expect: {accuracy: {min: 0}}\n", model: str | None = None,
              data: str | None = None, head: str = "", body: str | None = None) -> str:
        text = body if body is not None else (
            f"suite: bad\n{head}model: {{path: '{model or self.model}', device: cpu}}\n"
            f"data: {{path: '{data or self.data}'}}\nreport: {{dir: '{self.tmp / 'reports'}'}}\nprobes:\n{probes}")
        path = self.tmp / "suite.yaml"
        path.write_text(text, encoding="utf-8")
        return str(path)

    def model_copy(self, name: str = "m") -> Path:
        target = self.tmp / name
        shutil.copytree(self.model, target)
        return target


@dataclass
class Case:
    id: str
    build: Callable[[Env], list[str]]
    pattern: str
    code: int = 2


def _bomb(env: Env) -> list[str]:
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x","x"]']
    for prev, name in zip("abcdefgh", "bcdefghi"):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 10) + "]")
    return ["validate", env.suite(body="\n".join(lines) + "\nsuite: x\nprobes: [{probe: accuracy, params: {p: *i}}]\n")]


def _deep(env: Env) -> list[str]:
    nested = "x"
    for _ in range(80):
        nested = "[" + nested + "]"
    return ["validate", env.suite(body=f"suite: x\nprobes: [{{probe: accuracy}}]\nd: {nested}\n")]


def _weights(env: Env, data: bytes, name: str = "model.safetensors") -> list[str]:
    model = env.model_copy()
    (model / "model.safetensors").unlink()
    (model / name).write_bytes(data)
    return ["run", env.suite(model=str(model))]


def _truncated(env: Env) -> list[str]:
    model = env.model_copy()
    raw = (model / "model.safetensors").read_bytes()
    (model / "model.safetensors").write_bytes(raw[: len(raw) // 2])
    return ["run", env.suite(model=str(model))]


def _without_head(env: Env) -> list[str]:
    from safetensors.torch import load_file, save_file

    model = env.model_copy()
    tensors = load_file(model / "model.safetensors")
    save_file({k: v for k, v in tensors.items() if not k.startswith("classifier")}, model / "model.safetensors",
              metadata={"format": "pt"})
    return ["run", env.suite(model=str(model))]


def _config_edit(env: Env, change: Callable[[dict], None]) -> list[str]:
    model = env.model_copy()
    config = json.loads((model / "config.json").read_text())
    change(config)
    (model / "config.json").write_text(json.dumps(config))
    return ["run", env.suite(model=str(model))]


def _three_labels(config: dict) -> None:
    config["id2label"] = {"0": "negative", "1": "neutral", "2": "positive"}
    config["label2id"] = {"negative": 0, "neutral": 1, "positive": 2}


def _no_tokenizer(env: Env) -> list[str]:
    model = env.model_copy()
    for name in ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
        (model / name).unlink(missing_ok=True)
    return ["run", env.suite(model=str(model))]


def _corrupt_tokenizer(env: Env) -> list[str]:
    model = env.model_copy()
    (model / "tokenizer.json").write_text('{"version": "1.0", "model": {"type": "Nope"')
    return ["run", env.suite(model=str(model))]


def _foreign_tokenizer(env: Env) -> list[str]:
    from bertprobe.testing import roberta_tokenizer

    model = env.model_copy()
    for name in ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
        (model / name).unlink(missing_ok=True)
    tok = roberta_tokenizer([f"w{i}" for i in range(400)])
    tok.save_pretrained(model)
    return ["run", env.suite(model=str(model))]


def _data_file(env: Env, content: bytes, suffix: str = ".tsv") -> list[str]:
    path = env.tmp / f"data{suffix}"
    path.write_bytes(content)
    return ["run", env.suite(data=str(path))]


def _gpt2(env: Env, eos: bool = True) -> Path:
    """A tiny GPT-2 sequence classifier whose tokenizer has no padding token (as GPT-2's own has none)."""
    import torch
    from transformers import GPT2Config, GPT2ForSequenceClassification

    from bertprobe.testing import WORDS, gpt2_tokenizer

    tok = gpt2_tokenizer(list(WORDS) + "the movie was good boring and dull it fun worst".split(), eos=eos)
    folder = env.tmp / "gpt2"
    tok.save_pretrained(folder)
    assert tok.pad_token is None
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(tok), n_positions=64, n_embd=16, n_layer=1, n_head=2, num_labels=2,
                        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                        id2label={0: "negative", 1: "positive"}, label2id={"negative": 0, "positive": 1})
    GPT2ForSequenceClassification(config).save_pretrained(folder)
    return folder


def _named_label(env: Env) -> list[str]:
    """The suite names ``label: label``; the file has ``sentiment``: named columns must exist."""
    path = env.tmp / "reviews.csv"
    path.write_text("review,sentiment\ngood,pos\n")
    suite = Path(env.suite(data=str(path)))
    suite.write_text(suite.read_text().replace(f"path: '{path}'}}", f"path: '{path}', text: review, label: label}}"))
    return ["run", str(suite)]


def _arct_bytes(env: Env) -> list[str]:
    path = env.tmp / "arct.txt"
    head = "#id\twarrant0\twarrant1\tcorrectLabelW0orW1\treason\tclaim\tdebateTitle\tdebateInfo\n"
    path.write_bytes(head.encode() + "1\tw0\tw1\t0\treason\tclaim\tt\ti\n".encode() + b"2\tcaf\xe9\tw1\t1\tr\tc\tt\ti\n")
    return ["run", env.suite(body=(f"suite: bad\nmodel: {{path: '{env.model}', device: cpu}}\n"
                                   f"data: {{loader: arct, path: '{path}'}}\nreport: {{dir: '{env.tmp / 'reports'}'}}\n"
                                   "probes:\n  - probe: accuracy\n"))]


def _mc_without_choices(env: Env) -> list[str]:
    from bertprobe.testing import save_tiny_model

    mc = save_tiny_model(env.tmp / "mc", task="multiple-choice")
    return ["run", env.suite(model=str(mc))]


class _BrokenLoader:
    name = "broken"
    description = "raises ValueError like a careless plugin"

    def load(self, spec: Any) -> Any:
        raise ValueError("could not parse row 3")


class _LoaderPlugin:
    @hookimpl
    def bertprobe_register_datasets(self, registry: Any) -> None:
        registry.add(_BrokenLoader())


def _broken_loader(env: Env) -> list[str]:
    env.extra_plugins.append(_LoaderPlugin())
    (env.tmp / "x.txt").write_text("whatever")
    return ["run", env.suite(body=(f"suite: bad\nmodel: {{path: '{env.model}', device: cpu}}\n"
                                   f"data: {{loader: broken, path: ./x.txt}}\nreport: {{dir: '{env.tmp / 'reports'}'}}\n"
                                   "probes:\n  - probe: accuracy\n    expect: {accuracy: {min: 0}}\n"))]


def _entry_point(env: Env, body: str) -> list[str]:
    (env.tmp / "bp_broken_plugin.py").write_text(textwrap.dedent(body))
    dist = env.tmp / "bp_broken_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: bp-broken-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[bertprobe]\nbroken = bp_broken_plugin\n")
    env.monkeypatch.syspath_prepend(str(env.tmp))
    return ["validate", env.suite()]


class _Hostile(Probe):
    name = "hostile"
    description = "returns hostile strings"

    def run(self, target: Any, data: Any, params: Any, ctx: Any) -> ProbeResult:
        from bertprobe.results import Finding

        result = ProbeResult(probe=self.name)
        result.add_metric("x", 1.0, True)
        result.findings.append(Finding(title="a | b", input="<script>alert(1)</script> | x",
                                       perturbed='"><img src=x onerror=alert(1)>', observed="|"))
        return result


class _Crash(Probe):
    name = "crash-harness"
    description = "raises a non-Exception the harness does not expect"

    def run(self, target: Any, data: Any, params: Any, ctx: Any) -> ProbeResult:
        raise KeyboardInterrupt


class _ProbePlugin:
    @hookimpl
    def bertprobe_register_probes(self, registry: Any) -> None:
        registry.add(_Hostile)
        registry.add(_Crash)


def _with_probes(env: Env, probes: str, head: str = "") -> list[str]:
    env.extra_plugins.append(_ProbePlugin())
    return ["run", env.suite(probes=probes, head=head)]


def _sigterm(env: Env) -> list[str]:
    class SigTermProbe(Probe):
        name = "sigterm-now"
        description = "SIGTERM"

        def run(self, target: Any, data: Any, params: Any, ctx: Any) -> ProbeResult:
            import os
            import signal
            import time

            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
            return ProbeResult(probe=self.name)

    class Plugin:
        @hookimpl
        def bertprobe_register_probes(self, registry: Any) -> None:
            registry.add(SigTermProbe)

    env.extra_plugins.append(Plugin())
    return ["run", env.suite(probes="  - probe: accuracy\n    expect: {accuracy: {min: 0}}\n  - probe: sigterm-now\n")]


def _harness_bug(env: Env) -> list[str]:
    class Plugin:
        @hookimpl
        def bertprobe_probe_result(self, session: Any, result: Any) -> None:
            raise RuntimeError("reporter plugin exploded")

    env.extra_plugins.append(Plugin())
    return ["run", env.suite()]


def _s(text: str) -> Callable[[Env], list[str]]:
    """A case whose suite is ``text`` with {model}, {data} and {out} filled in."""
    def build(env: Env) -> list[str]:
        body = text.replace("{model}", str(env.model)).replace("{data}", str(env.data))
        return ["run", env.suite(body=body.replace("{out}", str(env.tmp / "reports")))]
    return build


HEAD = "suite: bad\nmodel: {path: '{model}', device: cpu}\ndata: {path: '{data}'}\nreport: {dir: '{out}'}\n"
ACC = "probes:\n  - probe: accuracy\n"

CASES = [
    # ---- suites ------------------------------------------------------------------------------
    Case("suite-missing", lambda e: ["run", str(e.tmp / "nope.yaml")], r"suite file .* not found"),
    Case("suite-empty", lambda e: ["run", e.suite(body="")], r"the suite file is empty"),
    Case("suite-yaml-syntax", lambda e: ["run", e.suite(body="suite: [x\nprobes: -")], r"YAML syntax error at line \d+"),
    Case("suite-not-a-mapping", lambda e: ["run", e.suite(body="- probe: accuracy\n")], r"expected a mapping"),
    Case("suite-unknown-key", _s(HEAD + "probs:\n  - probe: accuracy\n"), r"probs: unknown key \(did you mean 'probes'\?\)"),
    Case("suite-unknown-probe", _s(HEAD + "probes:\n  - probe: acuracy\n"), r"probes\[0\]\.probe: unknown probe 'acuracy'"),
    Case("suite-unknown-param", _s(HEAD + ACC + "    params: {bootstap: 1}\n"), r"bootstap: unknown parameter \(did you mean 'bootstrap'"),
    Case("suite-param-type", _s(HEAD + ACC + "    params: {bootstrap: many}\n"), r"bootstrap: expected int, got 'many'"),
    Case("suite-unknown-metric", _s(HEAD + ACC + "    expect: {acuracy: {min: 1} }\n"), r"has no such metric \(did you mean 'accuracy'"),
    Case("suite-expect-not-number", _s(HEAD + ACC + "    expect: {accuracy: {min: high} }\n"), r"expect\.accuracy\.min: expected a number"),
    Case("suite-duplicate-id", _s(HEAD + ACC + "  - probe: accuracy\n"), r"'accuracy' is used twice"),
    Case("suite-required-env", _s("suite: bad\nmodel: {path: '${BERTPROBE_SURELY_UNSET}'}\n" + ACC),
         r"environment variable BERTPROBE_SURELY_UNSET is not set"),
    Case("suite-billion-laughs", _bomb, r"expands to more than 100,000 values"),
    Case("suite-recursive-alias", lambda e: ["validate", e.suite(body="a: &a [*a]\nprobes: [{probe: accuracy}]\n")],
         r"alias refers to itself"),
    Case("suite-too-deep", _deep, r"nested deeper than 64 levels"),
    Case("suite-too-large", lambda e: ["validate", e.suite(body="# " + "x" * (1 << 20) + "\n")], r"too large for a suite"),
    Case("suite-not-utf8", lambda e: [
        "validate", (lambda p: (p.write_bytes(b"suite: caf\xe9\nprobes: []\n"), str(p))[1])(e.tmp / "latin1.yaml")],
         r"not a readable YAML file"),
    Case("suite-limit-zero", _s("suite: bad\nmodel: {path: '{model}'}\ndata: {path: '{data}', limit: 0}\n" + ACC),
         r"limit must be at least 1"),
    Case("suite-limit-negative", _s("suite: bad\nmodel: {path: '{model}'}\ndata: {path: '{data}', limit: -5}\n" + ACC),
         r"limit must be at least 1"),
    Case("suite-unknown-format", _s(HEAD.replace("report: {dir: '{out}'}", "report: {dir: '{out}', formats: [pdf]}") + ACC),
         r"report\.formats: unknown reporter 'pdf'"),
    Case("suite-gate-baseline", _s("suite: bad\nmodels: [{name: a, path: '{model}'}, {name: b, path: '{model}'}]\n"
                                   "compare: {baseline: c}\n" + ACC), r"compare\.baseline: no model named 'c'"),
    Case("suite-duplicate-model-names", _s("suite: bad\nmodels: [{name: a, path: '{model}'}, {name: a, path: '{model}'}]\n" + ACC),
         r"'a' is used twice"),
    Case("suite-model-and-models", _s("suite: bad\nmodel: '{model}'\nmodels: [{path: '{model}'}]\n" + ACC),
         r"give either model: .* or models:"),
    Case("suite-bad-set", lambda e: ["run", e.suite(), "--set", "probes.nope.params.x=1"], r"--set probes\.nope\.params\.x=1: no single entry 'nope'"),
    Case("suite-unknown-only", lambda e: ["run", e.suite(), "--only", "acuracy"], r"--only acuracy: no such probe"),
    Case("suite-only-checks-what-runs", lambda e: ["run", e.suite(
        probes="  - probe: accuracy\n  - probe: universal-trigger\n    params: {target_label: positive, length: 0}\n"),
        "--only", "universal-trigger"], r"length must be at least 1$"),
    Case("suite-bad-class-name", lambda e: ["validate", e.suite(
        probes="  - probe: universal-trigger\n    params: {target_label: postive}\n")], r"'postive' is not a class of .*did you mean 'positive'"),
    # ---- models ------------------------------------------------------------------------------
    Case("model-missing", lambda e: ["run", e.suite(model=str(e.tmp / "absent"))], r"model folder .* does not exist"),
    Case("model-is-a-file", lambda e: ["run", e.suite(model=str(e.data))], r"is not a folder"),
    Case("model-no-weights", lambda e: ["run", e.suite(model=str((e.tmp / "empty").mkdir() or e.tmp / "empty"))],
         r"no model weights"),
    Case("model-pickle-refused", lambda e: _weights(e, b"\x80\x04garbage", "pytorch_model.bin"), r"only pickle weights.*allow_pickle"),
    Case("model-pickle-garbage", lambda e: _weights(e, b"\x80\x04garbage", "pytorch_model.bin") + ["--allow-pickle"],
         r"cannot read the weights of .*pytorch_model\.bin"),
    Case("model-garbage-safetensors", lambda e: _weights(e, b"not a safetensors file at all"),
         r"cannot read the weights of .*model\.safetensors.*corrupt"),
    Case("model-truncated-safetensors", _truncated, r"cannot read the weights of .*truncated"),
    Case("model-missing-head", _without_head, r"missing from the checkpoint, so randomly initialised: classifier\.bias, classifier\.weight"),
    Case("model-label-count-mismatch", lambda e: _config_edit(e, _three_labels), r"re-initialised: classifier\.bias, classifier\.weight"),
    Case("model-no-tokenizer", _no_tokenizer, r"has no tokenizer files"),
    Case("model-corrupt-tokenizer", _corrupt_tokenizer, r"cannot read the tokenizer in .*tokenizer\.json"),
    Case("model-foreign-tokenizer", _foreign_tokenizer, r"the tokenizer has \d+ tokens but the model's embedding has only \d+ rows"),
    Case("model-bad-device", lambda e: ["run", e.suite(), "--device", "tpu"], r"unknown device 'tpu'"),
    Case("model-no-pad-no-eos", lambda e: ["run", e.suite(model=str(_gpt2(e, eos=False)))],
         r"the tokenizer has no padding token and no end-of-sequence token to pad with"),
    Case("model-bad-config-json", lambda e: _config_edit(e, lambda c: c.update(architectures=["NoSuchModel"])),
         r"cannot tell the task from the config"),
    # ---- data --------------------------------------------------------------------------------
    Case("data-missing", lambda e: ["run", e.suite(data=str(e.tmp / "absent.tsv"))], r"absent\.tsv' does not exist"),
    Case("data-is-a-folder", lambda e: ["run", e.suite(data=str(e.tmp))], r"is a folder, not a data file"),
    Case("data-binary", lambda e: _data_file(e, b"sentence\tlabel\n\x00\x01\x02\x03\n"), r"looks binary"),
    Case("data-not-utf8", lambda e: _data_file(e, b"sentence\tlabel\ngood\t1\ncaf\xe9 bad\t0\n"), r"line 3: not UTF-8 text"),
    Case("data-ragged", lambda e: _data_file(e, b"sentence,label\ngood,1\nbad,0,extra,cells\n", ".csv"), r"cannot read .*Expected 2 fields"),
    Case("data-jsonl-bad-line", lambda e: _data_file(e, b'{"sentence": "good", "label": 1}\n\n{"sentence": "bad", "label": 0}}\n',
                                                     ".jsonl"), r"line 3 of '.*data\.jsonl': not valid JSON \(Extra data at column 32\)"),
    Case("data-gzip-named-tsv", lambda e: _data_file(e, __import__("gzip").compress(b"sentence\tlabel\ngood\t1\n")),
         r"data\.tsv' is gzip-compressed, not a plain csv/tsv/jsonl file; decompress it first \(gunzip -c"),
    Case("data-empty", lambda e: _data_file(e, b""), r"is empty"),
    Case("data-unknown-column", lambda e: ["run", e.suite(), "--text", "review"], r"no column 'review' for text"),
    Case("data-unknown-label", lambda e: _data_file(e, b"sentence\tlabel\ngood\tmaybe\n"), r"label 'maybe' .* is not one the model knows"),
    Case("data-no-label-column", lambda e: _data_file(e, b"review,sentiment\ngood film,pos\nbad film,neg\n", ".csv")
         + ["--text", "review"],
         r"probe accuracy needs labelled data, but '.*\.csv' has no label column 'label' \(other columns: sentiment\); "
         r"pass --label sentiment"),
    Case("data-named-label-column-missing", lambda e: _named_label(e),
         r"has no column 'label' for label \(did you mean 'sentiment'\?\).*pass --label sentiment"),
    Case("data-unknown-label-suggests-map", lambda e: _data_file(e, b"sentence\tlabel\ngood\tpos\nbad\tneg\n"),
         r"label 'pos' on line 2 of .*data\.tsv is not one the model knows .*--label-map neg=negative,pos=positive"),
    Case("data-bad-label-line-number", lambda e: _data_file(e, b"sentence\tlabel\ngood\t1\n\nfine\t1\nbad\t7\n"),
         r"label 7 on line 5 of .*data\.tsv"),
    Case("data-label-map-malformed", lambda e: ["run", e.suite(), "--label-map", "pos"],
         r"--label-map pos: expected DATA=CLASS pairs"),
    Case("gate-baseline-one-model", lambda e: ["run", e.suite(), "--baseline", "x"], r"--baseline x: a gate needs two or more models"),
    Case("gate-baseline-unknown", lambda e: ["run", e.suite(), "--model", f"a={e.model}", "--model", f"b={e.model}",
                                             "--baseline", "c"], r"--baseline: no model named 'c' after --model"),
    Case("data-unknown-extension", lambda e: _data_file(e, b"x", ".xlsx"), r"unknown extension"),
    Case("data-arct-not-utf8", _arct_bytes, r"arct\.txt' line 3: not UTF-8"),
    Case("data-unknown-loader", _s("suite: bad\nmodel: {path: '{model}'}\ndata: {loader: arcct, path: x}\n" + ACC),
         r"no data loader 'arcct' \(did you mean 'arct'\?\)"),
    Case("data-mc-without-choices", _mc_without_choices, r"multiple-choice model but .* examples without choices"),
    Case("data-loader-plugin-raises", _broken_loader, r"data loader 'broken' failed on '.*x\.txt': ValueError: could not parse row 3"),
    # ---- plugins ---------------------------------------------------------------------------
    Case("plugin-disable-typo", lambda e: (e.monkeypatch.setenv("BERTPROBE_DISABLE_PLUGINS", "bertprobe.probes.acuracy"),
                                           ["validate", e.suite()])[1], r"names 'bertprobe\.probes\.acuracy', which is no plugin"),
    Case("plugin-syntax-error", lambda e: _entry_point(e, "def broken(:\n"), r"plugin 'broken' .* failed to import: SyntaxError"),
    Case("plugin-runtime-error", lambda e: _entry_point(e, "raise RuntimeError('needs a GPU driver')\n"),
         r"plugin 'broken' .* failed to import: RuntimeError: needs a GPU driver"),
    Case("plugin-exits", lambda e: _entry_point(e, "import sys\nsys.exit(3)\n"), r"plugin 'broken' .* failed to import: SystemExit"),
    # ---- signals and internal errors ----------------------------------------------------------
    Case("signal-sigterm", _sigterm, r"interrupted: partial report in", code=143),
    Case("internal-error", _harness_bug, r"internal error: RuntimeError: reporter plugin exploded", code=3),
]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from bertprobe.testing import save_tiny_model

    return save_tiny_model(tmp_path_factory.mktemp("tiny"))


@pytest.fixture
def env(tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch) -> Env:
    data = tmp_path / "mini.tsv"
    data.write_text("sentence\tlabel\nthe movie was good\t1\nboring and dull\t0\nit was fun\t1\nthe worst\t0\n")
    e = Env(tmp_path, tiny_model, data, monkeypatch)
    real = bertprobe.plugins.build_plugins
    monkeypatch.setattr(bertprobe.plugins, "build_plugins", lambda **kw: real(extra=list(e.extra_plugins), **kw))
    return e


def test_the_corpus_is_large_enough():
    assert len(CASES) >= 40 and len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case: Case, env: Env):
    argv = case.build(env)
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == case.code, f"{result.exit_code}: {result.output}"
    assert "Traceback" not in result.output, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines, "nothing on stderr"
    errors = [i for i, line in enumerate(lines) if line.startswith("error: ")]
    listed = lines[errors[0] + 1:] if errors else []  # several problems: numbered, one per line, after the headline
    assert all(line.startswith(f"  {i}. ") for i, line in enumerate(listed, 1)), result.stderr
    last = " ".join(line.strip() for line in lines[errors[0]:]) if errors and listed else lines[-1]
    prefix = "error: " if case.code in (2, 3) else ""
    assert last.startswith(prefix) and len(errors) <= 1, result.stderr
    assert re.search(case.pattern, last), f"{case.pattern!r} not in {last!r}"
    for run_dir in (env.tmp / "reports").glob("bad-*"):
        report = json.loads((run_dir / "report.json").read_text())
        assert report["status"] != "running"
        events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
        recorded = {(e["result"]["model"], e["result"]["id"]) for e in events if e["event"] == "probe_result"}
        assert recorded == {(p["model"], p["id"]) for p in report["probes"]}
        assert events[-1]["event"] == "run_finish"


def test_hostile_strings_are_escaped_in_every_report(env: Env):
    argv = _with_probes(env, "  - probe: hostile\n    id: 'x|<b>y</b>'\n    expect: {x: {min: 0}}\n")
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 0, result.output
    (run_dir,) = (env.tmp / "reports").glob("bad-*")
    html = (run_dir / "report.html").read_text()
    assert "<script>" not in html and "<img" not in html and "&lt;script&gt;" in html
    md = (run_dir / "report.md").read_text()
    for line in md.splitlines():
        if line.startswith("| a ") or "alert(1)" in line:
            cells = re.split(r"(?<!\\)\|", line.strip().strip("|"))
            assert len(cells) == 6, line  # the pipes inside the cells are escaped, the columns hold
    assert r"x\|<b>y</b>" in md or r"x\|" in md
    # every pipe comes out escaped exactly once (a second escape shows a stray backslash on GitHub)
    assert "\\\\|" not in md and r"<script>alert(1)</script> \| x" in md


def test_a_decoder_without_a_padding_token_is_padded_with_its_eos_and_batches(env: Env):
    model = _gpt2(env)
    result = CliRunner().invoke(main, ["run", env.suite(model=str(model))])
    assert result.exit_code == 0, result.output
    (run_dir,) = (env.tmp / "reports").glob("bad-*")
    report = json.loads((run_dir / "report.json").read_text())
    assert report["probes"][0]["metrics"]["examples"] == 4
    assert any("no padding token" in n for n in report["models"][0]["notes"])


def test_allow_missing_weights_is_an_explicit_opt_in_recorded_as_a_warning(env: Env):
    argv = _without_head(env)
    suite = Path(argv[1])
    suite.write_text(suite.read_text().replace("device: cpu}", "device: cpu, allow_missing_weights: true}"))
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 0, result.output
    (run_dir,) = (env.tmp / "reports").glob("bad-*")
    (model,) = json.loads((run_dir / "report.json").read_text())["models"]
    assert any(n.startswith("WARNING (allow_missing_weights)") and "classifier.weight" in n for n in model["notes"])
    assert "WARNING (allow_missing_weights)" in (run_dir / "report.md").read_text()
    assert "WARNING (allow_missing_weights)" in (run_dir / "report.html").read_text()
