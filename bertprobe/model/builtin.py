"""Built-in plugin: the Hugging Face model loader, tried last so that a plugin can serve its own formats."""

from __future__ import annotations

from typing import Any

from bertprobe.hookmarkers import hookimpl
from bertprobe.model.loading import load_target
from bertprobe.model.spec import ModelSpec
from bertprobe.model.target import Target


@hookimpl(trylast=True)
def bertprobe_load_target(spec: ModelSpec, tasks: Any, codecs: Any = None) -> Target:
    return load_target(spec, tasks, codecs)


@hookimpl
def bertprobe_register_codecs(registry: Any) -> None:
    from bertprobe.model.endpoint_codecs import BUILTIN_CODECS

    for codec in BUILTIN_CODECS.values():
        registry.add(codec)
