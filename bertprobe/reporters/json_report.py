"""Reporter ``json``: report.json, the machine-readable summary of a run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bertprobe.hookmarkers import hookimpl
from bertprobe.results import RunReport
from bertprobe.results.verdict import decide


class JsonReporter:
    name = "json"
    filename = "report.json"

    def write(self, report: RunReport, run_dir: Path) -> Path:
        path = run_dir / self.filename
        tmp = path.with_suffix(".json.tmp")
        plain = {**report.to_dict(), "decisions": [v.to_dict() for v in decide(report)]}
        tmp.write_text(json.dumps(plain, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        tmp.replace(path)
        return path


def read_report(path: Path) -> RunReport:
    return RunReport.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))


@hookimpl
def bertprobe_register_reporters(registry: Any) -> None:
    registry.add(JsonReporter())
