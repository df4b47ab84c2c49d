"""The behaviour probe: CheckList-style tests (Ribeiro et al. 2020): MFT, INV and DIR cases from JSONL files,
templates and perturbations of the suite's data, with fairness gaps under identity swaps."""
