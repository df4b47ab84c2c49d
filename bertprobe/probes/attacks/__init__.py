"""Attack machinery shared by probes: the vocabulary a trigger may use, token splicing into encoded
rows, and HotFlip gradients and candidate scoring (Ebrahimi et al. 2018; Wallace et al. 2019).

``universal-trigger`` and ``backdoor-scan`` both build on it; probes import from here, never from
each other.
"""
