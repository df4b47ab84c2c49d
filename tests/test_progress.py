"""Progress of long loops (bertprobe.progress): a line at most every EVERY_S seconds once a loop has run
FIRST_S, and its end; a record of each for the run's log; nothing on the terminal when quiet."""

from __future__ import annotations

import itertools

from bertprobe.progress import Reporter, active, progress, reporting


def ticking(step: float):
    clock = itertools.count(0, step)
    return lambda: float(next(clock))


def test_a_long_loop_reports_from_its_first_second_then_every_interval_and_its_end():
    lines: list[str] = []
    records: list[dict] = []
    reporter = Reporter(say=lines.append, record=records.append, clock=ticking(1), prefix="[p] ", fields={"id": "p"})
    assert list(reporter(range(10), desc="trigger search")) == list(range(10))
    # each step takes 1 s: the first report after 1 s, then every 2 s, and the end
    assert lines == ["[p] trigger search: 1/10 (10%), 1 s", "[p] trigger search: 3/10 (30%), 3 s",
                     "[p] trigger search: 5/10 (50%), 5 s", "[p] trigger search: 7/10 (70%), 7 s",
                     "[p] trigger search: 9/10 (90%), 9 s", "[p] trigger search: 10/10 (100%), 11 s"]
    assert [(r["id"], r["desc"], r["done"], r["total"]) for r in records] == [
        ("p", "trigger search", n, 10) for n in (1, 3, 5, 7, 9, 10)]


def test_a_short_loop_says_nothing():
    lines: list[str] = []
    records: list[dict] = []
    reporter = Reporter(say=lines.append, record=records.append, clock=ticking(0.01))
    assert list(reporter([1, 2, 3], desc="x")) == [1, 2, 3]
    assert lines == [] and records == []


def test_quiet_shows_nothing_yet_the_log_keeps_every_report():
    records: list[dict] = []
    reporter = Reporter(say=None, record=records.append, bars=True, clock=ticking(5))
    assert list(reporter(range(3), desc="predict")) == [0, 1, 2]
    assert [r["done"] for r in records] == [1, 2, 3]


def test_an_interrupted_loop_reports_no_end():
    lines: list[str] = []
    reporter = Reporter(say=lines.append, clock=ticking(5))
    loop = reporter(range(10), desc="predict")
    next(loop), next(loop)
    loop.close()  # what a KeyboardInterrupt in the loop's body does to it
    assert lines == ["predict: 1/10 (10%), 5 s"]


def test_without_a_run_progress_leaves_the_loop_alone(capsys):
    assert list(progress(range(3), desc="x")) == [0, 1, 2]
    assert capsys.readouterr().err == ""


def test_the_active_reporter_takes_the_loops_of_the_block():
    lines: list[str] = []
    reporter = Reporter(say=lines.append, first=0, every=0)
    assert active() is None
    with reporting(reporter):
        assert active() is reporter
        list(progress(range(2), desc="inner"))
    assert active() is None
    assert lines == ["inner: 1/2 (50%), 0 s", "inner: 2/2 (100%), 0 s"]
