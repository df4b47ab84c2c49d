"""The ``universal-trigger`` probe (Wallace et al. 2019): the probe (``probe``), its params (``params``), the trigger
search (``search``, ``figures``) and its sections by kind of model: ``labelsets`` (multi-label), ``entities``
(token classification), ``answers`` (extractive readers), ``retrieval`` (bi-encoders: corpus poisoning
and query triggers, with ``similarity_search``)."""
