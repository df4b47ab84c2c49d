"""The head-pruning probe (Michel et al. 2019; Kovaleva et al. 2019): the probe and its head sweep."""
