"""The C heap kept for reuse in CPU scoring runs (``bertprobe.model.heap``): what is asked of glibc, and when not."""

from __future__ import annotations

import pytest

from bertprobe.model import heap


class FakeLibc:
    def __init__(self, answer: int = 1) -> None:
        self.calls: list[tuple[int, int]] = []
        self.answer = answer

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return self.answer


@pytest.fixture(autouse=True)
def fresh():
    heap.keep_freed_memory.cache_clear()
    yield
    heap.keep_freed_memory.cache_clear()


def test_the_mmap_and_trim_thresholds_are_raised_once_per_process(monkeypatch):
    libc = FakeLibc()
    monkeypatch.setattr(heap, "_glibc", lambda: libc)
    monkeypatch.setattr(heap.sys, "platform", "linux")
    monkeypatch.delenv("BERTPROBE_KEEP_FREED_MEMORY", raising=False)
    assert heap.keep_freed_memory() is True
    assert heap.keep_freed_memory() is True
    assert libc.calls == [(heap.M_MMAP_THRESHOLD, 32 * 1024 * 1024), (heap.M_TRIM_THRESHOLD, 256 * 1024 * 1024)]


def test_nothing_is_asked_when_turned_off_or_not_glibc(monkeypatch):
    libc = FakeLibc()
    monkeypatch.setattr(heap, "_glibc", lambda: libc)
    monkeypatch.setattr(heap.sys, "platform", "linux")
    monkeypatch.setenv("BERTPROBE_KEEP_FREED_MEMORY", "0")
    assert heap.keep_freed_memory() is False and libc.calls == []
    heap.keep_freed_memory.cache_clear()
    monkeypatch.delenv("BERTPROBE_KEEP_FREED_MEMORY")
    monkeypatch.setattr(heap, "_glibc", lambda: None)  # musl, macOS's libc: no mallopt to ask
    assert heap.keep_freed_memory() is False
    heap.keep_freed_memory.cache_clear()
    refused = FakeLibc(answer=0)
    monkeypatch.setattr(heap, "_glibc", lambda: refused)
    assert heap.keep_freed_memory() is False  # glibc said no: not claimed as set


def test_glibc_itself_takes_the_thresholds(monkeypatch):
    import platform

    if platform.libc_ver()[0] != "glibc" or not heap.sys.platform.startswith("linux"):
        pytest.skip("not a glibc system")
    monkeypatch.delenv("BERTPROBE_KEEP_FREED_MEMORY", raising=False)
    assert heap._glibc() is not None
    assert heap.keep_freed_memory() is True  # mallopt accepted both values (it answers 0 for one out of range)
