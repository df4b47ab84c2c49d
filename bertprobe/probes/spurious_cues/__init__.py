"""The spurious-cues probe (Niven & Kao 2019): cue statistics (``stats``), the probe (``probe``) and its section for
extractive readers (``answers``: partial inputs and the answer-position prior)."""
