"""The spurious-cues probe (Niven & Kao 2019): cue statistics (``stats``) and the probe (``probe``)."""
