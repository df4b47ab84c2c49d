"""Progress bars only where a terminal reports its width: `script` and `docker -t` give a terminal of 0 x 0, where a
tqdm bar draws nothing, so plain lines are shown instead (#65: 823 s of silence)."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import struct
import sys
import termios

import pytest

from bertprobe import progress


class Terminal(io.TextIOBase):
    """A stderr that is the slave side of a pseudo-terminal of ``columns`` x ``rows``."""

    def __init__(self, columns: int, rows: int) -> None:
        self.master, self.slave = pty.openpty()
        fcntl.ioctl(self.slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))

    def isatty(self) -> bool:
        return os.isatty(self.slave)

    def fileno(self) -> int:
        return self.slave

    def close(self) -> None:
        os.close(self.master)
        os.close(self.slave)


@pytest.mark.parametrize(("columns", "bars"), [(0, False), (80, True)])
def test_bars_only_on_a_terminal_that_reports_its_width(monkeypatch, columns, bars):
    terminal = Terminal(columns, 0 if columns == 0 else 24)
    monkeypatch.delenv("BERTPROBE_NO_PROGRESS", raising=False)
    monkeypatch.delenv("TERM", raising=False)
    monkeypatch.setattr(sys, "stderr", terminal)
    try:
        assert progress.terminal_columns() == columns
        assert progress.progress_enabled() is bars
        monkeypatch.setenv("TERM", "dumb")
        assert progress.progress_enabled() is False
    finally:
        terminal.close()


def test_a_zero_width_terminal_gets_the_plain_lines(monkeypatch):
    terminal = Terminal(0, 0)
    monkeypatch.delenv("BERTPROBE_NO_PROGRESS", raising=False)
    monkeypatch.delenv("TERM", raising=False)
    monkeypatch.setattr(sys, "stderr", terminal)
    said: list[str] = []
    clock = iter(float(i) for i in range(100))
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    try:
        reporter = progress.Reporter(say=said.append)
        list(reporter(range(5), total=5, desc="accuracy"))
    finally:
        terminal.close()
    assert said and said[-1].startswith("accuracy: 5/5 (100%)")
