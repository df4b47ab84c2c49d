"""Built-in plugin: the named data loaders ``arct``, ``conllu``, ``conll`` and ``squad``."""

from __future__ import annotations

from typing import Any

from bertprobe.data.arct import ArctLoader
from bertprobe.data.beir import BeirLoader
from bertprobe.data.conll import ConllLoader
from bertprobe.data.squad_loader import SquadLoader
from bertprobe.data.treebank import ConlluLoader
from bertprobe.hookmarkers import hookimpl


@hookimpl
def bertprobe_register_datasets(registry: Any) -> None:
    registry.add(ArctLoader())
    registry.add(ConlluLoader())
    registry.add(ConllLoader())
    registry.add(SquadLoader())
    registry.add(BeirLoader())
