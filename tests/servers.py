"""Pytest helpers (not a test file): the example model servers of ``examples/serving`` started on 127.0.0.1 on a free
port in a subprocess, ready when their health URL answers 200 (polled, 120 s deadline), stopped at exit.

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
import socket
import subprocess
import sys
import tempfile
import time
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
STOP_DEADLINE_S = 15.0


def require_serve(*modules: str) -> None:
    """Skip unless the [serve] extra's modules are importable."""
    for module in modules or ("kserve", "fastapi", "uvicorn", "httpx"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (the [serve] extra): {INSTALL}")


def require_fixture(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"fixture {path} is absent (set BERTPROBE_SHARED to the fixtures folder)")
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


def _wait_ready(server: RunningServer, health: str, deadline_s: float) -> None:
    import httpx

    start = time.monotonic()
    with httpx.Client(timeout=5.0) as client:
        while True:
            code = server.process.poll()
            if code is not None:
                raise RuntimeError(f"{server.argv[1]} exited with {code} before it was ready:\n{server.log()}")
            try:
                if client.get(server.url + health).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() - start > deadline_s:
                raise RuntimeError(f"{server.argv[1]} not ready at {server.url}{health} after {deadline_s:.0f} s:\n"
                                   f"{server.log()}")
            time.sleep(0.2)  # a polling interval, not a wait for readiness


def stop(process: subprocess.Popen, deadline_s: float = STOP_DEADLINE_S) -> None:
    """Terminate, then kill after ``deadline_s``."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=deadline_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=deadline_s)


@contextlib.contextmanager
def serve(script: str, argv: Sequence[str], name: str, health: str, port: int | None = None,
          threads: int | None = 1, deadline_s: float = READY_DEADLINE_S) -> Iterator[RunningServer]:
    """Run ``examples/serving/<script>`` with ``argv`` (the port flag is added) until the block ends."""
    port = port or free_port()
    flag = "--http-port" if script == "kserve_server.py" else "--port"
    cmd = [sys.executable, str(SERVING / script), *argv, flag, str(port)]
    env = dict(os.environ)
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    with tempfile.NamedTemporaryFile("w", prefix=f"{Path(script).stem}-", suffix=".log", delete=False) as log:
        log_file = Path(log.name)
    with open(log_file, "w", encoding="utf-8") as out:
        started = time.monotonic()
        process = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=str(REPO), env=env)
    server = RunningServer(f"http://127.0.0.1:{port}", name, process, log_file, argv=cmd[1:])
    try:
        _wait_ready(server, health, deadline_s)
        server.startup_s = time.monotonic() - started
        yield server
    finally:
        stop(process)
        with contextlib.suppress(OSError):
            log_file.unlink()


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
