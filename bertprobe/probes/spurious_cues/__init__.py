"""The spurious-cues probe (Niven & Kao 2019): cue statistics (``stats``), the probe (``probe``) and its sections for
extractive readers (``answers``: partial inputs and the answer-position prior) and for retrievers (``rankings``:
reliance on lexical overlap and partial queries)."""
