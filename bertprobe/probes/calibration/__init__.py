"""The ``calibration`` probe (``probe.py``: ECE, proper scores, temperature scaling, selective prediction), its
sections by kind of model (``labelsets.py``, ``entities.py``, ``answers.py``) and the math they share
(``metrics.py``: binning, ECE, risk-coverage; ``scaling.py``: proper scores, temperature)."""
