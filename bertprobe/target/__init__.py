"""The target wing: the model under test. ``spec`` says how to load it, ``loading`` loads it safely,
``target`` holds it (tokenising once, batched prediction); ``architectures``, ``interventions`` and
``pruning`` reach inside it; ``variants``, ``quantize`` and ``budgets`` derive and size it; ``modelinfo``
describes it.

The names a plugin author needs are re-exported here: ``from bertprobe.target import Target, ModelSpec``.
"""

from bertprobe.target.loading import (
    DTYPES,
    TOKENIZER_FILES,
    check_loading_info,
    check_tokenizer_files,
    check_vocabulary,
    detect_task,
    load_target,
    looks_local,
    resolve_device,
    resolve_dtype,
)
from bertprobe.target.spec import QUANTIZE_MODES, ModelSpec, Task
from bertprobe.target.target import Encoded, Target, word_index_of

__all__ = ["DTYPES", "QUANTIZE_MODES", "TOKENIZER_FILES", "Encoded", "ModelSpec", "Target", "Task", "check_loading_info",
           "check_tokenizer_files", "check_vocabulary", "detect_task", "load_target", "looks_local", "resolve_device",
           "resolve_dtype", "word_index_of"]
