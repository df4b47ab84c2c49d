"""The run wing: one run's session (events, caches, work units), one model's turn (``turn``: run and
judge each probe), reading a run folder back (``resume``), and the built-in plugin that writes the
reports from the session's hooks (``reports``)."""
