"""Pytest helpers (not a test file): the example model servers of ``examples/serving`` started on 127.0.0.1 on a free
port in a subprocess, ready when their health URL answers 200 (polled, 120 s deadline), stopped at exit: through
``examples/serving/launch.py``'s ``start_server``, which the benchmarks use too.

    from servers import kserve_server, tei_server, require_serve, SST2_MODEL

    @pytest.fixture(scope="module")
    def sst2_v2():
        with kserve_server(SST2_MODEL, name="sst2", extra=["--version", "3"]) as server:
            yield server          # server.url, server.name, server.log(), server.startup_s

Each helper skips (``pytest.skip``) with the install command when the ``[serve]`` extra or the fixture folder in
``../shared`` is missing. ``tests/`` is on ``sys.path`` under pytest's rootdir conftest, so ``import servers`` works.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("BERTPROBE_SHARED", REPO.parent / "shared"))  # as tests/conftest.py finds it
SST2_MODEL = SHARED / "models" / "minilm-l6-sst2"
SQUAD_MODEL = SHARED / "models" / "minilm-l6-squad"
SST2_DEV = SHARED / "data" / "sst2" / "dev.tsv"
SQUAD_TEST = SHARED / "data" / "squad" / "test-split.json"
SERVING = REPO / "examples" / "serving"
INSTALL = "pip install -e '.[serve]'"
READY_DEADLINE_S = 120.0


def require_serve(*modules: str) -> None:
    """Skip unless the [serve] extra's modules are importable."""
    for module in modules or ("kserve", "fastapi", "uvicorn", "httpx"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (the [serve] extra): {INSTALL}")


def require_fixture(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"fixture {path} is absent (set BERTPROBE_SHARED to the fixtures folder)")
    return path


def _launch():
    """``examples/serving/launch.py``: the start-and-poll logic the benchmarks and scripts use, shared by the tests."""
    if str(SERVING) not in sys.path:
        sys.path.insert(0, str(SERVING))
    import launch

    return launch


def free_port() -> int:
    return _launch().free_port()


@dataclass
class RunningServer:
    """A server subprocess: ``url`` (no trailing slash), ``name`` (the served model name), ``startup_s``."""

    url: str
    name: str
    process: subprocess.Popen
    log_file: Path
    startup_s: float = 0.0
    argv: list[str] = field(default_factory=list)

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def log(self, tail: int = 4000) -> str:
        try:
            return self.log_file.read_text(encoding="utf-8", errors="replace")[-tail:]
        except OSError:
            return ""


@contextlib.contextmanager
def serve(script: str, argv: Sequence[str], name: str, health: str, port: int | None = None,
          threads: int | None = 1, deadline_s: float = READY_DEADLINE_S) -> Iterator[RunningServer]:
    """Run ``examples/serving/<script>`` with ``argv`` until the block ends (``launch.start_server``: the port flag
    added, ready when ``health`` answers 200 within ``deadline_s``, terminated then killed after 15 s)."""
    with _launch().start_server(script, argv, health, port=port, threads=threads, deadline_s=deadline_s) as started:
        yield RunningServer(started.url, name, started.process, started.log_file, started.startup_s,
                            argv=[str(SERVING / script), *argv])


def kserve_server(model: Path, name: str = "model", extra: Sequence[str] = (), **kw) -> contextlib.AbstractContextManager:
    """KServe's model server on ``model`` (v1 and v2), ready at ``/v2/health/ready``."""
    require_serve("kserve", "httpx")
    require_fixture(model)
    return serve("kserve_server.py", ["--model", str(model), "--name", name, *extra], name, "/v2/health/ready", **kw)


def tei_server(model: Path, extra: Sequence[str] = (), **kw) -> contextlib.AbstractContextManager:
    """The TEI-shaped FastAPI app on ``model``, ready at ``/health``."""
    require_serve("fastapi", "uvicorn", "httpx")
    require_fixture(model)
    return serve("tei_server.py", ["--model", str(model), *extra], model.name, "/health", **kw)


def fault_proxy(upstream: str, **faults):
    """A started ``FaultProxy`` (examples/serving/fault_proxy.py) in this process; use as a context manager."""
    if str(SERVING) not in sys.path:
        sys.path.insert(0, str(SERVING))
    from fault_proxy import FaultProxy, Faults

    return FaultProxy(upstream, Faults(**faults))


def sst2_sentences(n: int, min_words: int = 0) -> list[tuple[str, int]]:
    """The first ``n`` SST-2 dev sentences (at least ``min_words`` words) with their labels."""
    require_fixture(SST2_DEV)
    rows = []
    for line in SST2_DEV.read_text(encoding="utf-8").splitlines()[1:]:
        text, _, label = line.rpartition("\t")
        if len(text.split()) >= min_words:
            rows.append((text.strip(), int(label)))
        if len(rows) == n:
            break
    return rows
