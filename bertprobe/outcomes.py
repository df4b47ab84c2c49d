"""Deprecated: per-example outcomes live in the results wing, ``bertprobe.results.outcomes``. This module
re-exports them so plugins written against ``bertprobe.outcomes`` keep working; import ``Outcomes`` and
``example_ids`` from ``bertprobe`` (or ``bertprobe.results``) instead."""

import warnings

from bertprobe.results.outcomes import *  # noqa: F403
from bertprobe.results.outcomes import Outcomes, append_outcomes, example_ids, read_outcomes  # noqa: F401

warnings.warn("bertprobe.outcomes is now bertprobe.results.outcomes; import Outcomes and example_ids from bertprobe",
              DeprecationWarning, stacklevel=2)
