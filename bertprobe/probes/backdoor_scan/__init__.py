"""The ``backdoor-scan`` probe (a planted trigger, Kurita et al. 2020): the probe (``probe``) and its section for
multi-label models (``labelsets``)."""
