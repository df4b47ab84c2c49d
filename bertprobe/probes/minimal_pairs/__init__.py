"""Minimal pairs (BLiMP, Warstadt et al. 2020) scored by a masked LM's pseudo-log-likelihood: the ``blimp`` probe."""
