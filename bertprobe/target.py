"""Deprecated: the model wing is ``bertprobe.model`` (``target/`` is the name build tools reserve for their
output, and several skip it). This module re-exports it so plugins written against ``bertprobe.target`` keep
working; import ``bertprobe.model`` (or ``from bertprobe import Target, ModelSpec, load_target``) instead."""

import warnings

from bertprobe.model import *  # noqa: F403
from bertprobe.model import __all__  # noqa: F401

warnings.warn("bertprobe.target is now bertprobe.model; import from bertprobe.model (or from bertprobe)",
              DeprecationWarning, stacklevel=2)
