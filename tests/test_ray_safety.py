"""The ray executor's own cluster and its connection checks (a module of its own: it starts and stops
a cluster, so no other module's cluster may be running). Skipped when Ray is not installed."""

from __future__ import annotations

import time

import pytest

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.ray  # private clusters take minutes: run with -m ray

def test_private_cluster_is_on_loopback_and_a_dead_address_fails_fast(tmp_path, monkeypatch):
    """The executor's own cluster advertises 127.0.0.1; a dead address or stale current-cluster file is one
    line within seconds (Ray alone retries for minutes)."""
    import socket

    from bertprobe.errors import SuiteError
    from bertprobe.executors import ExecutorSpec
    from bertprobe.executors import ray as on_ray
    from bertprobe.executors.ray import RayExecutor

    if ray.is_initialized():
        pytest.skip("needs no cluster in this process")
    executor = RayExecutor(ExecutorSpec(name="ray", workers=1))
    executor.start()
    try:
        assert executor.owned
        assert {n["NodeManagerAddress"] for n in ray.nodes()} == {"127.0.0.1"}
        listening = _listening_ports()
        if listening is not None:  # every port the cluster's processes listen on is bound to loopback
            assert listening and all(addr.endswith("127.0.0.1") for addr in listening), listening
    finally:
        executor.close()
    assert not ray.is_initialized()
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start = time.time()
    with pytest.raises(SuiteError, match=f"nothing answers at 127.0.0.1:{port}"):
        RayExecutor(ExecutorSpec(name="ray", address=f"127.0.0.1:{port}")).start()
    stale = tmp_path / "ray_current_cluster"
    stale.write_text(f"127.0.0.1:{port}")
    monkeypatch.setattr(on_ray, "CURRENT_CLUSTER", str(stale))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(SuiteError, match="after a crash that file is stale; remove it"):
        RayExecutor(ExecutorSpec(name="ray", address="auto")).start()
    assert time.time() - start < 30


def _listening_ports() -> list[str] | None:
    """Local addresses of the TCP listeners of Ray's processes (gcs_server, raylet, workers), via ``ss``."""
    import shutil
    import subprocess

    if shutil.which("ss") is None:
        return None
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=False).stdout
    rows = [line.split() for line in out.splitlines() if any(k in line for k in ("gcs_server", "raylet", "ray::"))]
    return [row[3].rsplit(":", 1)[0].strip("[]").removeprefix("::ffff:") for row in rows if len(row) > 3]
