"""Reporter ``junit``: report.junit.xml, so CI systems (GitLab, Jenkins, GitHub) show audits natively.

One ``<testsuite>`` per model and one ``<testcase>`` per probe (classname ``bertprobe.<suite>.<model>``).
A failed probe carries its failed expectations as ``<failure>``, an errored or interrupted one its
message as ``<error>``, a skipped one its reason as ``<skipped>``. Each regression found by a gate is
a testcase of its own, failed, in the candidate model's suite. A candidate's failure that its baseline misses
too says so (type ``expectation shared with the baseline``). Each model's suite ends with a ``decision``
testcase carrying the decision line the terminal and the reports state: failed for *do not ship*, skipped for
*no decision*, passed otherwise (fit to ship, baseline, may replace), so a CI view agrees with the exit code.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from bertprobe.hookmarkers import hookimpl
from bertprobe.reporters.summary import decision_lines, failed_note
from bertprobe.results import RunReport
from bertprobe.results.verdict import shared_misses


def render_junit(report: RunReport) -> ET.ElementTree:
    root = ET.Element("testsuites", name=f"bertprobe {report.suite}")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    decisions = {v.model: (v, line) for v, line in decision_lines(report)}
    baseline = str(report.gate.get("baseline") or "") if len(report.model_names) > 1 else ""
    for model in report.model_names:
        suite = ET.SubElement(root, "testsuite", name=f"{report.suite}: {model}", timestamp=report.started_at)
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        seconds = 0.0
        for result in report.results_for(model):
            case = ET.SubElement(suite, "testcase", classname=f"bertprobe.{report.suite}.{model}",
                                 name=result.id or result.probe, time=f"{result.duration_s:.3f}")
            counts["tests"] += 1
            seconds += result.duration_s
            if result.status == "failed":
                text = failed_note(result) or "an expectation failed"
                base = report.result(baseline, result.id or result.probe) if baseline and model != baseline else None
                shared = shared_misses(result, base, baseline, report.gate)
                unshared = {e.metric for e in result.expectations if not e.passed} - {m for m, _ in shared}
                kind = "expectation" if unshared or not shared else "expectation shared with the baseline"
                if shared:
                    text += f"; like {baseline}: " + ", ".join(t for _, t in shared)
                ET.SubElement(case, "failure", message=text, type=kind).text = text
                counts["failures"] += 1
            elif result.status in ("error", "interrupted"):
                ET.SubElement(case, "error", message=result.message or result.status, type=result.status).text = result.message
                counts["errors"] += 1
            elif result.status == "skipped":
                ET.SubElement(case, "skipped", message=result.message)
                counts["skipped"] += 1
            metrics = ", ".join(f"{n}={m.value:.4g}" for n, m in result.metrics.items() if m.value is not None)
            if metrics:
                ET.SubElement(case, "system-out").text = metrics
        for regression in report.regressions:
            if regression.model != model:
                continue
            case = ET.SubElement(suite, "testcase", classname=f"bertprobe.{report.suite}.{model}.regressions",
                                 name=f"regression {regression.probe_id}.{regression.metric} vs {regression.baseline}")
            text = regression.describe()
            ET.SubElement(case, "failure", message=text, type="regression").text = text
            counts["tests"] += 1
            counts["failures"] += 1
        if model in decisions:
            verdict, line = decisions[model]
            case = ET.SubElement(suite, "testcase", classname=f"bertprobe.{report.suite}.{model}", name="decision")
            counts["tests"] += 1
            if verdict.blocking:
                ET.SubElement(case, "failure", message=line, type="decision").text = line
                counts["failures"] += 1
            elif verdict.decision == "no decision":
                ET.SubElement(case, "skipped", message=line)
                counts["skipped"] += 1
            ET.SubElement(case, "system-out").text = "\n".join([line] + [f"warning: {w}" for w in verdict.warnings])
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
        suite.set("time", f"{seconds:.3f}")
    for key, value in totals.items():
        root.set(key, str(value))
    ET.indent(root)
    return ET.ElementTree(root)


class JunitReporter:
    name = "junit"
    filename = "report.junit.xml"

    def write(self, report: RunReport, run_dir: Path) -> Path:
        path = run_dir / self.filename
        tmp = path.with_name(path.name + ".tmp")
        render_junit(report).write(tmp, encoding="utf-8", xml_declaration=True)
        tmp.replace(path)
        return path


@hookimpl
def bertprobe_register_reporters(registry: Any) -> None:
    registry.add(JunitReporter())
