"""CrowS-Pairs (Nangia et al. 2020) scored as its authors' ``metric.py`` does: the ``crows-pairs`` probe."""
