"""The data wing: what data is (``dataset``), how tables and treebanks are read (``tables``, ``treebank``,
``arct``), and how it is prepared for a model (``prepare``: ids, labels, samples, fingerprints).

The names a plugin author needs are re-exported here: ``from bertprobe.data import Dataset, Example``.
"""

from bertprobe.data.dataset import (
    LABEL_LIKE,
    LOCAL_FORMATS,
    TEXT_DEFAULTS,
    Dataset,
    DatasetLoader,
    DataSpec,
    Example,
    FunctionLoader,
    LoaderFn,
    check_text_file,
    is_local,
)
from bertprobe.data.prepare import (
    align_labels,
    check_ids,
    fingerprint,
    map_labels,
    read_data,
    subsample,
)
from bertprobe.data.tables import load_table, read_delimited

__all__ = ["LABEL_LIKE", "LOCAL_FORMATS", "TEXT_DEFAULTS", "DataSpec", "Dataset", "DatasetLoader", "Example",
           "FunctionLoader", "LoaderFn", "align_labels", "check_ids", "check_text_file", "fingerprint",
           "is_local", "load_table", "map_labels", "read_data", "read_delimited", "subsample"]
