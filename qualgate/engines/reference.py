"""The reference engine: batched target-only, standard speculative and FLy decoding in PyTorch.

``ReferenceEngine(target, drafter).generate(prompts, sampling=..., speculative=...)`` decodes
many requests together for any pair of Hugging Face causal LMs that share a vocabulary, on
CPU or GPU, following vLLM 0.33's verification rules (``../shared/CONTEXT.md``; the rules
themselves are pure functions in :mod:`qualgate.engines._verify`). ``speculative`` is a
vLLM ``speculative_config`` dict, resolved by :func:`qualgate.speculative.resolve_speculative`,
plus ``coupled``; ``None`` decodes with the target alone.

Batching and KV caches
----------------------
Every request of a batch keeps its own absolute positions; both models keep a Hugging Face
``DynamicCache`` whose slots are shared by all rows, plus a boolean (B, slots) validity mask.
Prompts are left-padded (pad slots invalid). A verification pass appends K + 1 slots to
every row's target cache; the slots of rejected drafts are then marked *stale* (invalid),
not removed, so rows that accepted different numbers of tokens advance independently:
``position_ids`` are per row (RoPE sees true positions) and the attention mask hides stale
slots. The drafter is handled the same way: each drafting step starts with a two-token input
(the last two emitted tokens when all K drafts were accepted, otherwise a masked dummy and
the last token), then feeds its own drafts one by one. Every 16 steps, stale slots are
compacted away (a per-row gather of the valid slots, left-aligned) once they make up more
than a quarter of a cache. Finished rows stay in the batch, excluded from every count, until
a quarter of the batch has finished; they are then dropped from the caches
(``batch_select_indices``). Prompts beyond ``max_num_seqs`` are decoded in further batches.

The engine builds the 4-D attention mask itself (boolean for ``sdpa``, additive otherwise;
a query always sees its own slot, so no row is fully masked) because transformers passes a
4-D mask through untouched, whereas building one from a 2-D mask costs a device sync per
one-token forward. Target-only batches without padding run with no mask at all, and without
stop tokens or strings the host knows when every row finishes, so that loop has no device
sync; otherwise each step syncs once (to learn which rows finished), plus once every 16
steps to decide on compaction. Models must use full attention (no sliding window) through
``sdpa`` or ``eager``, as Llama, Qwen2/3 and Mistral without sliding window do.

Randomness
----------
Every random number is a hash of (request seed, stream, absolute position[, drafting step])
(:mod:`qualgate.engines._sampling`): no generator state, so a request's output does not
depend on which requests share its batch. The integer hashes are bit-identical on CPU and GPU;
the uniform and exponential noise made from them can differ in the last bits of float32
``log`` between devices (``benchmarks/bench_engine.py`` prints both checks).
Sampling is the exponential race ``argmax(p / E)`` (Gumbel-max), as in vLLM.

- Target-only decoding, and the first token of every mode (sampled from the prefill, as vLLM
  does), use the target stream keyed by (seed, position): the token at position t is
  ``x_t = argmax(p_t / E(seed, t))``.
- Independent noise (default, ``coupled=False``): speculative steps draw acceptance uniforms,
  residual/bonus noise and drafter noise from their own streams keyed by (seed, position,
  drafting step), fresh at every step as in vLLM: target-only and speculative runs of one
  seed share the first token and then diverge, as they do on vLLM.
- Coupled noise (``coupled=True``): all noise comes from the target stream keyed by
  (seed, position). A sampled draft token is accepted exactly when it equals ``x_t``, the
  target's own sample at its position, and the correction or bonus token is ``x_t``
  (``_verify`` explains why this is exactly standard verification for a greedy drafter, and
  still exactly the target distribution for a probabilistic drafter, which then draws
  ``argmax(q_t / E(seed, t))`` with the same noise). Target-only and standard runs of one
  seed therefore emit the same tokens, up to floating-point differences between a
  one-token and a (K+1)-token forward pass. FLy in coupled mode: ``NAT_i`` is the coupled
  test and FLy's deferral rule applies unchanged on top, so a FLy run shares the target-only
  sample path up to its first deferral and keeps position-aligned noise after it. FLy's
  window looks at noise beyond the step's last emitted token, and the next step reuses that
  position-keyed noise, so coupled FLy is not distributed exactly as vLLM's FLy (which draws
  fresh noise each step); it is FLy's coupled analogue, meant for paired comparisons, while
  ``coupled=False`` reproduces vLLM's FLy. Greedy requests use no noise in any mode.

Warnings
--------
FLy logs :data:`qualgate.speculative.FLY_LOSSY_WARNING` through :mod:`logging` (logger
``qualgate.engines.reference``) once per process, the first time a FLy configuration is used,
as vLLM's ``warning_once`` does.

Batch invariance
----------------
With the same seed, a request's tokens do not depend on its batch except through
floating-point differences in the logits (padding and batch size change reduction shapes).
On CPU in float32, requests decoded alone and inside a batch of 32 give the same tokens in
every mode, greedy and seeded (``tests/engine/test_engine.py``); a near-tie in an argmax
could in principle flip a token, and on GPU (other kernels per shape) this is likelier.

Sampling details
----------------
Target probabilities are the request's processed distribution (temperature, then top-k, then
top-p, vLLM's semantics; greedy rows at temperature 1 with neither), computed in float32.
A probabilistic drafter (``draft_sample_method="probabilistic"``) samples from its own
logits processed with the request's settings; a greedy drafter takes its argmax. EOS ids are
the tokenizer's and the generation config's; ``ignore_eos`` disables them. As in vLLM, a
stop token is kept in ``token_ids``, a token that reaches ``max_tokens`` finishes with
``'length'`` even when it is a stop token, and a stop string cuts ``text`` before it (the
tokens up to the one that completed it are kept). ``text`` is decoded with
``skip_special_tokens=True``.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import math
import operator
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import torch

from ..speculative import FLY_LOSSY_WARNING, resolve_speculative
from ._sampling import (
    STREAM_ACCEPT,
    STREAM_DRAFT,
    STREAM_RESIDUAL,
    STREAM_TARGET,
    SamplingParams,
    exponential,
    noise_keys,
    process_logits,
    resolve_sampling,
    sample,
    split_seed,
    uniform,
)
from ._verify import FlyRule, accept_drafts, correction_tokens

__all__ = ["Generation", "GenerationOutput", "ReferenceEngine", "RequestMetrics"]

logger = logging.getLogger(__name__)
_fly_warned = False
#: Methods of ``rejection_sample_method`` the reference engine implements.
SUPPORTED_REJECTION_METHODS = ("standard", "fly")


def _warn_fly_once() -> None:
    global _fly_warned
    if not _fly_warned:
        _fly_warned = True
        logger.warning(FLY_LOSSY_WARNING)


# --------------------------------------------------------------------------- results


@dataclasses.dataclass(frozen=True)
class RequestMetrics:
    """Speculative-decoding counters of one request (or summed over requests).

    ``num_accepted_tokens`` counts the verifier's kept drafts (native or deferred), before
    any truncation at a stop token or ``max_tokens``, as vLLM counts them;
    ``acceptance_histogram[a]`` is the number of drafting steps that kept ``a`` drafts
    (length K + 1; empty for target-only decoding).
    """

    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    num_deferred_tokens: int = 0
    acceptance_histogram: tuple[int, ...] = ()
    num_output_tokens: int = 0
    wall_time_s: float = 0.0

    @property
    def mean_acceptance_length(self) -> float | None:
        """``1 + accepted / drafting steps`` (None without drafting steps)."""
        return 1 + self.num_accepted_tokens / self.num_drafts if self.num_drafts else None

    @property
    def draft_acceptance_rate(self) -> float | None:
        """``accepted / drafted tokens`` (None without drafts)."""
        if not self.num_draft_tokens:
            return None
        return self.num_accepted_tokens / self.num_draft_tokens

    @property
    def accepted_per_position(self) -> tuple[int, ...]:
        """Steps whose draft token at position j was kept, for j < K (vLLM's per-position counter)."""
        h = self.acceptance_histogram
        return tuple(sum(h[j + 1 :]) for j in range(max(len(h) - 1, 0)))

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["acceptance_histogram"] = list(self.acceptance_histogram)
        d["mean_acceptance_length"] = self.mean_acceptance_length
        d["draft_acceptance_rate"] = self.draft_acceptance_rate
        return d


@dataclasses.dataclass(frozen=True)
class GenerationOutput:
    """One request's result. ``finish_reason`` is ``'stop'`` or ``'length'``."""

    index: int
    prompt_token_ids: tuple[int, ...]
    token_ids: tuple[int, ...]
    text: str | None
    finish_reason: str
    seed: int
    metrics: RequestMetrics

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "prompt_token_ids": list(self.prompt_token_ids),
            "token_ids": list(self.token_ids),
            "text": self.text,
            "finish_reason": self.finish_reason,
            "seed": self.seed,
            "metrics": self.metrics.to_dict(),
        }


@dataclasses.dataclass(frozen=True)
class Generation(Sequence):
    """The outputs of one :meth:`ReferenceEngine.generate` call, in prompt order.

    Behaves as a sequence of :class:`GenerationOutput`; ``speculative`` is the resolved
    configuration (with ``coupled``) or None for target-only decoding.
    """

    outputs: tuple[GenerationOutput, ...]
    mode: str
    speculative: dict[str, Any] | None
    wall_time_s: float

    def __len__(self) -> int:
        return len(self.outputs)

    def __getitem__(self, i):
        return self.outputs[i]

    @property
    def num_output_tokens(self) -> int:
        return sum(len(o.token_ids) for o in self.outputs)

    @property
    def tokens_per_second(self) -> float:
        """Output tokens of all requests per second of wall time."""
        return self.num_output_tokens / self.wall_time_s if self.wall_time_s > 0 else math.inf

    @property
    def metrics(self) -> RequestMetrics:
        """Counters summed over requests; ``wall_time_s`` is the call's."""
        ms = [o.metrics for o in self.outputs]
        width = max((len(m.acceptance_histogram) for m in ms), default=0)
        hist = [0] * width
        for m in ms:
            for a, c in enumerate(m.acceptance_histogram):
                hist[a] += c
        return RequestMetrics(
            num_drafts=sum(m.num_drafts for m in ms),
            num_draft_tokens=sum(m.num_draft_tokens for m in ms),
            num_accepted_tokens=sum(m.num_accepted_tokens for m in ms),
            num_deferred_tokens=sum(m.num_deferred_tokens for m in ms),
            acceptance_histogram=tuple(hist),
            num_output_tokens=sum(m.num_output_tokens for m in ms),
            wall_time_s=self.wall_time_s,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "speculative": self.speculative,
            "wall_time_s": self.wall_time_s,
            "num_output_tokens": self.num_output_tokens,
            "tokens_per_second": self.tokens_per_second,
            "metrics": self.metrics.to_dict(),
            "outputs": [o.to_dict() for o in self.outputs],
        }


# --------------------------------------------------------------------------- helpers


class _Spec(NamedTuple):
    k: int
    fly: FlyRule | None
    probabilistic: bool
    coupled: bool


class _Model:
    """A causal LM, how to call it, and its vocabulary width."""

    def __init__(self, model, name: str):
        self.model, self.name = model, name
        params = inspect.signature(model.forward).parameters
        self.cache_kw = "cache" if "cache" in params else "past_key_values"
        self.keep_kw = "logits_to_keep" in params
        self.vocab = int(model.get_output_embeddings().weight.shape[0])
        self.max_positions = getattr(model.config, "max_position_embeddings", None)
        self.dtype = next(model.parameters()).dtype
        impl = getattr(model.config, "_attn_implementation", None)
        if impl not in ("sdpa", "eager"):
            raise ValueError(
                f"{name or 'model'}: attention implementation {impl!r} is not supported; load the "
                "model with attn_implementation='sdpa' or 'eager' (the engine passes 4-D masks)"
            )
        self.bool_mask = impl == "sdpa"

    def mask(self, valid: torch.Tensor, q_len: int) -> torch.Tensor:
        """The (B, 1, q, L) mask from a (B, L) slot-validity mask whose last q slots are the queries.

        A query sees the valid slots up to its own and always its own slot, so that no row is
        fully masked (pad queries see only themselves). Built here, and passed as 4-D, because
        transformers then uses it as is: no mask construction and no device sync per call.
        """
        length = valid.shape[1]
        kv = torch.arange(length, device=valid.device)
        q = kv[length - q_len :].unsqueeze(1)
        allowed = (valid.unsqueeze(1) | (kv == q)) & (kv <= q)  # (B, q, L)
        allowed = allowed.unsqueeze(1)
        if self.bool_mask:
            return allowed
        bias = torch.zeros(allowed.shape, dtype=self.dtype, device=valid.device)
        return bias.masked_fill_(~allowed, torch.finfo(self.dtype).min)

    def __call__(self, ids, positions, valid, cache, *, last_only=False):
        """Logits (float32) of ``ids`` at ``positions``; ``valid``: (B, cache + T) slots or None."""
        kwargs = {self.cache_kw: cache}
        if last_only and self.keep_kw:
            kwargs["logits_to_keep"] = 1
        mask = None if valid is None else self.mask(valid, ids.shape[1])
        out = self.model(
            input_ids=ids, position_ids=positions, attention_mask=mask, use_cache=True, **kwargs
        )
        logits = out.logits[:, -1:] if last_only else out.logits
        return logits.float()


def _new_cache():
    from transformers import DynamicCache

    return DynamicCache()


def _cache_pairs(cache):
    """(keys, values, setter) per layer, across transformers 5.x cache layouts."""
    layers = getattr(cache, "layers", None)
    if layers is not None:
        for layer in layers:
            if getattr(layer, "keys", None) is not None and layer.keys.numel():

                def put(k, v, layer=layer):
                    layer.keys, layer.values = k, v

                yield layer.keys, layer.values, put
        return
    for i in range(len(cache.key_cache)):  # pragma: no cover - transformers 4.x layout

        def put(k, v, i=i):
            cache.key_cache[i], cache.value_cache[i] = k, v

        yield cache.key_cache[i], cache.value_cache[i], put


def _compact(cache, mask: torch.Tensor) -> torch.Tensor:
    """Drop stale slots: keep each row's valid slots, in order, left-padded. Returns the mask."""
    length = mask.shape[1]
    keep = int(mask.sum(dim=1).max())
    if keep > 0.75 * length:
        return mask
    order = torch.argsort(mask.to(torch.int8), dim=1, stable=True)[:, length - keep :]
    for k, v, put in _cache_pairs(cache):
        idx = order[:, None, :, None].expand(-1, k.shape[1], -1, k.shape[3])
        put(k.gather(2, idx), v.gather(2, idx))
    return mask.gather(1, order)


def _load(spec, device, dtype, kind):
    if isinstance(spec, (str, os.PathLike)):
        from transformers import AutoModelForCausalLM

        kwargs = {} if dtype is None else {"dtype": dtype}
        model = AutoModelForCausalLM.from_pretrained(os.fspath(spec), **kwargs)
        name = os.fspath(spec)
    elif isinstance(spec, torch.nn.Module):
        model = spec
        name = getattr(getattr(model, "config", None), "_name_or_path", "") or ""
        if dtype is not None:
            model = model.to(dtype)
    else:
        raise ValueError(f"{kind} must be a transformers causal LM or a path to one, got {spec!r}")
    return _Model(model.to(device).eval(), name)


def _is_chat(prompt) -> bool:
    if not isinstance(prompt, (list, tuple)) or not prompt or isinstance(prompt[0], int):
        return False  # (checked first: isinstance(int, Mapping) is slow)
    return all(isinstance(m, Mapping) for m in prompt)


# --------------------------------------------------------------------------- engine


class ReferenceEngine:
    """Batched target-only, standard speculative and FLy decoding on PyTorch.

    Parameters
    ----------
    target, drafter : transformers causal LM or path
        The drafter is needed only for speculative decoding; it must share the target's
        vocabulary (a drafter with a wider padded vocabulary is cut to the target's).
    device : str or torch.device, optional
        Defaults to the target model's device when a model is given, else CUDA when
        available, else CPU.
    tokenizer : tokenizer or path, optional
        Needed for chat and text prompts, stop strings and ``text`` outputs; loaded from the
        target's path when omitted and the target is a path.
    dtype : torch.dtype, optional
        Cast (or load) both models to this dtype.
    max_num_seqs : int
        Most requests decoded together; more prompts are decoded in batches of this size.

    Examples
    --------
    >>> engine = ReferenceEngine("path/to/target", "path/to/drafter", device="cuda")  # doctest: +SKIP
    >>> out = engine.generate(  # doctest: +SKIP
    ...     [[1, 2, 3]],
    ...     sampling={"temperature": 0.6, "top_p": 0.95, "max_tokens": 256, "seed": 7},
    ...     speculative={"method": "draft_model", "model": "path/to/drafter",
    ...                  "num_speculative_tokens": 4, "rejection_sample_method": "fly",
    ...                  "fly_window_size": 2, "coupled": True})
    >>> out[0].token_ids, out[0].metrics.mean_acceptance_length, out.tokens_per_second  # doctest: +SKIP
    """

    def __init__(
        self,
        target,
        drafter=None,
        device=None,
        tokenizer=None,
        *,
        dtype: torch.dtype | None = None,
        max_num_seqs: int = 256,
    ):
        if isinstance(max_num_seqs, bool) or not isinstance(max_num_seqs, int) or max_num_seqs < 1:
            raise ValueError(f"max_num_seqs must be an integer >= 1, got {max_num_seqs!r}")
        if device is None:
            if isinstance(target, torch.nn.Module):
                device = next(target.parameters()).device
            else:
                device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = torch.device(device)
        self.dtype = dtype
        self.max_num_seqs = max_num_seqs
        self._target = _load(target, self.device, dtype, "target")
        self._drafter = None if drafter is None else _load(drafter, self.device, dtype, "drafter")
        if isinstance(tokenizer, (str, os.PathLike)) or (
            tokenizer is None and isinstance(target, (str, os.PathLike))
        ):
            from transformers import AutoTokenizer

            path = os.fspath(tokenizer if tokenizer is not None else target)
            try:
                tokenizer = AutoTokenizer.from_pretrained(path)
            except (OSError, ValueError):
                if tokenizer is not None:
                    raise
                tokenizer = None
        self.tokenizer = tokenizer
        eos: set[int] = set()
        gen_eos = getattr(getattr(self._target.model, "generation_config", None), "eos_token_id", None)
        for e in [gen_eos] if isinstance(gen_eos, int) else (gen_eos or ()):
            eos.add(int(e))
        if tokenizer is not None and getattr(tokenizer, "eos_token_id", None) is not None:
            eos.add(int(tokenizer.eos_token_id))
        self.eos_token_ids = tuple(sorted(eos))

    @property
    def target(self):
        return self._target.model

    @property
    def drafter(self):
        return None if self._drafter is None else self._drafter.model

    # ------------------------------------------------------------------ configuration

    def _resolve_speculative(self, speculative):
        if not speculative:
            return None, None
        if not isinstance(speculative, Mapping):
            raise ValueError(f"speculative must be a mapping (vLLM speculative_config), got {speculative!r}")
        raw = dict(speculative)
        coupled = raw.pop("coupled", False)
        if not isinstance(coupled, bool):
            raise ValueError(f"speculative coupled must be true or false, got {coupled!r}")
        raw.setdefault("method", "draft_model")
        if raw["method"] == "draft_model" and raw.get("model") is None:
            if self._drafter is None:
                raise ValueError(
                    "speculative decoding needs a drafter: pass drafter= to ReferenceEngine or "
                    "'model' (a path) in the speculative config"
                )
            raw["model"] = self._drafter.name or "drafter"
        resolved = resolve_speculative(raw)
        if resolved["method"] != "draft_model":
            raise ValueError(
                f"the reference engine supports speculative method 'draft_model' only, "
                f"got {resolved['method']!r}"
            )
        rsm = resolved["rejection_sample_method"]
        if rsm not in SUPPORTED_REJECTION_METHODS:
            raise ValueError(
                f"the reference engine supports rejection_sample_method in "
                f"{list(SUPPORTED_REJECTION_METHODS)}, got {rsm!r}"
            )
        if self._drafter is None:
            self._drafter = _load(resolved["model"], self.device, self.dtype, "drafter")
        elif self._drafter.name and os.path.normpath(resolved["model"]) not in (
            os.path.normpath(self._drafter.name),
            "drafter",
        ):
            raise ValueError(
                f"speculative_config model {resolved['model']!r} is not this engine's drafter "
                f"({self._drafter.name!r})"
            )
        resolved["coupled"] = coupled
        spec = _Spec(
            k=resolved["num_speculative_tokens"],
            fly=FlyRule.from_config(resolved),
            probabilistic=resolved["draft_sample_method"] == "probabilistic",
            coupled=coupled,
        )
        return spec, resolved

    def _encode(self, i: int, prompt) -> list[int]:
        ids = None
        if isinstance(prompt, str) or _is_chat(prompt):
            if self.tokenizer is None:
                raise ValueError(f"prompts[{i}] is text or chat messages but the engine has no tokenizer")
            if isinstance(prompt, str):
                ids = self.tokenizer(prompt).input_ids
            else:
                text = self.tokenizer.apply_chat_template(
                    [dict(m) for m in prompt], tokenize=False, add_generation_prompt=True
                )
                ids = self.tokenizer(text, add_special_tokens=False).input_ids
        elif isinstance(prompt, (list, tuple)):
            try:
                ids = [operator.index(t) for t in prompt]
            except TypeError:
                ids = None
        if not ids:
            raise ValueError(
                f"prompts[{i}] must be a non-empty list of token ids, a list of chat messages "
                f"or a string, got {prompt!r}"
            )
        if min(ids) < 0 or max(ids) >= self._target.vocab:
            bad = [t for t in ids if not 0 <= t < self._target.vocab]
            raise ValueError(f"prompts[{i}] has token ids outside [0, {self._target.vocab}): {bad[:5]}")
        return ids

    # ------------------------------------------------------------------ public API

    def generate(self, prompts, *, sampling, speculative=None) -> Generation:
        """Decode ``prompts``; one :class:`GenerationOutput` per prompt, in order.

        Parameters
        ----------
        prompts : list
            Each a list of token ids, a list of chat messages (``{"role", "content"}``,
            rendered with the tokenizer's chat template and a generation prompt) or a string.
        sampling : mapping or list of mappings
            vLLM ``SamplingParams`` fields (see :func:`qualgate.engines._sampling.resolve_sampling`),
            one for all prompts or one per prompt. ``max_tokens`` is required.
        speculative : mapping or None
            vLLM ``speculative_config`` keys plus ``coupled`` (bool, default False); ``method``
            defaults to ``draft_model`` and ``model`` to the engine's drafter. ``None``:
            target-only decoding.
        """
        if isinstance(prompts, (str, Mapping)) or not isinstance(prompts, Sequence):
            raise ValueError(f"prompts must be a list of prompts, got {prompts!r}")
        n = len(prompts)
        if isinstance(sampling, Sequence) and not isinstance(sampling, (str, Mapping)):
            if len(sampling) != n:
                raise ValueError(f"sampling has {len(sampling)} entries for {n} prompts; give one or one per prompt")
            params = [resolve_sampling(s) for s in sampling]
        else:
            params = [resolve_sampling(sampling)] * n
        spec, resolved = self._resolve_speculative(speculative)
        if spec is not None and spec.fly is not None:
            _warn_fly_once()
        ids = [self._encode(i, p) for i, p in enumerate(prompts)]
        for i, (p, sp) in enumerate(zip(ids, params)):
            for m in (self._target, self._drafter if spec else None):
                if m is not None and m.max_positions and len(p) + sp.max_tokens > m.max_positions:
                    raise ValueError(
                        f"prompts[{i}]: prompt length {len(p)} + max_tokens {sp.max_tokens} exceeds "
                        f"the model's max_position_embeddings ({m.max_positions})"
                    )
            if sp.stop and self.tokenizer is None:
                raise ValueError("sampling stop strings need a tokenizer")
        seeds = [
            sp.seed if sp.seed is not None else int(torch.randint(0, 2**62, ()).item())
            for sp in params
        ]
        mode = "target" if spec is None else ("fly" if spec.fly else "standard")
        t0 = time.perf_counter()
        outputs: list[GenerationOutput] = []
        with torch.inference_mode():
            for lo in range(0, n, self.max_num_seqs):
                hi = min(n, lo + self.max_num_seqs)
                outputs += self._run(list(range(lo, hi)), ids[lo:hi], params[lo:hi], seeds[lo:hi], spec, t0)
        wall = time.perf_counter() - t0
        return Generation(tuple(outputs), mode, resolved, wall)

    # ------------------------------------------------------------------ decoding

    def _run(self, indices, prompt_ids, params, seeds, spec, t0):
        dev = self.device
        b0 = len(prompt_ids)
        tgt, drf = self._target, self._drafter
        vocab = tgt.vocab
        k = spec.k if spec else 0
        long = dict(dtype=torch.long, device=dev)

        # per-request settings
        lo_hi = [split_seed(s) for s in seeds]
        greedy = torch.tensor([p.greedy for p in params], dtype=torch.bool, device=dev)
        any_sampled = not all(p.greedy for p in params)
        use_top_k = any(p.top_k > 0 for p in params)
        use_top_p = any(p.top_p < 1 for p in params)
        stop_lists = [
            sorted(set(p.stop_token_ids) | (set() if p.ignore_eos else set(self.eos_token_ids)))
            for p in params
        ]
        width = max(1, max(len(s) for s in stop_lists))
        has_stop_ids = any(stop_lists)
        st = {
            "rid": torch.arange(b0, **long),
            "seed_lo": torch.tensor([a for a, _ in lo_hi], **long),
            "seed_hi": torch.tensor([b for _, b in lo_hi], **long),
            "greedy": greedy,
            "temp": torch.tensor([1.0 if p.greedy else p.temperature for p in params], device=dev),
            "top_k": torch.tensor([p.top_k for p in params], **long),
            "top_p": torch.tensor([p.top_p for p in params], device=dev),
            "max_tok": torch.tensor([p.max_tokens for p in params], **long),
            "stop_ids": torch.tensor([s + [-1] * (width - len(s)) for s in stop_lists], **long),
            "finished": torch.zeros(b0, dtype=torch.bool, device=dev),
            "reason_stop": torch.zeros(b0, dtype=torch.bool, device=dev),
            "finish_step": torch.zeros(b0, **long),
            "n_out": torch.zeros(b0, **long),
            "steps": torch.zeros(b0, **long),
            "accepted": torch.zeros(b0, **long),
            "deferred": torch.zeros(b0, **long),
            "hist": torch.zeros(b0, k + 1, **long),
        }
        flush_keys = ("finished", "reason_stop", "finish_step", "n_out", "steps", "accepted", "deferred", "hist")
        final = {key: st[key].clone() for key in flush_keys}
        buf_w = max(p.max_tokens for p in params) + k + 2
        out_buf = torch.full((b0 * buf_w + 1,), -1, **long)  # last element: write sink
        stop_strings = {i: p.stop for i, p in enumerate(params) if p.stop}
        stop_text: dict[int, str] = {}
        times: list[float] = []  # times[s]: when decoding step s (0 = prefill) had completed

        def probs_of(logits):  # (B, T, V) -> processed target/draft probabilities
            b, t, v = logits.shape
            if not any_sampled:
                return logits.softmax(dim=-1)
            rep = lambda x: x.repeat_interleave(t)  # noqa: E731
            probs = process_logits(
                logits.reshape(b * t, v), rep(st["temp"]), rep(st["top_k"]), rep(st["top_p"]),
                use_top_k=use_top_k, use_top_p=use_top_p,
            )
            return probs.view(b, t, v)

        def keys(stream, position, step=0):
            return noise_keys(st["seed_lo"], st["seed_hi"], stream, position, step)

        def emit(tokens, n_emit, stepno):
            """Append up to n_emit tokens per row, apply stop/length rules, update state."""
            t = tokens.shape[1]
            j = torch.arange(t, device=dev).unsqueeze(0)
            alive = ~st["finished"]
            valid = (j < n_emit.unsqueeze(1)) & alive.unsqueeze(1)
            count = st["n_out"].unsqueeze(1) + j + 1
            is_len = count >= st["max_tok"].unsqueeze(1)
            is_stop = (tokens.unsqueeze(-1) == st["stop_ids"].unsqueeze(1)).any(-1)
            end = valid & (is_len | is_stop)
            has_end = end.any(dim=1)
            first = torch.where(end, j, t).min(dim=1).values
            n_keep = torch.where(has_end, first + 1, torch.where(alive, n_emit, 0))
            reason = is_stop & ~is_len
            first_c = first.clamp(max=t - 1).unsqueeze(1)
            write = j < n_keep.unsqueeze(1)
            flat = st["rid"].unsqueeze(1) * buf_w + st["n_out"].unsqueeze(1) + j
            out_buf.scatter_(0, torch.where(write, flat, out_buf.numel() - 1).flatten(), tokens.flatten())
            st["n_out"] = st["n_out"] + n_keep
            st["reason_stop"] = st["reason_stop"] | (has_end & reason.gather(1, first_c).squeeze(1))
            st["finish_step"] = torch.where(has_end & alive, stepno, st["finish_step"])
            st["finished"] = st["finished"] | has_end

        def check_stop_strings(stepno):
            rids = st["rid"].tolist()
            rows = [r for r, rid in enumerate(rids) if rid in stop_strings and rid not in stop_text]
            if not rows:
                return
            n_now = st["n_out"][rows].tolist()
            for r, n in zip(rows, n_now):
                rid = rids[r]
                toks = out_buf[rid * buf_w : rid * buf_w + n].tolist()
                start = checked.get(rid, 0)
                for m in range(start, n):
                    text = self.tokenizer.decode(toks[: m + 1], skip_special_tokens=True)
                    hits = [text.find(s) for s in stop_strings[rid] if s in text]
                    if hits:
                        stop_text[rid] = text[: min(hits)]
                        st["n_out"][r] = m + 1
                        st["reason_stop"][r] = True
                        if not bool(st["finished"][r]):
                            st["finish_step"][r] = stepno
                        st["finished"][r] = True
                        break
                checked[rid] = n

        checked: dict[int, int] = {}

        def select(idx):
            for key in list(st):
                st[key] = st[key].index_select(0, idx)

        def flush():
            for key in flush_keys:
                final[key].index_copy_(0, st["rid"], st[key])

        def emit1(token, stepno):
            """:func:`emit` for one token per row (target-only steps and the first token)."""
            alive = ~st["finished"]
            n = st["n_out"]
            is_len = n + 1 >= st["max_tok"]
            end = is_len
            if has_stop_ids:
                is_stop = (token.unsqueeze(1) == st["stop_ids"]).any(dim=1)
                end = end | is_stop
                st["reason_stop"] = st["reason_stop"] | (alive & is_stop & ~is_len)
            end = end & alive
            out_buf.scatter_(0, torch.where(alive, st["rid"] * buf_w + n, out_buf.numel() - 1), token)
            st["n_out"] = n + alive.long()
            st["finish_step"] = torch.where(end, stepno, st["finish_step"])
            st["finished"] = st["finished"] | end

        # ---------------------------------------------------------------- prefill
        plen = max(len(p) for p in prompt_ids)
        padded = any(len(p) < plen for p in prompt_ids)
        ids = torch.tensor([[0] * (plen - len(p)) + p for p in prompt_ids], **long)
        mask = torch.tensor([[False] * (plen - len(p)) + [True] * len(p) for p in prompt_ids], device=dev)
        positions = (mask.long().cumsum(dim=1) - 1).clamp(min=0)
        st["pos"] = torch.tensor([len(p) for p in prompt_ids], **long)  # position of the pending token
        tcache = _new_cache()
        logits = tgt(ids, positions, mask if padded else None, tcache, last_only=True)[:, 0, :vocab]
        st["tmask"] = mask
        first = logits.argmax(dim=-1)
        if any_sampled:
            probs = probs_of(logits.unsqueeze(1))[:, 0]
            noise = exponential(keys(STREAM_TARGET, st["pos"]), vocab)
            first = torch.where(st["greedy"], first, sample(probs, noise))
        st["pending"] = first
        if spec:
            dcache = _new_cache()
            drf(ids, positions, mask if padded else None, dcache, last_only=True)
            st["dmask"] = mask
            st["dpend"] = torch.stack([first, first], dim=1)
            st["dpend_ok"] = torch.zeros(b0, 2, dtype=torch.bool, device=dev)
            st["dpend_ok"][:, 1] = True
        emit1(first, 0)
        times.append(time.perf_counter())
        stepno = 0
        caches = [tcache] + ([dcache] if spec else [])
        # Target-only without stop ids or strings: every row emits one token per step, so the
        # host knows when each row finishes and needs no device sync to find out.
        predictable = spec is None and not has_stop_ids and not stop_strings
        active_max = [p.max_tokens for p in params]  # per batch row, kept in predictable mode
        # Target-only without padding: every cache slot is valid, no attention mask needed.
        unmasked = spec is None and not padded

        # ---------------------------------------------------------------- decode
        while True:
            if stop_strings:
                check_stop_strings(stepno)
            b = st["rid"].shape[0]
            if predictable:
                done = [m <= stepno + 1 for m in active_max]
                n_done = sum(done)
                if dev.type == "cuda" and stepno + 1 in active_max:
                    torch.cuda.synchronize(dev)  # rows finish now: time them
            else:
                n_done = int(st["finished"].sum())
            times[-1] = time.perf_counter()
            if n_done == b:
                break
            if n_done and 4 * n_done >= b:
                flush()
                if predictable:
                    keep = [r for r, d in enumerate(done) if not d]
                    active_max = [active_max[r] for r in keep]
                    idx = torch.tensor(keep, **long)
                else:
                    idx = (~st["finished"]).nonzero().squeeze(1)
                select(idx)
                for c in caches:
                    c.batch_select_indices(idx)
                b = idx.numel()
            stepno += 1
            if spec is None:
                mask = None
                if not unmasked:
                    mask = torch.cat([st["tmask"], torch.ones(b, 1, dtype=torch.bool, device=dev)], dim=1)
                    st["tmask"] = mask
                logits = tgt(st["pending"].unsqueeze(1), st["pos"].unsqueeze(1), mask, tcache)[:, 0, :vocab]
                token = logits.argmax(dim=-1)
                if any_sampled:
                    probs = probs_of(logits.unsqueeze(1))[:, 0]
                    noise = exponential(keys(STREAM_TARGET, st["pos"] + 1), vocab)
                    token = torch.where(st["greedy"], token, sample(probs, noise))
                st["pos"] = st["pos"] + 1
                st["pending"] = token
                emit1(token, stepno)
            else:
                self._spec_step(spec, st, tcache, dcache, probs_of, keys, emit, stepno, any_sampled)
                if stepno % 16 == 0:
                    st["tmask"] = _compact(tcache, st["tmask"])
                    st["dmask"] = _compact(dcache, st["dmask"])
            times.append(time.perf_counter())
        flush()

        # ---------------------------------------------------------------- results
        final_cpu = {key: v.cpu() for key, v in final.items()}
        out_cpu = out_buf[:-1].view(b0, buf_w).cpu()
        results = []
        for r in range(b0):
            n = int(final_cpu["n_out"][r])
            toks = tuple(out_cpu[r, :n].tolist())
            text = None
            if self.tokenizer is not None:
                text = stop_text.get(r)
                if text is None:
                    text = self.tokenizer.decode(list(toks), skip_special_tokens=True)
            steps = int(final_cpu["steps"][r])
            metrics = RequestMetrics(
                num_drafts=steps if spec else 0,
                num_draft_tokens=steps * k,
                num_accepted_tokens=int(final_cpu["accepted"][r]),
                num_deferred_tokens=int(final_cpu["deferred"][r]),
                acceptance_histogram=tuple(final_cpu["hist"][r].tolist()) if spec else (),
                num_output_tokens=n,
                wall_time_s=times[min(int(final_cpu["finish_step"][r]), len(times) - 1)] - t0,
            )
            results.append(
                GenerationOutput(
                    index=indices[r],
                    prompt_token_ids=tuple(prompt_ids[r]),
                    token_ids=toks,
                    text=text,
                    finish_reason="stop" if bool(final_cpu["reason_stop"][r]) else "length",
                    seed=seeds[r],
                    metrics=metrics,
                )
            )
        return results

    def _spec_step(self, spec, st, tcache, dcache, probs_of, keys, emit, stepno, any_sampled):
        """One drafting + verification step for every row of the batch."""
        tgt, drf = self._target, self._drafter
        vocab = tgt.vocab
        k = spec.k
        dev = st["pos"].device
        b = st["pos"].shape[0]
        pos, step = st["pos"], st["steps"]
        ar = torch.arange(k + 1, device=dev)
        sampled_noise = any_sampled and (spec.coupled or spec.probabilistic)
        e_all = None
        if spec.coupled and any_sampled:
            e_all = exponential(keys(STREAM_TARGET, pos.unsqueeze(1) + 1 + ar), vocab)  # (B, K+1, V)

        # draft K tokens
        dmask = torch.cat([st["dmask"], st["dpend_ok"]], dim=1)
        dpos = torch.stack([pos - 1, pos], dim=1)
        dl = drf(st["dpend"], dpos, dmask, dcache, last_only=True)[:, 0]
        drafts, qs = [], []
        for j in range(k):
            if j:
                dmask = torch.cat([dmask, torch.ones(b, 1, dtype=torch.bool, device=dev)], dim=1)
                dl = drf(drafts[-1].unsqueeze(1), (pos + j).unsqueeze(1), dmask, dcache, last_only=True)[:, 0]
            dl = self._fit_vocab(dl, vocab)
            d = dl.argmax(dim=-1)
            if spec.probabilistic and sampled_noise:
                q = probs_of(dl.unsqueeze(1))[:, 0]
                if e_all is not None:
                    noise = e_all[:, j]
                else:
                    noise = exponential(keys(STREAM_DRAFT, pos + 1 + j, step), vocab)
                d = torch.where(st["greedy"], d, sample(q, noise))
                qs.append(q)
            drafts.append(d)
        st["dmask"] = dmask
        draft = torch.stack(drafts, dim=1)
        q = torch.stack(qs, dim=1) if qs else None

        # score with the target
        tin = torch.cat([st["pending"].unsqueeze(1), draft], dim=1)
        tmask = torch.cat([st["tmask"], torch.ones(b, k + 1, dtype=torch.bool, device=dev)], dim=1)
        tl = tgt(tin, pos.unsqueeze(1) + ar, tmask, tcache)[..., :vocab]
        need_probs = any_sampled or spec.fly is not None
        tp = probs_of(tl) if need_probs else tl
        coupled_sample = uniforms = None
        if e_all is not None:
            coupled_sample = torch.where(st["greedy"].unsqueeze(1), tl.argmax(dim=-1), sample(tp, e_all))
        elif any_sampled:
            uniforms = uniform(keys(STREAM_ACCEPT, pos.unsqueeze(1) + 1 + ar[:k], step))
        acc = accept_drafts(
            draft, tl, tp, st["greedy"], draft_probs=q, uniform=uniforms,
            coupled_sample=coupled_sample, fly=spec.fly,
        )
        a = acc.num_accepted
        noise = None
        if any_sampled and coupled_sample is None:
            noise = exponential(keys(STREAM_RESIDUAL, pos + 1 + a, step), vocab)
        last = correction_tokens(
            a, draft, tl, tp, st["greedy"], draft_probs=q, noise=noise, coupled_sample=coupled_sample
        )

        # advance: mask stale slots, set pending tokens and positions
        j = ar.unsqueeze(0)
        kept = j[:, :k] < a.unsqueeze(1)
        st["tmask"] = torch.cat([st["tmask"], torch.ones(b, 1, dtype=torch.bool, device=dev), kept], dim=1)
        if k > 1:
            st["dmask"][:, -(k - 1) :] = kept[:, : k - 1]
        all_kept = a == k
        st["dpend"] = torch.stack([torch.where(all_kept, draft[:, -1], last), last], dim=1)
        st["dpend_ok"] = torch.stack([all_kept, torch.ones_like(all_kept)], dim=1)
        st["pending"] = last
        st["pos"] = pos + a + 1
        alive = (~st["finished"]).long()
        st["steps"] = step + alive
        st["accepted"] = st["accepted"] + a * alive
        st["deferred"] = st["deferred"] + acc.deferred.sum(dim=1) * alive
        st["hist"] = st["hist"] + (a.unsqueeze(1) == ar).long() * alive.unsqueeze(1)  # (one_hot syncs)
        tokens = torch.where(j < a.unsqueeze(1), torch.nn.functional.pad(draft, (0, 1)), last.unsqueeze(1))
        emit(tokens, a + 1, stepno)

    @staticmethod
    def _fit_vocab(logits, vocab):
        """Cut a wider drafter vocabulary to the target's; pad a narrower one with -inf."""
        width = logits.shape[-1]
        if width > vocab:
            return logits[..., :vocab]
        if width < vocab:
            return torch.nn.functional.pad(logits, (0, vocab - width), value=-math.inf)
        return logits
