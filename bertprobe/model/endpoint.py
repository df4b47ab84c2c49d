"""A served model as the target: an HTTP endpoint audited through the ``Target`` interface the probes use.

A model entry naming ``endpoint: URL`` (and ``protocol: v2 | v1 | hf`` or a codec plugin's) loads as an
``EndpointTarget``: the server's readiness and metadata are read first (its version goes into the report and every
cache key), then inputs are sent as text (the server tokenises), batched, concurrently, each answered once per run
through the response cache in the run folder (``bertprobe.model.endpoint_runner``). A classifier's scores come back
as logits or probabilities (read as ``log p``, so the task's softmax gives the served probabilities back); a
reader's answers as character spans of the context. Labels come from the suite (``labels:``), the server, or the
``twin:`` checkpoint, and must agree where several name them.

An endpoint has predictions only: no gradients, attention maps or heads (``ENDPOINT_LACKS``), and without scores
(a labels-only endpoint) no probabilities. Probes needing those are refused before anything is sent, or run on the
``twin:`` where the suite names one (``lacks``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from bertprobe.errors import CodecError, TargetError
from bertprobe.model.credentials import SECRET_HEADERS, is_credential_header
from bertprobe.model.endpoint_codecs import ServedModel, make_codec
from bertprobe.model.spec import ModelSpec
from bertprobe.model.target import Encoded, Target
from bertprobe.variables import VAR, defaults_in, expand_vars

ENDPOINT_LACKS = {
    "gradients": "an endpoint answers forward passes only: no backward pass",
    "input-gradients": "an endpoint answers forward passes only: no gradients at the input embeddings",
    "attentions": "an endpoint returns its outputs, not attention maps",
    "heads": "an endpoint has no attention heads bertprobe can mask or prune",
    "uniform-heads": "an endpoint has no attention heads bertprobe can read",
    "mask-token": "an endpoint's tokenizer is the server's",
    "mlm": "an endpoint serves a task's outputs, not a masked LM's",
}
LABELS_ONLY_LACKS = {"probabilities": "it answers with a label and no scores (outputs: labels)"}
INSTALL = "pip install httpx (a dependency of bertprobe: reinstall it with pip install -e .)"
CACHE_FILE = "endpoint-cache.sqlite"
DEFAULT_TASK = "classification"  # what an endpoint serves when neither the suite, a twin nor its metadata says
DETERMINISM_SAMPLE = 8  # inputs of the first predictions sent a second time
DETERMINISM_TOLERANCE = 1e-6  # scores this close are the same answer (a float32 server's are equal)
LABEL_LOGIT = -1e4  # a labels-only endpoint's other classes: log(0), kept finite


def is_endpoint(spec: Any) -> bool:
    return getattr(spec, "endpoint", None) is not None


def lacks(spec: ModelSpec) -> dict[str, str]:
    """What a served model ``spec`` names lacks, with why (none for a local model), known before anything loads."""
    if not is_endpoint(spec):
        return {}
    out = dict(ENDPOINT_LACKS)
    if spec.outputs == "labels":
        out.update(LABELS_ONLY_LACKS)
    return out


def check_endpoint_spec(spec: ModelSpec) -> list[str]:
    """What is wrong with a served model's entry, before anything is sent (each a ``KEY: problem`` line)."""
    problems = []
    for key, value in spec.headers.items():
        if not isinstance(value, str):
            problems.append(f"headers.{key}: expected a string")
        elif value and not VAR.search(value) and is_credential_header(key):
            problems.append(f"headers.{key}: write the token as ${{VAR}} (read from the environment), never in the suite")
        elif is_credential_header(key) and defaults_in(value):
            problems.append(f"headers.{key}: a ${{VAR:-default}} writes the token in the suite; write ${{VAR}} alone "
                            "(read from the environment), never a default")
    if not spec.verify_tls and str(spec.endpoint).startswith("http://"):
        problems.append("verify_tls: false applies to https only; leave it out for an http endpoint")
    return problems


def refusal(probe_id: str, probe_name: str, missing: Sequence[str], spec: ModelSpec) -> str:
    """Why a probe cannot run on an endpoint, and what to do instead."""
    reasons = "; ".join(f"{m}: {lacks(spec).get(m, m)}" for m in missing)
    return (f"probe {probe_id} ({probe_name}) cannot run on {spec.label}, which is served at {spec.endpoint} ({reasons}); "
            f"name the checkpoint it serves as the model's twin: (the probe then runs there), give the probe 'model:' "
            f"naming a local model, or leave it out with --only")


def headers_from_env(headers: dict[str, str], env: Any = None) -> dict[str, str]:
    """The headers with their ``${VAR}``s and ``${VAR:-default}``s read from the environment (``bertprobe.variables``,
    as the suite's values are); an unset one without a default is an error naming it (never a value)."""
    env = os.environ if env is None else env
    out = {}
    for key, value in headers.items():

        def unset(name: str, key: str = str(key)) -> str:
            raise TargetError(f"model.headers.{key} names ${{{name}}}, which is not set; export it before the run "
                              f"(tokens come from the environment only), or write ${{{name}:-default}} for a header "
                              "that is no credential")

        out[str(key)] = expand_vars(str(value), env, unset)
    return out


CACHE_KEY_NOTE = "cache keys: the routing headers, credentials told by their names' words"  # today's form, recorded


def routing_digest(headers: dict[str, str]) -> str:
    """The sha256 of the headers that may route a request (``Host``, ``x-model-version``...), as expanded: credentials
    (``credentials.is_credential_header``: ``Authorization``, ``X-Auth-Token``, any name with a part token, key, secret,
    auth...) are left out, so no token enters a key and a rotated one keeps the cache; empty for none."""
    from bertprobe.model.response_cache import headers_digest

    return headers_digest({k: v for k, v in headers.items() if not is_credential_header(k)})


def older_routing(headers: dict[str, str]) -> tuple[str, ...]:
    """The routing digests older bertprobes keyed ``headers``' answers by: none ("", before the headers joined the
    key), and the headers but the 5 ``SECRET_HEADERS`` (before credentials were told by their names' words). Only
    compared with a resumed run's recorded identity, never written."""
    from bertprobe.model.response_cache import headers_digest

    return ("", headers_digest({k: v for k, v in headers.items() if k.lower() not in SECRET_HEADERS}))


class ServedModule:
    """What stands where a PyTorch module would: a config for the task and the report, and no weights."""

    def __init__(self, config: Any) -> None:
        self.config = config

    def eval(self) -> ServedModule:
        return self

    def parameters(self) -> list[torch.Tensor]:
        return []

    def buffers(self) -> list[torch.Tensor]:
        return []

    def __call__(self, **batch: Any) -> Any:
        raise TargetError("an endpoint takes text, not token ids: this probe needs a local model (the endpoint's twin:)")


def _config(labels: Sequence[str], cls: Any, twin_config: Any) -> Any:
    """The twin's config, else one that says what the task's binding reads: class names, and the task's own fields
    (a multi-label model's problem_type)."""
    if twin_config is not None:
        return twin_config
    from transformers import PretrainedConfig

    config = PretrainedConfig(id2label=dict(enumerate(labels)), label2id={n: i for i, n in enumerate(labels)},
                              **dict(cls.config_fields))
    config.architectures = ["ServedModel"]
    return config


@dataclass
class EndpointTarget(Target):
    """A Target whose predictions come from an HTTP endpoint (see the module's docstring)."""

    served: ServedModel | None = None
    codec: Any = field(default=None, repr=False)
    client: Any = field(default=None, repr=False)
    cache_file: Path | None = None  # the run folder's response cache (None: in memory, this process only)
    twin: Target | None = field(default=None, repr=False)  # the checkpoint it serves, where the suite names one
    on_note: Any = field(default=None, repr=False)  # the run's: a note learnt after loading goes to the report
    deterministic: bool | None = None  # None until a sample was sent twice (the first predictions)
    routing: str = ""  # sha256 of the headers as sent, credentials left out (routing_digest): part of every cache key
    # the routing digests of older bertprobes' keys (before the headers joined them: ""; before credentials were
    # told by name: SECRET_HEADERS only): a run recorded under one resumes under it (adopt_identity)
    older_routing: tuple[str, ...] = field(default=(), repr=False)
    _runner: Any = field(default=None, repr=False)

    # ---- description -------------------------------------------------------------------------
    @property
    def capabilities(self) -> frozenset[str]:
        missing = set(ENDPOINT_LACKS) | (set(LABELS_ONLY_LACKS) if self.labels_only else set())
        return frozenset(set(self.task.capabilities) - missing)

    @property
    def twin_runs(self) -> frozenset[str]:
        """What a probe may take from the twin instead: gradients, attentions, heads; never probabilities, which
        must be the endpoint's own (the twin's would be reported under the endpoint's name)."""
        return frozenset(ENDPOINT_LACKS)

    @property
    def labels_only(self) -> bool:
        return self.spec.outputs == "labels" or bool(self.served and self.served.labels_only)

    @property
    def lacking(self) -> dict[str, str]:
        """Each capability it lacks, with why (what a refusal names)."""
        out = dict(ENDPOINT_LACKS)
        if self.labels_only:
            out.update(LABELS_ONLY_LACKS)
        return out

    @property
    def max_length(self) -> int:
        if self.spec.max_length:
            return self.spec.max_length
        if self.twin is not None:
            return self.twin.max_length
        return (self.served.max_length if self.served and self.served.max_length else 512)

    @property
    def input_names(self) -> frozenset[str]:  # type: ignore[override]
        return frozenset({"input_ids", "attention_mask"})

    @property
    def token_budget(self) -> int | None:  # type: ignore[override]
        return None

    @property
    def cache_scope(self) -> tuple[str, ...]:
        """What every cached answer is keyed by besides its input: the endpoint, model, served version, protocol, and
        the digest of the headers that may route (``routing``; left out where there are none)."""
        served = self.served or ServedModel(name=self.spec.label)
        scope = (str(getattr(self.client, "url", self.spec.endpoint)), served.name, served.version, self.codec.name)
        return (*scope, self.routing) if self.routing else scope

    def attention_sites(self) -> Any:
        raise TargetError(f"{self.name} is served at {self.spec.endpoint}: {ENDPOINT_LACKS['heads']}")

    def eager_attention(self) -> Any:
        raise TargetError(f"{self.name} is served at {self.spec.endpoint}: {ENDPOINT_LACKS['attentions']}")

    # ---- inputs --------------------------------------------------------------------------------
    @staticmethod
    def item(ex: Any) -> dict[str, Any]:
        """One example as the JSON an endpoint is sent (and the cache is keyed by)."""
        return {"text": ex.text} if ex.text_pair is None else {"text": ex.text, "text_pair": ex.text_pair}

    def encode(self, examples: Sequence[Any], cache: bool = True) -> Encoded:
        """The examples as the endpoint's inputs; lengths in the twin's tokens where there is one, else in words."""
        if self.task.rows_per_choice:
            raise TargetError(f"{self.name}: multiple-choice models are not served through {self.codec.name}")
        items = [self.item(ex) for ex in examples]
        if self.twin is not None:
            lengths = self.twin.encode(examples, cache=cache).lengths
        else:
            lengths = [len(ex.text.split()) + len((ex.text_pair or "").split()) for ex in examples]
        return Encoded(items, list(lengths))

    def collate(self, rows: Sequence[Any], pad_to: int | None = None) -> dict[str, torch.Tensor]:
        raise TargetError(f"{self.name} is served at {self.spec.endpoint}: it takes text, not token ids; a probe that "
                          "builds token batches runs on the endpoint's twin:")

    # ---- predictions ---------------------------------------------------------------------------
    def runner(self) -> Any:
        if self._runner is None:
            from bertprobe.model.endpoint_runner import EndpointRunner
            from bertprobe.model.response_cache import ResponseCache

            self._runner = EndpointRunner(self.client, self.codec, ResponseCache(self.cache_file), self.cache_scope)
        return self._runner

    def attach_cache(self, file: Path | None) -> None:
        """Keep answers in ``file`` (the run folder's), so a resumed run sends none of them again."""
        if self._runner is not None and file != self.cache_file:
            self._runner = None
        self.cache_file = file

    @property
    def served_identity(self) -> str:
        """A fingerprint of what is served (endpoint, model, version, protocol, routing headers): a resumed run must
        see the same."""
        return self._identity(self.routing)

    def _identity(self, routing: str) -> str:
        import hashlib

        served = self.served or ServedModel(name=self.spec.label)
        scope = (str(getattr(self.client, "url", self.spec.endpoint)), served.name, served.version, self.codec.name)
        return hashlib.sha256(repr((*scope, routing) if routing else scope).encode("utf-8")).hexdigest()

    def adopt_identity(self, recorded: str, recorded_notes: Sequence[str] = ()) -> str | None:
        """Take the cache keys of an older bertprobe where a resumed run was recorded under them (``recorded``, its
        served identity, is one of ``older_routing``'s): its answers are then found again and nothing it was
        answered is sent twice. A note saying so, or None where no older key form gives ``recorded``, or where the
        run's notes (``recorded_notes``) hold ``CACHE_KEY_NOTE``: it was recorded under today's form, so a different
        identity means the model or its routing changed (a run recorded without routing headers has the same
        identity as an older form's, and must not adopt it once a routing header is added)."""
        if CACHE_KEY_NOTE and CACHE_KEY_NOTE in recorded_notes:
            return None
        for routing in self.older_routing:
            if routing != self.routing and self._identity(routing) == recorded:
                self.routing, self._runner = routing, None
                how = "without its headers" if not routing else "with credential headers told by 5 names only"
                return (f"resumed under the cache keys the run was recorded with (an older bertprobe's, {how}); "
                        "a new run keys by the routing headers alone")
        return None

    def note(self, text: str) -> None:
        """A note learnt after loading (the determinism check), kept in the model's record of the report."""
        self.notes.append(text)
        if self.on_note is not None:
            self.on_note(text)

    def outputs_of(self, items: Sequence[dict[str, Any]], progress: Any = None) -> list[Any]:
        """The endpoint's normalised output for each item (``endpoint_codecs``), answered ones from the cache; the
        first time, a sample of them is sent once more to check that the endpoint answers alike."""
        from bertprobe.progress import active as active_progress

        runner = self.runner()
        runner.progress = progress if progress is not None else active_progress()
        out = runner.run(list(items))
        if self.deterministic is None and items:
            self._check_determinism(list(items[:DETERMINISM_SAMPLE]), out[:DETERMINISM_SAMPLE])
        return out

    def _check_determinism(self, items: list[dict[str, Any]], first: list[Any]) -> None:
        """Send ``items`` again past the cache and compare with ``first`` (once per endpoint and run folder)."""
        from bertprobe.model.endpoint_runner import EndpointRunner
        from bertprobe.model.response_cache import ResponseCache

        cache = self.runner().cache
        marker = ResponseCache.scoped_key(self.cache_scope, {"bertprobe": "determinism check"})
        done = cache.get_many([marker]).get(marker)
        if done is None:
            again = EndpointRunner(self.client, self.codec, ResponseCache(None), self.cache_scope).run(items)
            gap = max((_difference(a, b) for a, b in zip(first, again)), default=0.0)
            differ = sum(_difference(a, b) > DETERMINISM_TOLERANCE for a, b in zip(first, again))
            done = {"inputs": len(items), "differ": differ, "gap": gap}
            cache.put_many({marker: done})
        self.deterministic = not done["differ"]
        if done["differ"]:
            self.note(f"nondeterministic: {done['differ']} of {done['inputs']} inputs sent twice got other answers "
                      f"(scores up to {done['gap']:.3g} apart); its invariance tests and paired gates mean little")
        else:
            self.note(f"deterministic: {done['inputs']} inputs sent twice got the same answers (to {DETERMINISM_TOLERANCE:g})")

    def logits(self, data: Sequence[Any] | Encoded, batch_size: int | None = None, progress: Any = None) -> torch.Tensor:
        """Float32 ``N x C`` scores: served logits as they are, probabilities as ``log p`` (multi-label: log-odds), a
        label as 0 for it and ``LABEL_LOGIT`` elsewhere."""
        encoded = data if isinstance(data, Encoded) else self.encode(data)
        # sent sorted by length, as local batches are: a server padding each batch to its longest input does less work
        order = sorted(range(len(encoded)), key=encoded.lengths.__getitem__)
        sent = self.outputs_of([encoded.rows[i] for i in order], progress)
        outputs: list[Any] = [None] * len(sent)
        for at, i in enumerate(order):
            outputs[i] = sent[at]
        width = len(self.label_names)
        out = torch.empty(len(outputs), width, dtype=torch.float32)
        for i, o in enumerate(outputs):
            if not isinstance(o, dict) or not ("label" in o or isinstance(o.get("scores"), list)):
                raise CodecError(f"endpoint {self.spec.endpoint}: the {self.codec.name} codec gave {str(o)[:80]!r} "
                                 "for an input; expected {\"scores\": [...], \"kind\": ...} or {\"label\": NAME}")
            if "label" in o:
                if not self.labels_only:  # scores were expected: probabilities from one-hot rows would be wrong
                    raise TargetError(f"{self.spec.endpoint} answered labels without scores, but the model's entry says "
                                      f"outputs: {self.spec.outputs}; set outputs: labels (calibration is then refused)")
                name = o["label"]
                if name not in self.label_names:
                    raise TargetError(f"{self.spec.endpoint} answered label {name!r}, which is not one of the model's "
                                      f"({', '.join(self.label_names)}); set model.labels to the endpoint's names")
                row = [LABEL_LOGIT] * width
                row[self.label_names.index(name)] = 0.0
            else:
                scores = o["scores"]
                if len(scores) != width:
                    raise TargetError(f"{self.spec.endpoint} answered {len(scores)} scores for a model of {width} classes "
                                      f"({', '.join(self.label_names)}); set model.labels to the endpoint's classes")
                row = scores if o.get("kind") == "logits" else [self._from_probability(p) for p in scores]
            out[i] = torch.tensor(row, dtype=torch.float64).float()
        return out

    def _from_probability(self, p: float) -> float:
        p = min(max(p, 1e-45), 1.0)
        if self.task.label_sets:  # a sigmoid per label: its inverse
            return math.log(p) - math.log1p(-min(p, 1 - 1e-7))
        return math.log(p)

    def served_answers(self, examples: Sequence[Any], progress: Any = None) -> list[Any]:
        """A reader's answers: the endpoint's character spans, as the task's ``Answer``s (what EM and F1 read)."""
        from bertprobe.tasks.spans import Answer

        items = [{"question": ex.text, "context": ex.text_pair or ""} for ex in examples]
        out = []
        for o in self.outputs_of(items, progress):
            score = float(o.get("score", 0.0))
            out.append(Answer(text=o["answer"], start=int(o["start"]), end=int(o["end"]), score=score,
                              confidence=score, null_score=float("nan"), windows=1, abstained=not o["answer"]))
        return out

    @property
    def requests_sent(self) -> int:
        return int(getattr(self.client, "requests_sent", 0))

    def close(self) -> None:
        if self.client is not None:
            self.client.close()


def _difference(a: Any, b: Any) -> float:
    """How far two outputs of one input are apart: the largest score difference, or 1 for another label or span."""
    if isinstance(a, dict) and isinstance(b, dict) and "scores" in a and "scores" in b and len(a["scores"]) == len(b["scores"]):
        return max((abs(x - y) for x, y in zip(a["scores"], b["scores"])), default=0.0)
    if isinstance(a, dict) and isinstance(b, dict) and "answer" in a and "answer" in b:  # a reader: the span decides
        same = all(a.get(k) == b.get(k) for k in ("answer", "start", "end"))
        return abs(float(a.get("score", 0.0)) - float(b.get("score", 0.0))) if same else 1.0
    return 0.0 if a == b else 1.0


def twin_spec(spec: ModelSpec) -> ModelSpec | None:
    """The local model a served entry's ``twin:`` names, as it loads (the same spec as a suite entry of that
    checkpoint with the same device and settings: the run's cache then loads it once): the entry's device, task,
    lengths, batch sizes, options, revision, thresholds and loading permissions carry over."""
    if not spec.twin:
        return None
    return ModelSpec(path=spec.twin, device=spec.device, dtype=spec.dtype, task=spec.task, max_length=spec.max_length,
                     stride=spec.stride, batch_size=spec.batch_size, token_budget=spec.token_budget,
                     options=dict(spec.options), revision=spec.revision, threshold=spec.threshold,
                     thresholds=dict(spec.thresholds), trust_remote_code=spec.trust_remote_code,
                     allow_pickle=spec.allow_pickle, allow_missing_weights=spec.allow_missing_weights)


def _twin(spec: ModelSpec, tasks: Any, load_local: Any) -> Target | None:
    local = twin_spec(spec)
    return load_local(local, tasks) if local is not None else None


def _labels(spec: ModelSpec, served: ServedModel, twin: Target | None) -> tuple[str, ...]:
    """The class names, from the suite, the server and the twin, which must agree where several give them."""
    given = [("model.labels", tuple(spec.labels)), ("the server", tuple(served.labels)),
             ("the twin", tuple(twin.label_names) if twin is not None else ())]
    named = [(where, labels) for where, labels in given if labels]
    for where, labels in named[1:]:
        if labels != named[0][1]:
            raise TargetError(f"{spec.label}: {named[0][0]} names the classes {', '.join(named[0][1])}, {where} "
                              f"{', '.join(labels)}; the endpoint may serve another model than its twin, or set "
                              "model.labels to the endpoint's names in class order")
    return named[0][1] if named else ()


def load_endpoint_target(spec: ModelSpec, tasks: Any = None, codecs: Any = None,
                         load_local: Any = None) -> EndpointTarget:
    """The endpoint ``spec`` names, its readiness and metadata read (nothing else is sent until a probe asks);
    ``load_local`` loads its twin (``loading.load_target``, which calls this)."""
    try:
        from bertprobe.model.http_client import ClientSettings, EndpointClient
    except ImportError:
        raise TargetError(f"model {spec.label} is served at {spec.endpoint}; auditing an endpoint needs httpx: "
                          f"{INSTALL}") from None
    from bertprobe.tasks import builtin_tasks, task_options

    tasks = tasks or builtin_tasks()
    twin = _twin(spec, tasks, load_local)
    settings = ClientSettings(batch_size=spec.batch_size, concurrency=spec.concurrency, timeout_s=spec.timeout_s,
                              retries=spec.retries, max_requests=spec.max_requests, verify_tls=spec.verify_tls)
    notes: list[str] = []
    headers = headers_from_env(dict(spec.headers))
    client = EndpointClient(str(spec.endpoint).rstrip("/"), headers, settings, say=notes.append)
    early = spec.task if spec.task != "auto" else (twin.task.name if twin is not None else None)
    early_cls = tasks.get(early) if early else None
    factories = {name: codecs.get(name) for name in codecs.names()} if codecs is not None else {}
    codec = make_codec(spec.protocol, factories, model=spec.served_model, labels=tuple(spec.labels),
                       outputs=spec.outputs, label_sets=bool(early_cls and early_cls.label_sets),
                       reader=bool(early_cls and early_cls.span_answers))
    try:
        served = codec.metadata(client.get_json) if hasattr(codec, "metadata") else ServedModel(name=spec.served_model)
    except TargetError:
        client.close()
        raise
    except (ValueError, TypeError, KeyError, AttributeError, IndexError) as exc:  # a metadata shape the codec misread
        client.close()
        raise CodecError(f"endpoint {spec.label}: its {codec.name} metadata does not fit the protocol "
                         f"({type(exc).__name__}: {exc}); check protocol: and served_name:") from None
    task_name = early or served.task or DEFAULT_TASK
    cls = tasks.get(task_name)
    labels = _labels(spec, served, twin)
    if not labels and not cls.span_answers:
        client.close()
        raise TargetError(f"{spec.label}: neither the server nor a twin names the endpoint's classes; set model.labels "
                          "to its class names in class order (e.g. labels: [negative, positive]) or name its twin:")
    codec.labels = labels  # the codec reads names (TEI's {label, score}) in class order
    for flag, value in (("label_sets", cls.label_sets), ("reader", cls.span_answers)):
        if hasattr(codec, flag):
            setattr(codec, flag, value)
    config = _config(labels, cls, twin.model.config if twin is not None else None)
    task = cls.bind(config, task_options(spec))
    device = torch.device("cpu")
    served_note = (f"served at {spec.endpoint} ({codec.name}); model {served.name}"
                   + (f", version {served.version}" if served.version else ", no version reported"))
    notes = [served_note, *served.notes, *notes, *([CACHE_KEY_NOTE] if CACHE_KEY_NOTE else [])]
    if twin is not None:
        notes.append(f"twin: {spec.twin} (probes that need gradients, attentions or heads run there)")
    return EndpointTarget(spec=spec, model=ServedModule(config), tokenizer=twin.tokenizer if twin is not None else None,
                          task=task, device=device, dtype=torch.float32, notes=notes, served=served, codec=codec,
                          client=client, twin=twin, gradient_model=None, routing=routing_digest(headers),
                          older_routing=older_routing(headers))
