"""What a run loads once and shares between its probes: stored models and their variants, data as read
and as aligned to each model, encodings, predictions, and the weights' hashes.

The caches emit nothing and judge nothing: the session records a ``model_loaded`` event the first time it
hands a model out, and checks a resumed run's weights against the events.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from bertprobe.data.dataset import Dataset, DataSpec
from bertprobe.data.prepare import fingerprint, read_data
from bertprobe.errors import TargetError
from bertprobe.model.predictions import Predictions, predict_directly
from bertprobe.model.spec import ModelSpec
from bertprobe.model.target import Target
from bertprobe.plugins import Plugins
from bertprobe.suite.schema import Suite


class RunCaches:
    """Models, data, encodings and predictions of one run, each loaded or computed once."""

    def __init__(self, suite: Suite, plugins: Plugins, say: Callable[[str], None], run_dir: Any = None) -> None:
        self.suite, self.plugins, self.say = suite, plugins, say
        self.run_dir = run_dir  # where a served model's answers are kept (a resumed run reads them back)
        self._targets: dict[ModelSpec, tuple[Target, list[str]]] = {}
        self._raw: dict[str, Dataset] = {}  # DataSpec holds a dict, so it is keyed by its repr
        self._aligned: dict[tuple[str, ModelSpec | None], Dataset] = {}
        self._encodings: dict[Any, Any] = {}
        self._predictions: dict[tuple[ModelSpec, str], Predictions] = {}
        self._hashes: dict[str, str | None] = {}

    # ---- models ---------------------------------------------------------------------------------
    def holds(self, spec: ModelSpec) -> bool:
        return spec in self._targets

    def _stored(self, spec: ModelSpec) -> Target:
        base = spec.base
        if base not in self._targets:
            self.say(f"loading model {spec.path}")
            from bertprobe.model.loading import local_models_through

            with local_models_through(lambda local, _tasks: self.target(local)[0]):  # a served model's twin: cached
                target = self.plugins.hook.bertprobe_load_target(spec=base, tasks=self.plugins.tasks,
                                                                 codecs=self.plugins.codecs)
            if target is None:
                raise TargetError(f"no plugin could load model '{spec.path}'")
            target.encode_cache = self._encodings
            attach = getattr(target, "attach_cache", None)  # a served model: its answers kept in the run folder
            if callable(attach) and self.run_dir is not None:
                from bertprobe.model.endpoint import CACHE_FILE

                attach(Path(self.run_dir) / CACHE_FILE)
            target.load_companion = lambda **fields: self.target(ModelSpec(**fields))[0]  # once per run, as any model
            self._read_classes(target)
            from bertprobe.model.variants import slow_half_note

            slow = slow_half_note(target.dtype, target.device)
            if slow:
                target.notes.append(slow)
                self.say(f"warning: {slow}")
            self._targets[base] = (target, list(target.notes))
        return self._targets[base][0]

    def _read_classes(self, target: Target) -> None:
        """How the suite's class names read this model's classes: the run's --label-map goes to its task, and
        where the GLUE convention may read unnamed classes (LABEL_0, LABEL_1) the run says so."""
        from bertprobe.data.classes import glue_note

        label_map = dict(self.suite.data.label_map) if self.suite.data is not None else {}
        if label_map:
            target.task = replace(target.task, label_map=label_map)
        note = glue_note(target.label_names, label_map)
        if note:
            target.notes.append(note)
            self.say(f"note: {note}")

    def target(self, spec: ModelSpec) -> tuple[Target, list[str]]:
        """The model ``spec`` names, its variant derived from the stored weights, and the notes on how."""
        if spec not in self._targets:
            if spec.variant.keys() - {"dtype"}:
                from bertprobe.model.variants import derive_variant

                stored = self._stored(spec)
                # pruning ranks heads on the data; an ONNX export is checked against PyTorch on its first rows
                wants = spec.prune_heads or spec.runtime == "onnx"
                data = self.aligned(self.suite.data, stored) if wants and self.suite.data else None
                target, notes = derive_variant(stored, spec, data, self.say)
                self._targets[spec] = (target, list(stored.notes) + notes)
            else:
                target = self._stored(spec)
                notes = list(target.notes)
                if target.spec != spec:  # the stored model under this spec's name
                    target = replace(target, spec=spec)
                self._targets[spec] = (target, notes)
        return self._targets[spec]

    def weights_hash(self, path: str) -> str | None:
        """sha256 of the weight files at ``path`` (None for a hub id not on disk), computed once."""
        if path not in self._hashes:
            from bertprobe.model.modelinfo import sha256_of, weight_files

            self._hashes[path] = sha256_of(weight_files(path))
        return self._hashes[path]

    def release(self, keep: set[ModelSpec]) -> None:
        """Free every loaded model not in ``keep`` (by spec or as the stored weights of one)."""
        wanted = keep | {k.base for k in keep}
        self._targets = {k: v for k, v in self._targets.items() if k in wanted}
        self._predictions = {k: v for k, v in self._predictions.items() if k[0] in wanted}
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    # ---- data -----------------------------------------------------------------------------------
    def remember(self, spec: DataSpec, data: Dataset) -> None:
        """Data read (and checked) before the run started, so that it is not read again."""
        self._raw[repr(spec)] = data

    def raw(self, spec: DataSpec) -> Dataset:
        """The data ``spec`` names as read (each file once, however many models use it)."""
        name = repr(spec)
        if name not in self._raw:
            loader = self.plugins.datasets.get(spec.loader) if spec.loader else None
            self._raw[name] = read_data(spec, loader, self.suite.seed)
        return self._raw[name]

    def aligned(self, spec: DataSpec, target: Target | None = None) -> Dataset:
        """The data ``spec`` names, its labels aligned to ``target``'s classes or choices (once per model)."""
        key = (repr(spec), target.spec.base if target else None)
        if key not in self._aligned:
            data = self.raw(spec)
            if target is not None:
                data = target.task.read_labels(data, spec, target.name)
            self._aligned[key] = data
        return self._aligned[key]

    # ---- predictions ----------------------------------------------------------------------------
    def predictions(self, target: Target, data: Dataset, batch_size: int | None = None,
                    progress: Any = None) -> Predictions:
        """``ctx.predictions`` under the harness: one pass per (model, data fingerprint) in a run."""
        key = (target.spec, fingerprint(data))
        if key not in self._predictions:
            self._predictions[key] = predict_directly(target, data, batch_size, progress)
        return self._predictions[key]
