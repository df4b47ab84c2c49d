"""Executors: where a run's models and sweeps execute.

* ``local`` (the default) runs every model in this process, one after another.
* ``ray`` (``pip install -e ".[ray]"``) runs each model of a matrix as a Ray task and shards
  ``Sweep`` work units over Ray actors; events stream back to the one ``events.jsonl``.

Executors are plugins: ``bertprobe_register_executors(registry)`` adds classes or instances with a
``name``, built per run from an ``ExecutorSpec`` (``executor:`` in a suite, ``--executor`` on the
command line).
"""

from bertprobe.executors.base import Executor
from bertprobe.suite.schema import ExecutorSpec

__all__ = ["Executor", "ExecutorSpec"]
