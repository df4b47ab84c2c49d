"""The word lists shipped as package data (``probes/behaviour/lexicons/``, provenance in its README), for the
probes that substitute names and places (behaviour's perturbations, distractor's sentences): read here so that
no probe imports another's modules."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any


@lru_cache(maxsize=None)
def lexicon_file(name: str) -> Any:
    """One shipped list (``first_names``, ``last_names``, ``cities``, ``countries``, ``organisations``...)."""
    folder = resources.files("bertprobe.probes.behaviour").joinpath("lexicons")
    return json.loads(folder.joinpath(f"{name}.json").read_text("utf-8"))
