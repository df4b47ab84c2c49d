"""Progress without a terminal: a plain line every LINE_EVERY_S seconds, none for a short loop."""

from __future__ import annotations

import itertools

import bertprobe.progress as progress_module
from bertprobe.progress import progress


def test_a_long_loop_without_a_terminal_prints_a_line_every_interval(monkeypatch, capsys):
    clock = itertools.count(0, 7)  # each step of the loop takes 7 s
    monkeypatch.setattr(progress_module.time, "monotonic", lambda: float(next(clock)))
    monkeypatch.delenv("BERTPROBE_NO_PROGRESS", raising=False)
    assert list(progress(range(10), total=10, desc="trigger search")) == list(range(10))
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "trigger search: 3/10 (30%), 21 s"  # the first line after >= 20 s, then every 21 s
    assert len(lines) == 3


def test_a_short_loop_or_no_progress_prints_nothing(monkeypatch, capsys):
    monkeypatch.delenv("BERTPROBE_NO_PROGRESS", raising=False)
    assert list(progress([1, 2, 3], desc="x")) == [1, 2, 3]
    monkeypatch.setenv("BERTPROBE_NO_PROGRESS", "1")
    clock = itertools.count(0, 100)
    monkeypatch.setattr(progress_module.time, "monotonic", lambda: float(next(clock)))
    assert list(progress(range(5), total=5)) == list(range(5))
    assert capsys.readouterr().err == ""
