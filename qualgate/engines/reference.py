"""The reference engine: batched target-only, standard speculative and FLy decoding in PyTorch.

``ReferenceEngine(target, drafter).generate(prompts, sampling=..., speculative=...)`` decodes
many requests together for any pair of Hugging Face causal LMs that share a vocabulary, on
CPU or GPU, following vLLM 0.33's verification rules (pure functions in
:mod:`qualgate.engines._verify`). ``speculative`` is a vLLM ``speculative_config`` dict,
resolved by :func:`qualgate.vllm033.speculative.resolve_speculative`, plus ``coupled``; ``None``
decodes with the target alone. ``noise`` picks how random numbers are drawn
(:data:`qualgate.config.options.NOISE_MODES`: ``independent``, ``coupled``, ``vllm-v1``,
vLLM 0.33's per-request generator order, or ``vllm-v2``, vLLM 0.34's counter-based draws;
docs/engine.md, "Randomness").

The pieces: :mod:`._results` (what ``generate`` returns), :mod:`._models` (calling a model,
its masks, the static KV cache), :mod:`._batch` (a batch's state, ``prefill()`` and
``step()``; on CUDA each step is a CUDA-graph replay), :mod:`._sampling` and :mod:`._verify`.
docs/engine.md describes the design: KV-cache layout, CUDA graphs, randomness (every random
number is a hash of the request seed, stream, position and step, so outputs do not depend on
the batch), coupled and independent noise, batch invariance, stop rules and warnings.

FLy logs :data:`qualgate.vllm033.speculative.FLY_LOSSY_WARNING` through :mod:`logging` (logger
``qualgate.engines.reference``) once per process, the first time a FLy configuration is
used, as vLLM's ``warning_once`` does.
"""

from __future__ import annotations

import collections
import logging
import operator
import os
import time
from collections.abc import Mapping, Sequence

import torch

from qualgate.config.options import NOISE_MODES
from qualgate.vllm033.speculative import FLY_LOSSY_WARNING, resolve_speculative

from ._batch import Batch, Spec
from ._models import load_model
from ._results import Generation, GenerationOutput, RequestMetrics
from ._sampling import resolve_sampling
from ._verify import FlyRule

__all__ = ["Generation", "GenerationOutput", "ReferenceEngine", "RequestMetrics", "resolve_sampling"]

logger = logging.getLogger(__name__)
_fly_warned = False
#: Methods of ``rejection_sample_method`` the reference engine implements.
SUPPORTED_REJECTION_METHODS = ("standard", "fly")
#: with ``compile``: compilations of the decoding step kept before dynamo gives up on new kinds
RECOMPILE_LIMIT = 64
#: prompts (texts, chats) whose token ids an engine keeps: a plan sends each question's prompt
#: once per seed and sample, one after another. Rendering the demo's chat template and
#: tokenizing cost 111 us a prompt on one CPU core (17 us from here), against 500-600 us of
#: H200 time per request of the demo plan (benchmarks/results/bench_devices-h200x2.txt)
ENCODED_KEPT = 4096
#: what :meth:`ReferenceEngine.timing` counts and times
TIMING_KEYS = ("calls", "rows", "steps", "prepare_s", "prefill_s", "steps_s", "finish_s")


def _warn_fly_once() -> None:
    global _fly_warned
    if not _fly_warned:
        _fly_warned = True
        logger.warning(FLY_LOSSY_WARNING)


def _prompt_key(prompt):
    """A hashable key of a text or chat prompt (``None``: token ids, or not hashable)."""
    try:
        if isinstance(prompt, str):
            return ("text", prompt)
        if _is_chat(prompt):
            key = ("chat", tuple(tuple(m.items()) for m in prompt))
            hash(key)
            return key
    except TypeError:  # a message holding a list (content parts): encoded every time
        pass
    return None


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
    cuda_graphs : bool
        On CUDA, capture each batch's decoding step as a CUDA graph and replay it (default);
        ``False`` runs every step eagerly. Ignored on CPU.
    compile : bool
        Run each decoding step through ``torch.compile``: both models' forward passes, the
        speculative verification and the emission as one function, fused into few kernels
        (attention reads every cache slot, as with CUDA graphs). Each kind of step (target-only,
        or speculative at a K) compiles on first use, which takes seconds to minutes; the
        captured CUDA graphs then replay the compiled kernels. Prefill is not compiled.

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

    #: attend over every cache slot, as CUDA graphs must, also when running eagerly (tests)
    _static_shapes = False

    def __init__(
        self,
        target,
        drafter=None,
        device=None,
        tokenizer=None,
        *,
        dtype: torch.dtype | None = None,
        max_num_seqs: int = 256,
        cuda_graphs: bool = True,
        compile: bool = False,
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
        self.cuda_graphs = bool(cuda_graphs) and self.device.type == "cuda"
        self._pool = None
        self._graphs: collections.OrderedDict = collections.OrderedDict()  # (see _batch.Batch)
        self._encoded: collections.OrderedDict = collections.OrderedDict()  # prompt key -> token ids
        self._timing: collections.Counter = collections.Counter()  # (see timing())
        self._target = load_model(target, self.device, dtype, "target")
        self._drafter = None if drafter is None else load_model(drafter, self.device, dtype, "drafter")
        self.compile = bool(compile)
        #: ``Batch._step`` through ``torch.compile`` (with ``compile``; one compiled function
        #: per engine, recompiled per step kind and, once, for a new batch size)
        self.compiled_step = None
        if self.compile:
            # coordinate-descent tuning of the generated kernels' launch settings: a 134M Llama
            # at batch 1 on an H200 decodes 1,749 tokens/s with it, 1,296 without
            # (benchmarks/results/bench_engine-h200-compile.txt)
            self.compiled_step = torch.compile(Batch._step, dynamic=None, options={"coordinate_descent_tuning": True})
            # every kind of step a run uses is one more compilation of the same function; past
            # the default limit (8) dynamo would quietly decode the rest eagerly
            cfg = torch._dynamo.config
            cfg.recompile_limit = max(cfg.recompile_limit, RECOMPILE_LIMIT)
        if isinstance(tokenizer, (str, os.PathLike)) or (tokenizer is None and isinstance(target, (str, os.PathLike))):
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

    def _resolve_speculative(self, speculative, noise):
        if not speculative:
            return None, None
        if not isinstance(speculative, Mapping):
            raise ValueError(f"speculative must be a mapping (vLLM speculative_config), got {speculative!r}")
        raw = dict(speculative)
        coupled = raw.pop("coupled", False)
        if not isinstance(coupled, bool):
            raise ValueError(f"speculative coupled must be true or false, got {coupled!r}")
        if coupled and noise not in ("independent", "coupled"):
            raise ValueError(f"speculative coupled: true contradicts noise={noise!r}")
        noise = "coupled" if coupled else noise
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
                f"the reference engine supports speculative method 'draft_model' only, got {resolved['method']!r}"
            )
        rsm = resolved["rejection_sample_method"]
        if rsm not in SUPPORTED_REJECTION_METHODS:
            raise ValueError(
                f"the reference engine supports rejection_sample_method in "
                f"{list(SUPPORTED_REJECTION_METHODS)}, got {rsm!r}"
            )
        if self._drafter is None:
            self._drafter = load_model(resolved["model"], self.device, self.dtype, "drafter")
        elif self._drafter.name and os.path.normpath(resolved["model"]) not in (
            os.path.normpath(self._drafter.name),
            "drafter",
        ):
            raise ValueError(
                f"speculative_config model {resolved['model']!r} is not this engine's drafter ({self._drafter.name!r})"
            )
        resolved["coupled"] = noise == "coupled"
        spec = Spec(
            k=resolved["num_speculative_tokens"],
            fly=FlyRule.from_config(resolved),
            probabilistic=resolved["draft_sample_method"] == "probabilistic",
            noise=noise,
        )
        return spec, resolved

    def _encode(self, i: int, prompt) -> list[int]:
        key = _prompt_key(prompt)
        if key is not None and (ids := self._encoded.get(key)) is not None:
            self._encoded.move_to_end(key)
            return list(ids)
        ids = self._encode_new(i, prompt)
        if key is not None:
            self._encoded[key] = tuple(ids)
            if len(self._encoded) > ENCODED_KEPT:
                self._encoded.popitem(last=False)
        return ids

    def _encode_new(self, i: int, prompt) -> list[int]:
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

    def generate(self, prompts, *, sampling, speculative=None, noise="independent") -> Generation:
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
        noise : str
            How random numbers are drawn, one of :data:`qualgate.config.options.NOISE_MODES`:
            ``independent`` (default), ``coupled`` (the same as ``coupled: true`` in
            ``speculative``), ``vllm-v1`` (vLLM 0.33's per-request generator order) or
            ``vllm-v2`` (vLLM 0.34's draws keyed by seed, position and token), so that two
            modes share exactly the draws vLLM's would. docs/engine.md, "Randomness".
        """
        t_call = time.perf_counter()
        if isinstance(prompts, (str, Mapping)) or not isinstance(prompts, Sequence):
            raise ValueError(f"prompts must be a list of prompts, got {prompts!r}")
        n = len(prompts)
        if isinstance(sampling, Sequence) and not isinstance(sampling, (str, Mapping)):
            if len(sampling) != n:
                raise ValueError(f"sampling has {len(sampling)} entries for {n} prompts; give one or one per prompt")
            params = [resolve_sampling(s) for s in sampling]
        else:
            params = [resolve_sampling(sampling)] * n
        if noise not in NOISE_MODES:
            raise ValueError(f"noise must be one of {list(NOISE_MODES)}, got {noise!r}")
        spec, resolved = self._resolve_speculative(speculative, noise)
        if spec is not None:
            noise = spec.noise
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
        seeds = [sp.seed if sp.seed is not None else int(torch.randint(0, 2**62, ()).item()) for sp in params]
        mode = "target" if spec is None else ("fly" if spec.fly else "standard")
        t0 = time.perf_counter()
        timing = self._timing
        timing["calls"] += 1
        timing["prepare_s"] += t0 - t_call
        outputs: list[GenerationOutput] = []
        with torch.inference_mode():
            for lo in range(0, n, self.max_num_seqs):
                hi = min(n, lo + self.max_num_seqs)
                t_batch = time.perf_counter()
                batch = Batch(
                    self,
                    list(range(lo, hi)),
                    ids[lo:hi],
                    params[lo:hi],
                    seeds[lo:hi],
                    spec,
                    t0,
                    graphs=self.cuda_graphs,
                    static=self._static_shapes or self.compile,
                    noise=noise,
                )
                outputs += batch.decode()
                times = batch.times  # [prefill done, step 1 done, ...]
                timing["rows"] += hi - lo
                timing["steps"] += len(times) - 1
                timing["prefill_s"] += times[0] - t_batch
                timing["steps_s"] += times[-1] - times[0]
                timing["finish_s"] += time.perf_counter() - times[-1]
        wall = time.perf_counter() - t0
        return Generation(tuple(outputs), mode, resolved, wall)

    def timing(self) -> dict[str, float]:
        """Where this engine's :meth:`generate` calls spent their time, summed over calls.

        ``calls``; ``rows`` (prompts decoded); ``steps`` (decoding steps after the prefills,
        one per batch of up to ``max_num_seqs`` rows); seconds: ``prepare_s`` (checking the
        arguments, encoding the prompts), ``prefill_s`` (setting up each batch and its
        prefill), ``steps_s`` (the decoding steps) and ``finish_s`` (the outputs: token ids
        copied back, texts decoded). Host clock: a prefill's GPU work may end inside the
        first steps, which wait for it.
        """
        return {k: self._timing[k] for k in TIMING_KEYS}

    def _graph_pool(self):
        """One CUDA-graph memory pool for all of this engine's captured steps."""
        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        return self._pool
