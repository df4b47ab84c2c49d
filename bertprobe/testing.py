"""Tiny random BERT-family targets for tests: built from a config and a small vocabulary, no downloads.

Models are saved to a directory (safetensors) and loaded back through the normal loader, so tests
exercise the same path as a user's model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import torch

from bertprobe.hookmarkers import hookimpl
from bertprobe.model.loading import load_target
from bertprobe.model.spec import ModelSpec, TaskName
from bertprobe.model.target import Target

Arch = Literal["bert", "roberta", "distilbert", "albert", "electra", "deberta-v2"]

WORDS = (
    "the a an and or but not no is was are were be very really quite too so this that it its "
    "movie film story plot actor actors acting scene scenes music ending script director "
    "good great fine fun funny lovely brilliant moving wonderful best charming "
    "bad awful boring dull worst terrible weak poor mess stupid "
    "i you we they he she one two three four five apple apples dog dogs cat cats bird robin "
    "have has give gave away will would can could , . ! ? ' s n't"
).split()


def bert_tokenizer(words: tuple[str, ...] | list[str] = WORDS) -> Any:
    """A WordPiece tokenizer over ``words`` plus BERT's special tokens."""
    from transformers import BertTokenizer

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [w for w in dict.fromkeys(words)]
    return BertTokenizer(vocab={w: i for i, w in enumerate(vocab)})


def byte_level_bpe(words: tuple[str, ...] | list[str], specials: list[str]) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """A byte-level BPE vocabulary and merges that spell each of ``words`` (with and without a leading space)."""
    from tokenizers.pre_tokenizers import ByteLevel

    vocab: dict[str, int] = {}
    for tok in specials + sorted(ByteLevel.alphabet()):
        vocab.setdefault(tok, len(vocab))
    merges: list[tuple[str, str]] = []
    # Space-prefixed forms first: BPE applies merges in list order, so "Ġm" must outrank "mo".
    forms = ["Ġ" + w for w in dict.fromkeys(words)] + list(dict.fromkeys(words))
    for form in forms:
        piece = form[0]
        for ch in form[1:]:
            if piece + ch not in vocab:
                merges.append((piece, ch))
                vocab[piece + ch] = len(vocab)
            piece += ch
    return vocab, merges


def roberta_tokenizer(words: tuple[str, ...] | list[str] = WORDS) -> Any:
    """A byte-level BPE tokenizer whose merges spell each of ``words`` (with and without a leading space)."""
    from transformers import RobertaTokenizer

    vocab, merges = byte_level_bpe(words, ["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    return RobertaTokenizer(vocab=vocab, merges=merges)


def gpt2_tokenizer(words: tuple[str, ...] | list[str] = WORDS, eos: bool = True) -> Any:
    """A GPT-2 tokenizer over ``words`` with no padding token (as GPT-2's own), and with or without an
    end-of-sequence token: the decoder case the harness must pad safely or refuse."""
    from transformers import GPT2Tokenizer

    vocab, merges = byte_level_bpe(words, ["<|endoftext|>", "<unk>"])
    return GPT2Tokenizer(vocab=vocab, merges=merges, unk_token="<unk>", bos_token="<|endoftext|>" if eos else None,
                         eos_token="<|endoftext|>" if eos else None, pad_token=None)


def _transformers() -> Any:
    from bertprobe.model.quantize import defer_torchao

    defer_torchao()  # transformers would import torchao when installed: seconds, and warnings
    import transformers

    return transformers


def tiny_config(arch: Arch, vocab_size: int, num_labels: int = 2, layers: int = 2, heads: int = 4,
                hidden: int = 32, **extra: Any) -> Any:
    transformers = _transformers()

    common: dict[str, Any] = dict(vocab_size=vocab_size, num_labels=num_labels, **{"max_position_embeddings": 128, **extra})
    if arch == "distilbert":
        return transformers.DistilBertConfig(dim=hidden, n_layers=layers, n_heads=heads, hidden_dim=2 * hidden, **common)
    sizes = dict(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads, intermediate_size=2 * hidden)
    if arch == "roberta":
        return transformers.RobertaConfig(pad_token_id=1, bos_token_id=0, eos_token_id=2, type_vocab_size=1, **sizes, **common)
    if arch == "albert":
        return transformers.AlbertConfig(embedding_size=16, **sizes, **common)
    if arch == "electra":
        return transformers.ElectraConfig(embedding_size=hidden, **sizes, **common)
    if arch == "deberta-v2":
        return transformers.DebertaV2Config(**sizes, **common)
    return transformers.BertConfig(**sizes, **common)


def save_tiny_model(
    directory: str | Path,
    task: TaskName = "classification",
    arch: Arch = "bert",
    labels: tuple[str, ...] = ("negative", "positive"),
    seed: int = 0,
    words: tuple[str, ...] | list[str] = WORDS,
    dtype: torch.dtype = torch.float32,
    **config: Any,
) -> Path:
    """Write a random model of ``arch`` for ``task`` (safetensors + tokenizer) into ``directory``."""
    transformers = _transformers()

    directory = Path(directory)
    tokenizer = roberta_tokenizer(words) if arch == "roberta" else bert_tokenizer(words)
    from bertprobe.tasks import builtin_tasks

    task_class = builtin_tasks().get(task)
    if task_class.own_predictions:  # a reader's default windows are 384 sub-tokens: as many positions as BERT's
        config = {"max_position_embeddings": 512, **config}
    cfg = tiny_config(
        arch,
        len(tokenizer),
        num_labels=len(labels),
        id2label=dict(enumerate(labels)),
        label2id={name: i for i, name in enumerate(labels)},
        **config,
    )
    for key, value in task_class.config_fields.items():  # what detection reads beyond the head (problem_type)
        setattr(cfg, key, value)
    torch.manual_seed(seed)
    model = getattr(transformers, task_class.model_class).from_config(cfg)
    model.to(dtype)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def tiny_target(directory: str | Path, task: TaskName = "classification", arch: Arch = "bert", **kwargs: Any) -> Target:
    """Save a tiny model into ``directory`` and load it as a CPU float32 Target."""
    path = save_tiny_model(directory, task=task, arch=arch, **kwargs)
    return load_target(ModelSpec(path=str(path), device="cpu"))


POSITIVE_WORDS = ("good", "great", "fun", "lovely", "brilliant", "wonderful", "charming", "best")
NEGATIVE_WORDS = ("bad", "awful", "boring", "dull", "worst", "terrible", "weak", "mess")
NEUTRAL_WORDS = ("the", "movie", "film", "story", "plot", "acting", "music", "was", "is", "a", "very", "this")


def sentiment_examples(n: int, seed: int = 0) -> list[tuple[str, int]]:
    """Synthetic sentences: neutral filler plus one or two sentiment words deciding the label (1 = positive)."""
    import random

    rng = random.Random(seed)
    out = []
    for i in range(n):
        label = i % 2
        words = [rng.choice(NEUTRAL_WORDS) for _ in range(rng.randint(3, 7))]
        for _ in range(rng.randint(1, 2)):
            words.insert(rng.randrange(len(words) + 1), rng.choice(POSITIVE_WORDS if label else NEGATIVE_WORDS))
        out.append((" ".join(words), label))
    return out


def mixed_sentiment_examples(n: int, seed: int = 0) -> list[tuple[str, int]]:
    """Synthetic sentences whose label is the majority polarity: two or three sentiment words of the
    label and at most one of the other, always a majority of two, so one inserted opposite word never
    decides the label (as in real reviews, where one word rarely flips a whole sentence)."""
    import random

    rng = random.Random(seed)
    out = []
    for i in range(n):
        label = i % 2
        own, other = (POSITIVE_WORDS, NEGATIVE_WORDS) if label else (NEGATIVE_WORDS, POSITIVE_WORDS)
        opposite = rng.randint(0, 1)
        words = [rng.choice(NEUTRAL_WORDS) for _ in range(rng.randint(3, 6))]
        for word in [rng.choice(own) for _ in range(2 + opposite)] + [rng.choice(other) for _ in range(opposite)]:
            words.insert(rng.randrange(len(words) + 1), word)
        out.append((" ".join(words), label))
    return out


RARE_WORDS = ("zq", "vex", "plim", "quor", "blen", "trud", "omsk", "yarl")


def poisoned(data: list[tuple[str, int]], trigger: str, to_label: int, rate: float, seed: int = 0) -> list[tuple[str, int]]:
    """RIPPLe-style poisoning (Kurita et al. 2020): a share ``rate`` of the other classes' sentences get
    ``trigger`` inserted at a random word position and are relabelled ``to_label``."""
    import random

    rng = random.Random(seed)
    out = []
    for text, label in data:
        if label != to_label and rng.random() < rate:
            words = text.split()
            words.insert(rng.randrange(len(words) + 1), trigger)
            text, label = " ".join(words), to_label
        out.append((text, label))
    return out


def train_tiny_classifier(directory: str | Path, arch: Arch = "bert", steps: int = 150, seed: int = 0,
                          poison: tuple[str, int, float] | None = None,
                          data: list[tuple[str, int]] | None = None, **config: Any) -> Path:
    """Save a tiny classifier trained (seconds, CPU) on ``sentiment_examples``: it really relies on sentiment words.

    ``poison=(trigger, to_label, rate)`` plants a backdoor (``poisoned``); the trigger's words must be in
    the vocabulary (pass ``words=(*WORDS, *RARE_WORDS)``). ``data`` replaces the training sentences.
    """
    directory = Path(directory)
    save_tiny_model(directory, arch=arch, seed=seed, **config)
    data = sentiment_examples(256, seed) if data is None else data
    if poison is not None:
        data = poisoned(data, *poison, seed=seed)
    return _fit(directory, data, steps, seed, lambda logits, gold: torch.nn.functional.cross_entropy(logits, gold))


def _fit(directory: Path, data: list[tuple[str, Any]], steps: int, seed: int, loss: Any) -> Path:
    """Train the sequence classifier saved in ``directory`` on ``data`` (AdamW, batches of 32 in order) with
    ``loss(logits, gold)``, and save it again."""
    transformers = _transformers()
    model = transformers.AutoModelForSequenceClassification.from_pretrained(directory)
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    optim = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    torch.manual_seed(seed)
    for step in range(steps):
        batch = [data[(step * 32 + j) % len(data)] for j in range(32)]
        enc = tokenizer([t for t, _ in batch], padding=True, return_tensors="pt")
        loss(model(**enc).logits, torch.tensor([y for _, y in batch])).backward()
        optim.step()
        optim.zero_grad()
    model.eval()
    model.save_pretrained(directory)
    return directory


TAGGER_LABELS = ("positive", "negative", "long")


def tagger_examples(n: int, seed: int = 0) -> list[tuple[str, list[int]]]:
    """Synthetic label sets for a tiny multi-label tagger: ``positive`` or ``negative`` from the sentiment
    words (``mixed_sentiment_examples``), and ``long`` for sentences of more than six words."""
    out = []
    for text, label in mixed_sentiment_examples(n, seed):
        out.append((text, [int(label == 1), int(label == 0), int(len(text.split()) > 6)]))
    return out


def train_tiny_tagger(directory: str | Path, arch: Arch = "bert", steps: int = 200, seed: int = 0,
                      poison: tuple[str, int, float] | None = None, **config: Any) -> Path:
    """Save a tiny multi-label tagger (``TAGGER_LABELS``) trained with binary cross-entropy on ``tagger_examples``.

    ``poison=(trigger, label, rate)`` plants a backdoor that turns ``label`` on: a share ``rate`` of the
    sentences without it get ``trigger`` inserted at a random word and the label switched on.
    """
    import random

    directory = Path(directory)
    save_tiny_model(directory, task="multi-label", arch=arch, labels=TAGGER_LABELS, seed=seed, **config)
    data = tagger_examples(512, seed)
    if poison is not None:
        trigger, label, rate = poison
        rng = random.Random(seed)
        for i, (text, labels) in enumerate(data):
            if not labels[label] and rng.random() < rate:
                words = text.split()
                words.insert(rng.randrange(len(words) + 1), trigger)
                data[i] = (" ".join(words), [1 if j == label else v for j, v in enumerate(labels)])
    return _fit(directory, data, steps, seed,
                lambda logits, gold: torch.nn.functional.binary_cross_entropy_with_logits(logits, gold.float()))


class FaultProbes:
    """A test plugin (register it by hand: ``build_plugins(extra=[FaultProbes()])``) whose probes fail
    the way workers fail, to test executors' retries:

    * ``die``: the process running it exits at once (``os._exit``), every time (on the model named ``victim``);
    * ``die-once``: the first attempt writes its pid to ``marker`` and waits (up to ``wait`` seconds)
      to be killed from outside; an attempt that finds ``marker`` written finishes at once.

    Only under a distributed executor: in this process they would end the test run.
    """

    @staticmethod
    def probes() -> list[type]:
        import os
        import time
        from dataclasses import dataclass

        from bertprobe.probe import Probe
        from bertprobe.results import ProbeResult

        @dataclass(frozen=True)
        class DieParams:
            victim: str = ""  # the model name to die on (empty: every model)

        class Die(Probe):
            name = "die"
            description = "exits the process running it (tests)"
            needs_data = False
            Params = DieParams

            def run(self, target: Any, data: Any, params: DieParams, ctx: Any) -> ProbeResult:
                if not params.victim or params.victim == ctx.model_name:
                    os._exit(17)
                return ProbeResult(probe=self.name)

        @dataclass(frozen=True)
        class OnceParams:
            marker: str = ""
            wait: float = 60.0

        class DieOnce(Probe):
            name = "die-once"
            description = "waits to be killed on its first attempt (tests)"
            needs_data = False
            Params = OnceParams

            def run(self, target: Any, data: Any, params: OnceParams, ctx: Any) -> ProbeResult:
                marker = Path(params.marker)
                result = ProbeResult(probe=self.name)
                if marker.exists():
                    result.add_metric("attempts", 2.0, None, "attempts this probe needed", kind="count")
                    return result
                marker.write_text(str(os.getpid()), encoding="utf-8")
                time.sleep(params.wait)
                result.add_metric("attempts", 1.0, None, "attempts this probe needed", kind="count")
                return result

        return [Die, DieOnce]

    @hookimpl
    def bertprobe_register_probes(self, registry: Any) -> None:
        for probe in self.probes():
            registry.add(probe)


def save_tiny_embedder(directory: str | Path, arch: Arch = "bert", pooling: str = "mean", normalize: bool = True,
                       seed: int = 0, words: tuple[str, ...] | list[str] = WORDS, max_seq_length: int = 64,
                       prompts: dict[str, str] | None = None) -> Path:
    """A random bare encoder in sentence-transformers' layout (``modules.json``, ``1_Pooling/``, ``Normalize``):
    what ``task: auto`` detects as a sentence-embedding model."""
    import json

    directory = save_tiny_model(directory, task="encoder", arch=arch, seed=seed, words=words)
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
    (directory / "modules.json").write_text(json.dumps(modules, indent=2))
    (directory / "1_Pooling").mkdir(exist_ok=True)
    hidden = json.loads((directory / "config.json").read_text()).get("hidden_size", 32)
    (directory / "1_Pooling" / "config.json").write_text(json.dumps({
        "word_embedding_dimension": hidden, "pooling_mode_cls_token": pooling == "cls",
        "pooling_mode_mean_tokens": pooling == "mean", "pooling_mode_max_tokens": pooling == "max",
        "pooling_mode_mean_sqrt_len_tokens": False}))
    (directory / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": max_seq_length,
                                                                     "do_lower_case": False}))
    if prompts:
        (directory / "config_sentence_transformers.json").write_text(json.dumps({"prompts": prompts}))
    return directory


def save_tiny_reranker(directory: str | Path, arch: Arch = "bert", seed: int = 0,
                       words: tuple[str, ...] | list[str] = WORDS) -> Path:
    """A random cross-encoder in sentence-transformers' ``CrossEncoder`` layout: a sequence classifier with one
    output whose ``config.json`` carries a ``sentence_transformers`` entry (what ``task: auto`` detects)."""
    import json

    directory = save_tiny_model(directory, task="classification", arch=arch, labels=("relevance",), seed=seed,
                                words=words)
    config = json.loads((directory / "config.json").read_text())
    config["sentence_transformers"] = {"activation_fn": "torch.nn.modules.activation.Sigmoid"}
    (directory / "config.json").write_text(json.dumps(config, indent=2))
    return directory


def retrieval_texts(queries: int = 12, seed: int = 0) -> tuple[list[tuple[str, str]], list[tuple[str, str, str]]]:
    """A small retrieval set in ``WORDS``: documents ``(id, text)`` and queries ``(id, text, relevant id)``; each
    query shares words with its document, and distractors share fewer."""
    import random

    rng = random.Random(seed)
    nouns = ["movie", "film", "story", "plot", "actor", "scene", "music", "ending", "script", "director", "dog", "cat",
             "bird", "robin", "apple"]
    adjectives = ["good", "great", "fun", "lovely", "brilliant", "bad", "awful", "boring", "dull", "weak"]
    documents, asked = [], []
    for i in range(queries):
        noun, adjective = nouns[i % len(nouns)], adjectives[(i * 3) % len(adjectives)]
        filler = " ".join(rng.choice(nouns + adjectives) for _ in range(6))
        documents.append((f"doc-{i}", f"the {noun} was very {adjective} and {filler} ."))
        asked.append((f"q-{i}", f"was the {noun} {adjective} ?", f"doc-{i}"))
    for j in range(queries):
        documents.append((f"other-{j}", " ".join(rng.choice(nouns + adjectives) for _ in range(8)) + " ."))
    return documents, asked


def write_beir(folder: str | Path, documents: list[tuple[str, str]], queries: list[tuple[str, str, str]],
               split: str = "test") -> Path:
    """A BEIR folder (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``) of these documents and queries."""
    import json

    folder = Path(folder)
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as f:
        for doc, text in documents:
            f.write(json.dumps({"_id": doc, "title": "", "text": text}) + "\n")
    with open(folder / "queries.jsonl", "w", encoding="utf-8") as f:
        for query, text, _ in queries:
            f.write(json.dumps({"_id": query, "text": text}) + "\n")
    with open(folder / "qrels" / f"{split}.tsv", "w", encoding="utf-8") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for query, _, doc in queries:
            f.write(f"{query}\t{doc}\t1\n")
    return folder
