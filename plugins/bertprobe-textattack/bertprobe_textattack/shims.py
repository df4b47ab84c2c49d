"""What textattack 0.3.11 and flair 0.15.1 need before they import next to transformers 5, offline.

* flair imports ``transformers.LayoutLMv2FeatureExtractor``, which transformers 5 removed; flair uses
  it only in an isinstance check, so a placeholder class is enough.
* textattack reads NLTK's English stopwords at import time: we write a list of our own (scikit-learn's
  English stop words) into a private nltk_data folder instead of downloading NLTK's.
* On first import textattack calls ``nltk.download`` and ``stanza.download`` unless
  ``~/.cache/textattack/post_install_check_3`` exists: we create it. (TA_CACHE_DIR is left alone: it
  overwrites HF_HOME and the other cache variables.)
"""

from __future__ import annotations

import os
from pathlib import Path


def _stopwords_dir() -> Path:
    return Path(os.environ.get("BERTPROBE_TEXTATTACK_DATA", Path.home() / ".cache" / "bertprobe-textattack")) / "nltk_data"


def prepare() -> None:
    """Apply the three fixes; idempotent, and touching nothing outside the user's cache folders."""
    import transformers

    if not hasattr(transformers, "LayoutLMv2FeatureExtractor"):
        class LayoutLMv2FeatureExtractor:  # noqa: D401 - placeholder for flair's isinstance check
            """Placeholder: removed in transformers 5, only isinstance-checked by flair."""

        transformers.LayoutLMv2FeatureExtractor = LayoutLMv2FeatureExtractor  # type: ignore[attr-defined]
    data = _stopwords_dir()
    english = data / "corpora" / "stopwords" / "english"
    if not english.is_file():
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

        english.parent.mkdir(parents=True, exist_ok=True)
        english.write_text("\n".join(sorted(ENGLISH_STOP_WORDS)) + "\n", encoding="utf-8")
    import nltk

    if str(data) not in nltk.data.path:
        nltk.data.path.insert(0, str(data))
    marker = Path.home() / ".cache" / "textattack" / "post_install_check_3"
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()
