"""Rewrite bertprobe/catalog.json from the built-in plugins (what `bertprobe list` shows without importing them).

    python tools/plugin_catalog.py          # rewrite it
    python tools/plugin_catalog.py --check  # exit 1 when it is out of date

Run it after adding a built-in probe, task, reporter, data loader or executor, or changing a description,
a probe's tasks or its requirements; tests/test_startup.py fails until then.
"""

from __future__ import annotations

import json
import sys

from bertprobe.catalog import CATALOG, collect
from bertprobe.plugins import DEFAULT_PLUGINS, build_plugins


def current() -> str:
    """The catalog of the built-in plugins as they are now, as the file's text."""
    plugins = build_plugins(env={}, entry_points=False)
    return json.dumps(collect(plugins, DEFAULT_PLUGINS), indent=1, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    text = current()
    stored = CATALOG.read_text(encoding="utf-8") if CATALOG.is_file() else ""
    if "--check" in argv:
        if text != stored:
            print(f"{CATALOG} is out of date: run python tools/plugin_catalog.py", file=sys.stderr)
            return 1
        return 0
    CATALOG.write_text(text, encoding="utf-8")
    print(f"written: {CATALOG}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
