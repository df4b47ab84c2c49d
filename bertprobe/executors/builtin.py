"""Built-in executors, registered through the same hook as third-party ones."""

from __future__ import annotations

from typing import Any

from bertprobe.executors.local import LocalExecutor
from bertprobe.executors.ray import RayExecutor
from bertprobe.hookmarkers import hookimpl


@hookimpl
def bertprobe_register_executors(registry: Any) -> None:
    registry.add(LocalExecutor)
    registry.add(RayExecutor)
