"""The ``accuracy`` probe (``probe.py``) and its sections per kind of model: label sets, entities, a reader's
answers and Jia & Liang's adversarial questions (``labelsets.py``, ``entities.py``, ``answers.py``,
``adversarial.py``)."""

from bertprobe.probes.accuracy.probe import AccuracyParams, AccuracyProbe

__all__ = ["AccuracyParams", "AccuracyProbe"]
