"""The model wing: the model under test (``Target``). ``spec`` says how to load it, ``loading`` loads it safely,
``target`` holds it (tokenising once, batched prediction); ``architectures``, ``interventions`` and
``pruning`` reach inside it; ``variants``, ``quantize`` and ``budgets`` derive and size it; ``modelinfo``
describes it; ``endpoint`` audits a served model through ``http_client`` and a wire ``Codec``.

The names a plugin author needs are re-exported here (``from bertprobe.model import Target, ModelSpec,
head_intervention``) and the commonest from the package itself (``from bertprobe import Target, ModelSpec``).
"""

from bertprobe.model.endpoint_codecs_base import Codec, CodecError
from bertprobe.model.interventions import (
    LayerCache,
    encoder_layers,
    evaluate_units,
    frozen_parameters,
    head_intervention,
    hidden_size,
    lowest_layer,
    stack_size,
)
from bertprobe.model.loading import (
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
from bertprobe.model.spec import QUANTIZE_MODES, ModelSpec, TaskName
from bertprobe.model.target import Encoded, Target, word_index_of

__all__ = ["DTYPES", "QUANTIZE_MODES", "TOKENIZER_FILES", "Codec", "CodecError", "Encoded", "LayerCache", "ModelSpec", "Target", "TaskName",
           "check_loading_info", "check_tokenizer_files", "check_vocabulary", "detect_task", "encoder_layers",
           "evaluate_units", "frozen_parameters", "head_intervention", "hidden_size", "load_target", "looks_local",
           "lowest_layer", "resolve_device", "resolve_dtype", "stack_size", "word_index_of"]
