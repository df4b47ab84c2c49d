"""Start one of the example servers of this folder in a subprocess on 127.0.0.1, wait until it answers, stop it.

    import sys; sys.path.insert(0, "examples/serving")
    from launch import start_server

    with start_server("kserve_server.py", ["--model", "../shared/models/minilm-l6-sst2", "--name", "sst2"],
                      health="/v2/health/ready", threads=1) as server:
        print(server.url)           # http://127.0.0.1:PORT

Plain Python (no pytest): what a benchmark or a script needs. ``tests/servers.py`` starts the tests' servers through
``start_server``, adding skips where the ``[serve]`` extra or a fixture is missing.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
READY_DEADLINE_S = 120.0
STOP_DEADLINE_S = 15.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    """A running server: ``url`` (no trailing slash), its ``process``, ``log_file`` and ``startup_s``."""

    url: str
    process: subprocess.Popen
    log_file: Path
    startup_s: float = 0.0

    def log(self, tail: int = 4000) -> str:
        try:
            return self.log_file.read_text(encoding="utf-8", errors="replace")[-tail:]
        except OSError:
            return ""


def _wait_ready(server: Server, health: str, deadline_s: float) -> None:
    import httpx

    start = time.monotonic()
    with httpx.Client(timeout=5.0) as client:
        while True:
            code = server.process.poll()
            if code is not None:
                raise RuntimeError(f"the server exited with {code} before it was ready:\n{server.log()}")
            try:
                if client.get(server.url + health).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() - start > deadline_s:
                raise RuntimeError(f"no answer at {server.url}{health} after {deadline_s:.0f} s:\n{server.log()}")
            time.sleep(0.2)  # a polling interval


def _stop(process: subprocess.Popen, deadline_s: float = STOP_DEADLINE_S) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=deadline_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=deadline_s)


@contextlib.contextmanager
def start_server(script: str, argv: Sequence[str], health: str, port: int | None = None, threads: int | None = 1,
                 deadline_s: float = READY_DEADLINE_S) -> Iterator[Server]:
    """Run ``<this folder>/<script>`` with ``argv`` (the port flag added: ``--http-port`` for KServe's, else
    ``--port``) and ``OMP_NUM_THREADS=threads``, ready when ``health`` answers 200, stopped when the block ends."""
    port = port or free_port()
    flag = "--http-port" if script == "kserve_server.py" else "--port"
    cmd = [sys.executable, str(HERE / script), *argv, flag, str(port)]
    env = dict(os.environ)
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    with tempfile.NamedTemporaryFile("w", prefix=f"{Path(script).stem}-", suffix=".log", delete=False) as log:
        log_file = Path(log.name)
    with open(log_file, "w", encoding="utf-8") as out:
        started = time.monotonic()
        process = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=str(HERE.parents[1]), env=env)
    server = Server(f"http://127.0.0.1:{port}", process, log_file)
    try:
        _wait_ready(server, health, deadline_s)
        server.startup_s = time.monotonic() - started
        yield server
    finally:
        _stop(process)
        with contextlib.suppress(OSError):
            log_file.unlink()
