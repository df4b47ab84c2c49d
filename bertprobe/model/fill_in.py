"""Context-fitting word substitutions proposed by a masked LM: CheckList's masked-LM fill-ins (Ribeiro et al.
2020) and BAE's replacements (Garg & Ramakrishnan 2020, "BAE: BERT-based Adversarial Examples for Text
Classification"), for any probe that edits sentences.

One masked copy per word the caller lets go (``Slot``): the word's characters are replaced by the tokenizer's
mask token *as text*, so a word of several pieces ("un ##watch ##able", "Ġun watch able") is masked as one mask
token and the model proposes one token in its place (BAE-R does the same; a fill-in of several tokens is not
proposed). Every masked copy goes through ``MaskedScorer.top_tokens`` in batches. A candidate is kept when it
is among the ``top_k`` most probable tokens, has probability >= ``min_prob``, is a whole word and not the
original word (case-insensitively), is no stop word and is not ``blocked``.

Whole words only: a candidate is decoded (``convert_tokens_to_string``: a byte-level BPE 'Ġ' becomes the space
it stands for, a SentencePiece '▁' too) and kept only when that word, written where the original stood (after a
space, or not), tokenizes back to exactly that one token. A WordPiece continuation ('##ing'), a BPE piece
without its 'Ġ' after a space, a special token or punctuation fails the round trip or the letters test.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from bertprobe.errors import ProbeError
from bertprobe.model.masked_scoring import MaskedScorer

WORD_LETTERS = re.compile(r"[A-Za-z]{2,}(?:[-'][A-Za-z]+)*")  # what a proposed substitute may be


@dataclass(frozen=True)
class Slot:
    """A word of ``sentences[sentence]`` that may be replaced: its characters ``start:end``."""

    sentence: int
    start: int
    end: int


@dataclass(frozen=True)
class Proposal:
    """A substitute for a slot's word: the edited sentence and the masked LM's probability of the substitute."""

    slot: Slot
    original: str
    substitute: str
    probability: float
    text: str


def match_case(template: str, word: str) -> str:
    """``word`` capitalised as ``template`` is (UPPER, Capitalised or as given)."""
    if template.isupper() and len(template) > 1:
        return word.upper()
    if template[:1].isupper():
        return word[:1].upper() + word[1:]
    return word


def default_stop_words() -> frozenset[str]:
    """The shipped English stop words (``bertprobe/tasks/stopwords_en.txt``, scikit-learn's list: provenance in
    its header)."""
    from bertprobe.tasks.answer_text import stop_words

    return stop_words()


def _space_into_mask(tok: Any, ids: tuple[int, ...], mask_id: int) -> tuple[int, ...]:
    """The ids with a lone space token before the mask dropped: a byte-level BPE whose mask token does not strip the
    space on its left (``lstrip``, as RoBERTa's own does) would leave a 'Ġ' there, and the mask then stands for
    the word with its space, as the model's 'Ġword' tokens do."""
    if ids.count(mask_id) != 1:
        return ids
    at = ids.index(mask_id)
    if at > 0 and ids[at - 1] not in tok.all_special_ids and \
            tok.convert_tokens_to_string([tok.convert_ids_to_tokens(ids[at - 1])]).strip() == "":
        return ids[: at - 1] + ids[at:]
    return ids


class _WholeWords:
    """Which vocabulary ids decode to a whole word at a place (after a space or not): computed once per id."""

    def __init__(self, tokenizer: Any) -> None:
        self.tok = tokenizer
        self.special = set(tokenizer.all_special_ids)
        self._seen: dict[tuple[int, bool], str | None] = {}

    def word(self, token_id: int, spaced: bool) -> str | None:
        key = (token_id, spaced)
        if key not in self._seen:
            self._seen[key] = self._word(token_id, spaced)
        return self._seen[key]

    def _word(self, token_id: int, spaced: bool) -> str | None:
        if token_id in self.special:
            return None
        piece = self.tok.convert_ids_to_tokens(token_id)
        if not isinstance(piece, str) or piece.startswith("##"):
            return None  # a WordPiece continuation
        word = self.tok.convert_tokens_to_string([piece]).strip()
        if not WORD_LETTERS.fullmatch(word):
            return None
        back = self.tok((" " if spaced else "") + word, add_special_tokens=False)["input_ids"]
        return word if list(back) == [token_id] else None


def propose_substitutions(target: Any, sentences: Sequence[str], slots: Sequence[Slot], top_k: int = 20,
                          min_prob: float = 0.02, stop: Collection[str] | None = None, blocked: Collection[str] = (),
                          progress: Callable[..., Iterable[Any]] | None = None,
                          rows_per_step: int = 256) -> list[list[Proposal]]:
    """For each slot (in order), the substitutes a masked-LM ``target`` proposes for its word, most probable first.

    ``stop``: words never proposed (None: ``default_stop_words()``); ``blocked``: more of them (say, a lexicon's
    label-bearing words); both compared lower-cased. A slot whose masked sentence is longer than the model's
    positions gets no proposal. ``progress(iterable, total=, desc=)`` wraps the batched steps."""
    if top_k < 1 or not 0.0 < min_prob < 1.0:
        raise ProbeError("fill-in proposals need top_k >= 1 and min_prob in (0, 1)")
    scorer = MaskedScorer(target)
    tok = scorer.tok
    mask_text, mask_id = tok.mask_token, tok.mask_token_id
    never = {w.lower() for w in (default_stop_words() if stop is None else stop)} | {w.lower() for w in blocked}
    masked = [sentences[s.sentence][: s.start] + mask_text + sentences[s.sentence][s.end :] for s in slots]
    encoded = [_space_into_mask(tok, e.ids, mask_id) for e in scorer.encode(masked)]
    rows = [i for i, ids in enumerate(encoded) if ids.count(mask_id) == 1 and len(ids) <= scorer.max_length]
    found: dict[int, list[tuple[int, float]]] = {}
    steps: Iterable[int] = range(0, len(rows), rows_per_step)
    if progress is not None:
        steps = progress(list(steps), total=-(-len(rows) // rows_per_step), desc=f"masked-LM fill-ins ({len(rows)} words)")
    for start in steps:
        chunk = rows[start : start + rows_per_step]
        best = scorer.top_tokens([encoded[i] for i in chunk], [encoded[i].index(mask_id) for i in chunk], top_k)
        found.update(zip(chunk, best))
    words = _WholeWords(tok)
    out: list[list[Proposal]] = []
    for i, slot in enumerate(slots):
        sentence = sentences[slot.sentence]
        original = sentence[slot.start : slot.end]
        spaced = slot.start > 0 and sentence[slot.start - 1].isspace()
        kept: list[Proposal] = []
        seen = {original.lower()}
        for token_id, p in found.get(i, []):
            if p < min_prob:
                break  # most probable first
            word = words.word(token_id, spaced)
            if word is None or word.lower() in seen or word.lower() in never:
                continue
            seen.add(word.lower())
            word = match_case(original, word)
            kept.append(Proposal(slot, original, word, float(p), sentence[: slot.start] + word + sentence[slot.end :]))
        out.append(kept)
    return out
