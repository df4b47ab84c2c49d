"""Cloze items (built-in, Ettinger 2020, user files) and masked-LM scoring for the ``cloze`` probe."""
