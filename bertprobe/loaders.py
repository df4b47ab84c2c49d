"""Built-in plugin: the Hugging Face model loader (tried last) and the built-in named data loaders."""

from __future__ import annotations

from typing import Any

from bertprobe.hookspecs import hookimpl
from bertprobe.target import ModelSpec, Target, load_target


@hookimpl(trylast=True)
def bertprobe_load_target(spec: ModelSpec) -> Target:
    return load_target(spec)


@hookimpl
def bertprobe_register_datasets(registry: Any) -> None:
    from bertprobe.arct import ArctLoader
    from bertprobe.treebank import ConlluLoader

    registry.add(ArctLoader())
    registry.add(ConlluLoader())
