"""report.html of a real run, opened in headless Chromium (Debian's chromium and chromium-driver, driven
by selenium): it renders, every figure and image has a size, nothing is fetched from the network, and a
<script> planted in the data never runs. Skipped cleanly where Chromium or selenium is absent."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import bertprobe.plugins
from bertprobe import Finding, Probe, ProbeResult, hookimpl
from bertprobe.cli import main
from bertprobe.testing import sentiment_examples, train_tiny_classifier

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install selenium)")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER),
                                reason="Debian's chromium and chromium-driver are not installed")
REPO = Path(__file__).resolve().parents[1]


class Planted(Probe):
    name = "planted"
    description = "hostile strings from the data"

    def run(self, target, data, params, ctx):
        result = ProbeResult(probe=self.name)
        result.add_metric("x", 1.0, True)
        result.findings.append(Finding(title="<script>window.__pwned = 1</script>",
                                       input='"><img src=x onerror="window.__pwned = 2">', observed="<b>bold</b>"))
        return result


class Plugin:
    @hookimpl
    def bertprobe_register_probes(self, registry):
        registry.add(Planted)


def test_report_renders_offline_without_running_planted_scripts(tmp_path, monkeypatch):
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    real = bertprobe.plugins.build_plugins
    monkeypatch.setattr(bertprobe.plugins, "build_plugins", lambda **kw: real(extra=[Plugin()], **kw))
    model = train_tiny_classifier(tmp_path / "m", layers=2, heads=4, steps=40)
    data = tmp_path / "d.tsv"
    data.write_text("sentence\tlabel\n" + "\n".join(f"{t}\t{y}" for t, y in sentiment_examples(40, 2)) + "\n")
    suite = tmp_path / "s.yaml"
    suite.write_text(f"suite: web\nmodel: {{path: '{model}', device: cpu}}\ndata: {{path: '{data}'}}\n"
                     f"report: {{dir: '{tmp_path / 'out'}'}}\nprobes:\n  - probe: accuracy\n    expect: {{accuracy: {{min: 0.5}}}}\n"
                     "  - probe: head-pruning\n    params: {bootstrap: 0, step: 0.5}\n  - probe: planted\n")
    result = CliRunner().invoke(main, ["run", str(suite), "--allow-skips"])
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "out").glob("web-*")

    options = Options()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={tmp_path / 'chrome'}", "--window-size=1200,900"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        driver.get((run_dir / "report.html").as_uri())
        assert driver.title == "bertprobe: web"
        assert "bertprobe report: web" in driver.find_element("tag name", "h1").text
        figures = driver.execute_script(
            "return Array.from(document.querySelectorAll('figure svg')).map(s => s.getBoundingClientRect().width)")
        assert len(figures) >= 5 and all(w > 0 for w in figures)
        images = driver.execute_script(
            "return Array.from(document.images).map(i => [i.complete, i.naturalWidth, i.getAttribute('src')])")
        assert all(complete and width > 0 for complete, width, _ in images), images  # no broken image
        fetched = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
        assert fetched == []  # nothing fetched: CSS and figures are inline
        assert driver.execute_script("return window.__pwned === undefined")  # the planted script never ran
        assert "<script>window.__pwned = 1</script>" in driver.find_element("tag name", "body").text  # shown as text
        # the verdict first: a banner above every table, saying the decision
        banner = driver.find_element("css selector", ".banner")
        first_table = driver.find_element("tag name", "table")
        assert "Decision" in banner.text and banner.location["y"] < first_table.location["y"]
        # figures at their own size, so 8.5 pt text (ticks, counts, legends) is at least 11 px on screen
        scales = driver.execute_script(
            "return Array.from(document.querySelectorAll('figure svg')).map(s => "
            "s.getBoundingClientRect().width / (parseFloat(s.getAttribute('width')) * 4 / 3))")
        assert scales and min(scales) >= 0.97, scales
        height = driver.execute_script("return document.body.scrollHeight")
        driver.set_window_size(1200, min(max(height, 900), 12000))
        shot = Path(__import__("os").environ.get("BERTPROBE_SCREENSHOT_DIR", tmp_path)) / "report.png"
        driver.save_screenshot(str(shot))
        assert shot.stat().st_size > 10_000
        if (REPO / "docs").is_dir() and __import__("os").environ.get("BERTPROBE_UPDATE_SCREENSHOT"):
            shutil.copy(shot, REPO / "docs" / "report.png")
    finally:
        driver.quit()
