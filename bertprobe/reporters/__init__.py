"""Built-in reporters: report.json, report.md and report.html, all built from a RunReport."""
