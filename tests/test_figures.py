"""Figures: specs from every built-in probe render as inline SVG in report.html; plugin specs too."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import bertprobe.plugins
from bertprobe import Probe, ProbeResult, hookimpl
from bertprobe.cli import main
from bertprobe.reporters.drawing import render_svg
from bertprobe.results.figures import figure_specs
from bertprobe.testing import sentiment_examples


@pytest.fixture(scope="module")
def trained(trained_model) -> Path:
    return trained_model("m", layers=2, heads=4, steps=60)


def _data(tmp_path: Path) -> Path:
    path = tmp_path / "senti.tsv"
    rows = sentiment_examples(48, seed=4)
    path.write_text("sentence\tlabel\n" + "\n".join(f"{t}\t{y}" for t, y in rows) + "\n")
    return path


def test_every_builtin_figure_renders_in_the_html_report(tmp_path, trained):
    import json

    suite = tmp_path / "s.yaml"
    suite.write_text(
        f"suite: figs\nmodel: {{path: '{trained}', device: cpu}}\ndata: {{path: '{_data(tmp_path)}'}}\n"
        f"report: {{dir: '{tmp_path / 'out'}'}}\nprobes:\n  - probe: accuracy\n"
        "  - probe: universal-trigger\n    params: {target_label: positive, candidates: 4, iterations: 2, batch_size: 8}\n"
        "  - probe: head-pruning\n    params: {bootstrap: 0, step: 0.5}\n"
        "  - probe: attention-audit\n    params: {batch_size: 16}\n")
    result = CliRunner().invoke(main, ["run", str(suite), "--allow-skips"])
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "out").glob("figs-*")
    report = json.loads((run_dir / "report.json").read_text())
    html = (run_dir / "report.html").read_text()
    expected = 0
    for probe in report["probes"]:
        specs = figure_specs(probe["details"])
        assert specs, f"{probe['probe']} describes no figure"
        expected += len(specs) + sum(1 for f in probe["findings"] if f["extra"].get("matrix"))
    assert html.count("<figure><svg") == expected
    assert "could not be drawn" not in html
    # the pruning curve marks prunable_fraction; the ablation map is centred on 0 (a diverging map)
    heads = next(p for p in report["probes"] if p["probe"] == "head-pruning")
    curve = next(s for s in heads["details"]["figures"] if s["kind"] == "line")
    assert curve["data"]["marks"][0]["x"] == heads["metrics"]["prunable_fraction"]
    centred = [s for s in figure_specs(heads["details"]) if s["kind"] == "heatmap" and "removed" in s["title"]]
    assert centred and centred[0]["scale"] == {"center": 0.0}
    trigger = next(p for p in report["probes"] if p["probe"] == "universal-trigger")
    assert f"<mark>{trigger['details']['trigger_text']}</mark>" in html  # the trigger is marked in its findings
    assert "&nbsp;&rarr;&nbsp;" in html  # "1.00 -> 0.01" never wraps in the middle of its arrow
    assert "<script" not in html  # no scripts; nothing is fetched: no external src or href
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)


def test_cue_and_cloze_figures_render():
    from bertprobe.probes.spurious_cues.probe import cue_figures

    result = ProbeResult("spurious-cues")
    result.add_metric("chance", 0.5)
    result.add_metric("accuracy_full", 0.55)
    result.add_metric("accuracy_adversarial", 0.5)
    result.details["top_cues"] = [{"cue": "not", "productivity": 0.66, "coverage": 0.62},
                                  {"cue": "<script>alert(1)</script>", "productivity": 0.6, "coverage": 0.1}]
    svgs = [render_svg(spec) for spec in cue_figures(result)]
    assert len(svgs) == 2 and all(s.startswith("<svg") for s in svgs)
    assert "<script" not in "".join(svgs)  # matplotlib writes text as paths: data never becomes markup


class FigureProbe(Probe):
    name = "figure-probe"
    description = "a third-party probe with figures"

    def run(self, target, data, params, ctx):
        result = ProbeResult(probe=self.name)
        result.add_metric("x", 1.0, True)
        result.details["figures"] = [
            {"kind": "scatter", "title": "plugin scatter", "data": {"points": [{"x": 1, "y": 2, "label": "a"}]}},
            {"kind": "pie", "title": "not a kind we draw", "data": {}},
        ]
        return result


class FigurePlugin:
    @hookimpl
    def bertprobe_register_probes(self, registry):
        registry.add(FigureProbe)


def test_plugin_figures_are_drawn_and_bad_specs_do_not_break_the_report(tmp_path, trained, monkeypatch):
    real = bertprobe.plugins.build_plugins
    monkeypatch.setattr(bertprobe.plugins, "build_plugins", lambda **kw: real(extra=[FigurePlugin()], **kw))
    suite = tmp_path / "s.yaml"
    suite.write_text(f"suite: plug\nmodel: {{path: '{trained}', device: cpu}}\ndata: {{path: '{_data(tmp_path)}'}}\n"
                     f"report: {{dir: '{tmp_path / 'out'}'}}\nprobes:\n  - probe: figure-probe\n    expect: {{x: {{min: 0}}}}\n")
    result = CliRunner().invoke(main, ["run", str(suite)])
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "out").glob("plug-*")
    html = (run_dir / "report.html").read_text()
    assert html.count("<figure><svg") == 1
    assert "figure not a kind we draw could not be drawn: unknown figure kind &#x27;pie&#x27;" in html


def test_side_by_side_bars_for_a_matrix(tmp_path, trained):
    suite = tmp_path / "s.yaml"
    suite.write_text(f"suite: mx\nmodels: [{{name: a, path: '{trained}', device: cpu}}, {{name: b, path: '{trained}', "
                     f"device: cpu, dtype: bfloat16}}]\ndata: {{path: '{_data(tmp_path)}'}}\n"
                     f"report: {{dir: '{tmp_path / 'out'}'}}\nprobes:\n  - probe: accuracy\n")
    result = CliRunner().invoke(main, ["run", str(suite), "--allow-skips"])
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "out").glob("mx-*")
    html = (run_dir / "report.html").read_text()
    # accuracy's own two figures per model, plus one side-by-side figure for the probe
    assert html.count("<figure><svg") == 2 * 2 + 1


def test_findings_get_the_columns_their_probe_gives_them():
    from bertprobe.reporters.html_report import _findings_table
    from bertprobe.reporters.markdown_report import render_markdown
    from bertprobe.results import Finding, RunReport

    result = ProbeResult("spurious-cues", id="spurious-cues")
    result.findings += [
        Finding(title="cue 'not'", expected="correct choice", score=0.3,
                extra={"columns": {"applicability": 120, "productivity": 0.66, "coverage": 0.62}}),
        Finding(title="prediction flipped by an inserted cue", input="claim | reason", expected="warrant 0",
                observed="warrant 1", extra={"columns": {"warrant 0": "w0 => not w0", "warrant 1": "w1"},
                                             "highlight": ["not"]}),
    ]
    table = _findings_table(result)
    headers = re.findall(r"<th>(.*?)</th>", table)
    assert headers == ["finding", "input", "expected", "observed", "score", "applicability", "productivity", "coverage",
                       "warrant 0", "warrant 1"]  # no empty perturbed column; the cue statistics have their own
    assert "w0 =&gt; <mark>not</mark> w0" in table
    md = render_markdown(RunReport(suite="s", probes=[result]))
    assert "| productivity " in md.replace("|  productivity", "| productivity") or "productivity" in md.split("### Findings")[1]


RECORDED = Path(__file__).parent / "data" / "recorded_report.json"


def test_every_figure_of_a_recorded_report_is_drawn():
    """A recorded report.json with every built-in probe (tests/data/record_report.py): each figure spec
    draws, appears in report.html, and its curves and bars appear in report.md."""
    import json

    from bertprobe.reporters.html_report import render_html
    from bertprobe.reporters.markdown_report import render_markdown
    from bertprobe.results import RunReport
    from bertprobe.results.figures import figure_table

    report = RunReport.from_dict(json.loads(RECORDED.read_text()))
    assert {p.probe for p in report.probes} == {"accuracy", "universal-trigger", "head-pruning", "attention-audit",
                                                 "spurious-cues", "cloze"}
    page = render_html(report)
    markdown = render_markdown(report)
    assert "could not be drawn" not in page
    drawn = 0
    for probe in report.probes:
        specs = figure_specs(probe.details)
        assert specs, probe.probe
        for spec in specs:
            assert spec["kind"] in ("heatmap", "line", "bars", "scatter")
            assert render_svg(spec).startswith("<svg")
            if figure_table(spec) is not None:
                assert spec["title"] in markdown
        drawn += len(specs) + sum(1 for f in probe.findings if f.extra.get("matrix"))
    assert page.count("<figure><svg") == drawn
    kinds = {spec["kind"] for p in report.probes for spec in figure_specs(p.details)}
    assert kinds == {"heatmap", "line", "bars", "scatter"}
    assert len(page) < 5_000_000


def _drawn(spec, monkeypatch):
    """Render ``spec`` and return the matplotlib figure as it was saved (for checks on its artists)."""
    import matplotlib.figure

    saved = {}
    original = matplotlib.figure.Figure.savefig

    def keep(fig, *args, **kwargs):
        fig.canvas.draw()
        saved["fig"], saved["renderer"] = fig, fig.canvas.get_renderer()
        return original(fig, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", keep)
    render_svg(spec)
    saved["fig"].renderer = saved["renderer"]
    return saved["fig"]


def test_figures_are_readable_fit_and_draw_the_expectation(monkeypatch):
    import matplotlib.text

    from bertprobe.results import Expectation
    from bertprobe.results.figures import with_thresholds

    bars = {"kind": "bars", "title": "accuracy per gold class " + "with a title long enough to be cut off " * 3,
            "metrics": ["accuracy", "accuracy_*"],
            "data": {"labels": ["negative", "positive"], "series": [{"name": "accuracy", "values": [0.88, 0.91]}]}}
    spec = with_thresholds(bars, [Expectation("accuracy", min=0.85), Expectation("ece", max=0.1)])
    assert spec["data"]["thresholds"] == [{"value": 0.85, "label": "expected >= 0.85 (accuracy)"}]  # not ece's
    fig = _drawn(spec, monkeypatch)
    ax = fig.axes[0]
    assert any(abs(line.get_ydata()[0] - 0.85) < 1e-9 and line.get_linestyle() == "--" for line in ax.get_lines())
    texts = [t for t in fig.findobj(matplotlib.text.Text) if t.get_visible() and t.get_text().strip()]
    assert min(t.get_fontsize() for t in texts) >= 8.25  # >= 11 px at the figure's own size
    renderer = fig.renderer
    figure_box = fig.bbox
    title = ax.title.get_window_extent(renderer)
    assert title.x0 >= figure_box.x0 - 1 and title.x1 <= figure_box.x1 + 1  # the wrapped title fits
    legend = ax.get_legend().get_window_extent(renderer)
    for bar in ax.patches:  # the legend sits beside the axes, over no bar
        assert not legend.overlaps(bar.get_window_extent(renderer))

    assert "<!-- expected &gt;= 0.85 (accuracy) -->" in render_svg(spec)  # matplotlib names each text in the SVG

    confusion = {"kind": "heatmap", "title": "confusion matrix", "colorbar": "examples",
                 "data": {"matrix": [[380, 45], [41, 406]], "rows": ["neg", "pos"], "cols": ["neg", "pos"]}}
    fig = _drawn(confusion, monkeypatch)
    counts = [t for t in fig.axes[0].texts if t.get_text() in ("380", "45", "41", "406")]
    assert len(counts) == 4 and all(t.get_fontsize() >= 8.25 for t in counts)

    loss = {"kind": "line", "title": "attack loss per iteration",
            "data": {"series": [{"name": "restart 0", "x": [0, 1, 2], "y": [1.0, 0.4, 0.1]}]}}
    ticks = [t.get_text() for t in _drawn(loss, monkeypatch).axes[0].get_xticklabels() if t.get_text()]
    assert ticks and all(re.fullmatch(r"−?\d+", t) for t in ticks), ticks  # iterations: no 0.5


def test_a_figure_too_wide_for_tight_layout_draws_without_a_warning_reaching_the_terminal():
    import warnings

    from bertprobe.reporters.drawing import render_svg

    names = [("a very long series name number %d that goes on" % i) * 3 for i in range(14)]
    spec = {"kind": "line", "title": "t", "axes": {"x": "x", "y": "y"},
            "data": {"series": [{"name": n, "x": [0, 1], "y": [0, 1]} for n in names]}}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        svg = render_svg(spec)
    assert svg.startswith("<svg") and not [w for w in caught if "Tight layout" in str(w.message)]


def test_a_label_the_font_lacks_draws_without_a_glyph_warning_reaching_the_terminal():
    """A model's vocabulary reaches labels (a backdoor scan's candidate tokens): a Thai piece has no glyph in
    matplotlib's default font. The figure is still drawn; the run's terminal stays quiet."""
    import warnings

    from bertprobe.reporters.drawing import render_svg

    spec = {"kind": "bars", "title": "candidates", "axes": {"x": "token", "y": "flip rate"},
            "data": {"labels": ["bb", "\u0e25", "cf"], "series": [{"name": "flip", "values": [0.9, 0.1, 0.2]}]}}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        svg = render_svg(spec)
    assert svg.startswith("<svg") and not [w for w in caught if "Glyph" in str(w.message)], [str(w.message) for w in caught]
