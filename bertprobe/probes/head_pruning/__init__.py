"""The ``head-pruning`` probe (Michel et al. 2019; Kovaleva et al. 2019): head importance, single-head and layer
ablations, the pruning curve. The probe and its hooks are ``probe``; its sections by kind of model ``entities``
(taggers), ``answers`` (readers) and ``rankings`` (bi-encoders); the parts with their own names ``params``, ``evaluator``, ``sweep``,
``curve``, ``report``, ``rows``, ``sequential`` and ``betting``."""
