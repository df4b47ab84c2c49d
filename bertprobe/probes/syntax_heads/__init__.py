"""Attention against dependency trees: word-level attention maps, per-relation head accuracy with offset
baselines and head roles (``relations``), and the attention-only parser (``parser``). The
``syntax-heads`` probe (``bertprobe.probes.syntax_heads.probe``) streams a treebank through these."""
