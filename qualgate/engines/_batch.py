"""One batch of requests being decoded: its state, :meth:`Batch.prefill`, :meth:`Batch.step`.

A :class:`Batch` owns everything that changes while its requests decode: the per-row
tensors (positions, pending tokens, counters, finish flags), the two models' static
:class:`~qualgate.engines._models.SlotCache`\\ s and the output buffer. :meth:`Batch.step`
is one decoding step for every row (target-only, or K drafts plus one verification) and
changes that state only in place, without reading anything back to the host, so that on
CUDA it is captured once as a CUDA graph and replayed (:meth:`Batch.decode`). The design,
and why the outputs do not depend on how a step is run, is in docs/engine.md.

(About 690 lines, over the usual 450: it is one class, and its parts (state, prefill, step,
emitting, the loop and its CUDA graphs) all read and write the same per-row fields; splitting
it would scatter the batch state again, which is what this module replaced.)
"""

from __future__ import annotations

import logging
import time
from typing import NamedTuple

import torch

from . import _noise_v2 as v2
from ._models import SlotCache, fit_vocab, prefill_cache
from ._results import GenerationOutput, RequestMetrics
from ._sampling import (
    STREAM_ACCEPT,
    STREAM_DRAFT,
    STREAM_GENERATOR,
    STREAM_GLOBAL,
    STREAM_RESIDUAL,
    STREAM_TARGET,
    exponential,
    noise_keys,
    process_logits,
    sample,
    split_seed,
    uniform,
)
from ._sampling import uniforms as uniform_draws
from ._verify import FlyRule, accept_drafts, correction_tokens

__all__ = ["Batch", "Spec"]

logger = logging.getLogger(__name__)

#: per-row tensors (row r of each is request ``rid[r]``); selected together when rows drop
ROW_FIELDS = (
    "rid",
    "seed_lo",
    "seed_hi",
    "greedy",
    "temp",
    "top_k",
    "top_p",
    "max_tok",
    "stop_ids",
    "off",
    "pos",
    "pending",
    "dpend",
    "dpend_ok",
    "finished",
    "reason_stop",
    "finish_step",
    "n_out",
    "steps",
    "accepted",
    "deferred",
    "first_def",
    "hist",
)
#: per-row results copied to the full batch before rows drop and at the end
FINAL_FIELDS = (
    "finished",
    "reason_stop",
    "finish_step",
    "n_out",
    "steps",
    "accepted",
    "deferred",
    "first_def",
    "hist",
)
#: graph mode: host checks for finished rows every this many steps
CHECK_EVERY = 4
#: graph mode: cache capacity and output width are rounded up to this, so that calls with
#: similar prompts and max_tokens share a captured graph
ROUND = 64
#: captured graphs an engine keeps for later calls (each holds its batch's KV caches)
GRAPHS_KEPT = 4


def _margins(x: torch.Tensor, *, logits: bool = False) -> torch.Tensor:
    """Top-1 minus top-2 probability over the last axis (of ``softmax(x)`` for logits)."""
    x = x.float()
    top = x.topk(2, dim=-1).values
    if logits:
        top = (top - x.logsumexp(dim=-1, keepdim=True)).exp()
    return top[..., 0] - top[..., 1]


def _round_up(n: int) -> int:
    return -(-n // ROUND) * ROUND


class Spec(NamedTuple):
    k: int
    fly: FlyRule | None
    probabilistic: bool
    noise: str  #: one of qualgate.config.options.NOISE_MODES

    @property
    def coupled(self) -> bool:
        return self.noise == "coupled"


class Batch:
    """Decoding state of up to ``max_num_seqs`` requests of one :meth:`generate` call.

    ``graphs``: capture :meth:`step` as a CUDA graph (CUDA only); ``static``: attention
    reads every cache slot (the capacity) instead of only the slots in use, as graph mode
    must. Graph mode implies static shapes; static shapes alone run on any device.
    """

    def __init__(
        self,
        engine,
        indices,
        prompt_ids,
        params,
        seeds,
        spec: Spec | None,
        t0,
        *,
        graphs=False,
        static=False,
        noise="independent",
    ):
        self.engine = engine
        self.tgt, self.drf = engine._target, engine._drafter
        self.tokenizer = engine.tokenizer
        self.graphs = graphs
        self.static = static or graphs
        self.pool = engine._graph_pool() if graphs else None
        self.indices, self.prompt_ids, self.params, self.seeds = indices, prompt_ids, params, seeds
        self.spec, self.t0 = spec, t0
        # vllm-v1: noise indexed by the request generator's call count; vllm-v2: vLLM 0.34's
        # counter-based draws keyed by seed, position and token (docs/engine.md)
        self.noise = noise
        self.vllm = noise == "vllm-v1"
        self.v2 = noise == "vllm-v2"
        self.dev = dev = engine.device
        self.vocab = self.tgt.vocab
        self.k = k = spec.k if spec else 0
        long = self.long = dict(dtype=torch.long, device=dev)
        b0 = self.b0 = len(prompt_ids)

        self.any_sampled = not all(p.greedy for p in params)
        self.use_top_k = any(p.top_k > 0 for p in params)
        self.use_top_p = any(p.top_p < 1 for p in params)
        eos = set(engine.eos_token_ids)
        stop_lists = [sorted(set(p.stop_token_ids) | (set() if p.ignore_eos else eos)) for p in params]
        width = max(1, max(len(s) for s in stop_lists))
        self.has_stop_ids = any(stop_lists)
        self.stop_strings = {i: p.stop for i, p in enumerate(params) if p.stop}
        self.stop_text: dict[int, str] = {}
        self.checked: dict[int, int] = {}

        lo_hi = [split_seed(s) for s in seeds]
        self.rid = torch.arange(b0, **long)
        self.seed_lo = torch.tensor([a for a, _ in lo_hi], **long)
        self.seed_hi = torch.tensor([b for _, b in lo_hi], **long)
        self.greedy = torch.tensor([p.greedy for p in params], dtype=torch.bool, device=dev)
        self.temp = torch.tensor([1.0 if p.greedy else p.temperature for p in params], device=dev)
        self.top_k = torch.tensor([p.top_k for p in params], **long)
        self.top_p = torch.tensor([p.top_p for p in params], device=dev)
        self.max_tok = torch.tensor([p.max_tokens for p in params], **long)
        self.stop_ids = torch.tensor([s + [-1] * (width - len(s)) for s in stop_lists], **long)
        for name in FINAL_FIELDS:
            setattr(
                self,
                name,
                torch.zeros(b0, dtype=torch.bool if name in ("finished", "reason_stop") else torch.long, device=dev),
            )
        self.hist = torch.zeros(b0, k + 1, **long)
        self.first_def = torch.full((b0,), -1, **long)  # output index of the first deferred token
        self.final = {name: getattr(self, name).clone() for name in FINAL_FIELDS}
        self.stepno = torch.zeros((), **long)  # the step being decoded, on the device (graphs)
        self.buf_w = max(p.max_tokens for p in params) + k + 2
        if graphs:
            self.buf_w = _round_up(self.buf_w)
        self.out_buf = torch.full((b0 * self.buf_w + 1,), -1, **long)  # last element: write sink
        self.marg_buf = torch.zeros(b0 * self.buf_w + 1, device=dev)  # each emitted token's top-2 margin
        self.times: list[float] = []  # times[s]: when decoding step s (0 = prefill) had completed

    # ------------------------------------------------------------------ helpers

    @property
    def rows(self) -> int:
        return self.rid.shape[0]

    def _probs(self, logits):
        """(B, T, V) logits -> the processed target/draft probabilities of each row."""
        b, t, v = logits.shape
        if not self.any_sampled:
            return logits.softmax(dim=-1)
        rep = lambda x: x.unsqueeze(1).expand(b, t).reshape(b * t)  # noqa: E731 (repeat_interleave syncs)
        probs = process_logits(
            logits.reshape(b * t, v),
            rep(self.temp),
            rep(self.top_k),
            rep(self.top_p),
            use_top_k=self.use_top_k,
            use_top_p=self.use_top_p,
        )
        return probs.view(b, t, v)

    def _keys(self, stream, position, step=0):
        return noise_keys(self.seed_lo, self.seed_hi, stream, position, step)

    def _gumbel(self, position, draft_step=None):
        """vllm-v2: ``Exp(1)`` noise of the target's draw at input ``position`` (B,), or of the
        drafter's ``draft_step``-th draft (step mixed into the seed, position salted)."""
        if draft_step is None:
            return v2.exponential(self.seed_lo, self.seed_hi, position, self.vocab)
        salted = position + v2.DRAFT_NOISE_SALT
        return v2.exponential(self.seed_lo, self.seed_hi ^ draft_step, salted, self.vocab)

    def _forward(self, model, cache, ids, positions, slots, qvalid=None, *, reach=0, last_only=False):
        """Run ``model`` on ``ids`` (B, T) at ``positions``, writing their KV to ``slots``.

        Attention reads every cache slot (static shapes) or, eagerly, the slots up to the
        highest written one, ``reach`` slots past the furthest row's pending token.
        """
        length = self.capacity if self.static else self._top + reach + 1
        cache.write, cache.length = slots, length
        mask = model.slot_mask(slots, self.off, length, qvalid)
        return model(ids, positions, mask, cache, last_only=last_only)

    # ------------------------------------------------------------------ prefill

    def prefill(self) -> None:
        """Run both models over the prompts, sample the first token (step 0)."""
        prompt_ids, dev, long = self.prompt_ids, self.dev, self.long
        plen = max(len(p) for p in prompt_ids)
        padded = any(len(p) < plen for p in prompt_ids)
        ids = torch.tensor([[0] * (plen - len(p)) + p for p in prompt_ids], **long)
        valid = torch.tensor([[False] * (plen - len(p)) + [True] * len(p) for p in prompt_ids], device=dev)
        positions = (valid.long().cumsum(dim=1) - 1).clamp(min=0)
        lens = torch.tensor([len(p) for p in prompt_ids], **long)
        # Speculative batches keep slot 0 as a sink for the drafter's masked dummy token.
        start = 1 if self.spec else 0
        self.off = start + plen - lens
        self.capacity = start + plen + max(p.max_tokens for p in self.params) + 2 * self.k + 2
        if self.graphs:
            self.capacity = _round_up(self.capacity)
        self.pos = lens  # position of the pending token
        mask = self.tgt.prefill_mask(valid) if padded else None
        cache = prefill_cache()
        logits = self.tgt(ids, positions, mask, cache, last_only=True)[:, 0, : self.vocab]
        self.tcache = SlotCache(cache, start, self.capacity)
        del cache
        first = logits.argmax(dim=-1)
        margin = _margins(logits, logits=True)
        if self.any_sampled:
            probs = self._probs(logits.unsqueeze(1))[:, 0]
            margin = _margins(probs)
            if self.v2:  # keyed by the last prompt token's position
                noise = self._gumbel(self.pos - 1)
            elif self.vllm:  # generator call 0 (the first token, every mode)
                noise = exponential(self._keys(STREAM_GENERATOR, torch.zeros_like(self.pos)), self.vocab)
            else:
                noise = exponential(self._keys(STREAM_TARGET, self.pos), self.vocab)
            first = torch.where(self.greedy, first, sample(probs, noise))
        self.pending = first
        self.dpend = torch.stack([first, first], dim=1)
        self.dpend_ok = torch.zeros(self.b0, 2, dtype=torch.bool, device=dev)
        self.dpend_ok[:, 1] = True
        self.dcache = None
        if self.spec:
            mask = self.drf.prefill_mask(valid) if padded else None
            cache = prefill_cache()
            self.drf(ids, positions, mask, cache, last_only=True)
            self.dcache = SlotCache(cache, start, self.capacity)
        self._emit1(first, margin)
        self.times.append(time.perf_counter())

    # ------------------------------------------------------------------ one step

    def step(self) -> None:
        """One decoding step for every row, in place (capturable: no host reads).

        With the engine's ``compile``, the whole step (both models, the verification, the
        emission) runs as one function through ``torch.compile``, so that its many small
        operations fuse into few kernels.
        """
        if self.engine.compiled_step is not None:
            self.engine.compiled_step(self)
        else:
            self._step()

    def _step(self) -> None:
        self.stepno.add_(1)
        if not self.static:
            self._top = int((self.pos + self.off).max())
        if self.spec is None:
            self._target_step()
        else:
            self._spec_step()

    def _target_step(self):
        slots = (self.pos + self.off).unsqueeze(1)
        logits = self._forward(self.tgt, self.tcache, self.pending.unsqueeze(1), self.pos.unsqueeze(1), slots)
        logits = logits[:, 0, : self.vocab]
        token = logits.argmax(dim=-1)
        margin = _margins(logits, logits=True)
        if self.any_sampled:
            probs = self._probs(logits.unsqueeze(1))[:, 0]
            margin = _margins(probs)
            if self.v2:  # keyed by the input token's position
                noise = self._gumbel(self.pos)
            elif self.vllm:  # one generator call per token: call n_out draws token n_out
                noise = exponential(self._keys(STREAM_GENERATOR, self.n_out), self.vocab)
            else:
                noise = exponential(self._keys(STREAM_TARGET, self.pos + 1), self.vocab)
            token = torch.where(self.greedy, token, sample(probs, noise))
        self.pos.add_((~self.finished).long())
        self.pending.copy_(token)
        self._emit1(token, margin)

    def _spec_step(self):
        """K drafts, one verification pass, then the emitted tokens (docs/engine.md)."""
        spec, vocab, k = self.spec, self.vocab, self.k
        pos, off, step = self.pos, self.off, self.steps
        ar = torch.arange(k + 1, device=self.dev)
        sampled_noise = self.any_sampled and (spec.coupled or spec.probabilistic)
        e_all = None
        # vllm-v1: speculative step s (0-based) makes the request generator's calls 1 + 3s
        # (bonus token), 2 + 3s (acceptance uniforms), 3 + 3s (recovered tokens)
        call = 1 + 3 * step
        if spec.coupled and self.any_sampled:
            e_all = exponential(self._keys(STREAM_TARGET, pos.unsqueeze(1) + 1 + ar), vocab)  # (B, K+1, V)

        # draft K tokens; the first input is (token at pos - 1, or a dummy in the sink slot; pending)
        dpos = torch.stack([pos - 1, pos], dim=1)
        slots = torch.where(self.dpend_ok, dpos + off.unsqueeze(1), 0)
        dl = self._forward(self.drf, self.dcache, self.dpend, dpos, slots, self.dpend_ok, last_only=True)[:, 0]
        drafts, qs = [], []
        for j in range(k):
            if j:
                at = (pos + j).unsqueeze(1)
                dl = self._forward(
                    self.drf, self.dcache, drafts[-1].unsqueeze(1), at, at + off.unsqueeze(1), reach=j, last_only=True
                )[:, 0]
            dl = fit_vocab(dl, vocab)
            d = dl.argmax(dim=-1)
            if spec.probabilistic and sampled_noise:
                if self.vllm or self.v2:  # vLLM's drafter: temperature only
                    q = process_logits(dl, self.temp, self.top_k, self.top_p, use_top_k=False, use_top_p=False)
                    if self.v2:  # draft j from the drafter's logits at pos + j, its own stream
                        noise = self._gumbel(pos + j, draft_step=j)
                    else:  # the device's global generator
                        noise = exponential(self._keys(STREAM_GLOBAL, step, j), vocab)
                else:
                    q = self._probs(dl.unsqueeze(1))[:, 0]
                    if e_all is not None:
                        noise = e_all[:, j]
                    else:
                        noise = exponential(self._keys(STREAM_DRAFT, pos + 1 + j, step), vocab)
                d = torch.where(self.greedy, d, sample(q, noise))
                qs.append(q)
            drafts.append(d)
        draft = torch.stack(drafts, dim=1)
        q = torch.stack(qs, dim=1) if qs else None

        # score with the target
        tin = torch.cat([self.pending.unsqueeze(1), draft], dim=1)
        tpos = pos.unsqueeze(1) + ar
        tl = self._forward(self.tgt, self.tcache, tin, tpos, tpos + off.unsqueeze(1), reach=k)[..., :vocab]
        tp = self._probs(tl) if self.any_sampled or spec.fly is not None else tl
        coupled_sample = uniforms = None
        if e_all is not None:
            coupled_sample = torch.where(self.greedy.unsqueeze(1), tl.argmax(dim=-1), sample(tp, e_all))
        elif self.any_sampled and self.v2:  # tl_rand32(seed, pos + i) for draft i
            uniforms = v2.rand32(self.seed_lo, self.seed_hi, pos.unsqueeze(1) + ar[:k])
        elif self.any_sampled and self.vllm:
            uniforms = uniform_draws(self._keys(STREAM_GENERATOR, call + 1), k)
        elif self.any_sampled:
            uniforms = uniform(self._keys(STREAM_ACCEPT, pos.unsqueeze(1) + 1 + ar[:k], step))
        acc = accept_drafts(
            draft,
            tl,
            tp,
            self.greedy,
            draft_probs=q,
            uniform=uniforms,
            coupled_sample=coupled_sample,
            fly=spec.fly,
        )
        a = acc.num_accepted
        noise = None
        if self.any_sampled and self.v2:  # bonus or resampled token: the target's draw at pos + a
            noise = self._gumbel(pos + a)
        elif self.any_sampled and self.vllm:  # the bonus token's call, or the recovered tokens'
            noise = exponential(self._keys(STREAM_GENERATOR, torch.where(a == k, call, call + 2)), vocab)
        elif self.any_sampled and coupled_sample is None:
            noise = exponential(self._keys(STREAM_RESIDUAL, pos + 1 + a, step), vocab)
        last = correction_tokens(
            a, draft, tl, tp, self.greedy, draft_probs=q, noise=noise, coupled_sample=coupled_sample
        )

        # advance: pending tokens, the drafter's next input, positions, counters
        all_kept = a == k
        self.dpend.copy_(torch.stack([torch.where(all_kept, draft[:, -1], last), last], dim=1))
        self.dpend_ok.copy_(torch.stack([all_kept, torch.ones_like(all_kept)], dim=1))
        self.pending.copy_(last)
        alive = (~self.finished).long()
        self.pos.add_((a + 1) * alive)
        self.steps.add_(alive)
        self.accepted.add_(a * alive)
        self.deferred.add_(acc.deferred.sum(dim=1) * alive)
        first = torch.where(acc.deferred, ar[:k], k).min(dim=1).values
        new = (first < k) & (alive > 0) & (self.first_def < 0)
        self.first_def.copy_(torch.where(new, self.n_out + first, self.first_def))
        self.hist.add_((a.unsqueeze(1) == ar).long() * alive.unsqueeze(1))  # (one_hot syncs)
        j = ar.unsqueeze(0)
        tokens = torch.where(j < a.unsqueeze(1), torch.nn.functional.pad(draft, (0, 1)), last.unsqueeze(1))
        # emitted token j was decided on the target's distribution at position j
        self._emit(tokens, a + 1, _margins(tp, logits=tp is tl))

    # ------------------------------------------------------------------ emitting tokens

    def _emit(self, tokens, n_emit, margins):
        """Append up to n_emit tokens per row, apply stop/length rules, update state."""
        t = tokens.shape[1]
        j = torch.arange(t, device=self.dev).unsqueeze(0)
        alive = ~self.finished
        valid = (j < n_emit.unsqueeze(1)) & alive.unsqueeze(1)
        count = self.n_out.unsqueeze(1) + j + 1
        is_len = count >= self.max_tok.unsqueeze(1)
        is_stop = (tokens.unsqueeze(-1) == self.stop_ids.unsqueeze(1)).any(-1)
        end = valid & (is_len | is_stop)
        has_end = end.any(dim=1)
        first = torch.where(end, j, t).min(dim=1).values
        n_keep = torch.where(has_end, first + 1, torch.where(alive, n_emit, 0))
        reason = is_stop & ~is_len
        first_c = first.clamp(max=t - 1).unsqueeze(1)
        write = j < n_keep.unsqueeze(1)
        flat = self.rid.unsqueeze(1) * self.buf_w + self.n_out.unsqueeze(1) + j
        at = torch.where(write, flat, self.out_buf.numel() - 1).flatten()
        self.out_buf.scatter_(0, at, tokens.flatten())
        self.marg_buf.scatter_(0, at, margins.flatten())
        self.n_out.add_(n_keep)
        self.reason_stop |= has_end & reason.gather(1, first_c).squeeze(1)
        self.finish_step.copy_(torch.where(has_end & alive, self.stepno, self.finish_step))
        self.finished |= has_end

    def _emit1(self, token, margin):
        """:meth:`_emit` for one token per row (target-only steps and the first token)."""
        alive = ~self.finished
        n = self.n_out
        is_len = n + 1 >= self.max_tok
        end = is_len
        if self.has_stop_ids:
            is_stop = (token.unsqueeze(1) == self.stop_ids).any(dim=1)
            end = end | is_stop
            self.reason_stop |= alive & is_stop & ~is_len
        end = end & alive
        at = torch.where(alive, self.rid * self.buf_w + n, self.out_buf.numel() - 1)
        self.out_buf.scatter_(0, at, token)
        self.marg_buf.scatter_(0, at, margin)
        self.finish_step.copy_(torch.where(end, self.stepno, self.finish_step))
        self.finished |= end
        self.n_out.add_(alive.long())

    def _check_stop_strings(self, stepno):
        rids = self.rid.tolist()
        rows = [r for r, rid in enumerate(rids) if rid in self.stop_strings and rid not in self.stop_text]
        if not rows:
            return
        n_now = self.n_out[rows].tolist()
        for r, n in zip(rows, n_now):
            rid = rids[r]
            toks = self.out_buf[rid * self.buf_w : rid * self.buf_w + n].tolist()
            for m in range(self.checked.get(rid, 0), n):
                text = self.tokenizer.decode(toks[: m + 1], skip_special_tokens=True)
                hits = [text.find(s) for s in self.stop_strings[rid] if s in text]
                if hits:
                    self.stop_text[rid] = text[: min(hits)]
                    self.n_out[r] = m + 1
                    self.reason_stop[r] = True
                    if not bool(self.finished[r]):
                        self.finish_step[r] = stepno
                    self.finished[r] = True
                    break
            self.checked[rid] = n

    # ------------------------------------------------------------------ rows

    def _flush(self):
        for name in FINAL_FIELDS:
            self.final[name].index_copy_(0, self.rid, getattr(self, name))

    def _select(self, idx):
        """Keep rows ``idx`` (drop finished requests from the state and the caches)."""
        self._flush()
        for name in ROW_FIELDS:
            setattr(self, name, getattr(self, name).index_select(0, idx))
        for cache in (self.tcache, self.dcache):
            if cache is not None:
                cache.select(idx)
        self._graph = None
        self._warm = False

    # ------------------------------------------------------------------ the loop

    def _key(self) -> tuple:
        """What a captured step depends on besides the values in its tensors."""
        return (
            self.rows,
            self.b0,
            self.buf_w,
            self.capacity,
            self.spec,
            self.noise,
            self.any_sampled,
            self.use_top_k,
            self.use_top_p,
            self.has_stop_ids,
            self.stop_ids.shape[1],
        )

    def _state(self) -> dict[str, torch.Tensor]:
        """Every tensor a step reads or writes (a captured graph's inputs and outputs)."""
        state = {name: getattr(self, name) for name in ROW_FIELDS}
        state["out_buf"], state["marg_buf"], state["stepno"] = self.out_buf, self.marg_buf, self.stepno
        for tag, cache in (("t", self.tcache), ("d", self.dcache)):
            if cache is not None:
                for i, (k, v) in enumerate(zip(cache.keys, cache.values)):
                    state[f"{tag}k{i}"], state[f"{tag}v{i}"] = k, v
        return state

    def _adopt(self, stored: dict[str, torch.Tensor]) -> None:
        """Move this batch's state into the tensors an earlier call's graph was captured with."""
        for name, src in self._state().items():
            stored[name].copy_(src)
        for name in ROW_FIELDS:
            setattr(self, name, stored[name])
        self.out_buf, self.marg_buf, self.stepno = stored["out_buf"], stored["marg_buf"], stored["stepno"]
        for tag, cache in (("t", self.tcache), ("d", self.dcache)):
            if cache is not None:
                cache.keys = [stored[f"{tag}k{i}"] for i in range(len(cache.keys))]
                cache.values = [stored[f"{tag}v{i}"] for i in range(len(cache.values))]

    def _capture(self) -> None:
        """Capture :meth:`step` as a CUDA graph (or, if the model cannot be, go eager)."""
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph, pool=self.pool, stream=self._stream):
                self.step()
        except RuntimeError as exc:  # a model whose forward cannot be captured
            logger.warning("CUDA graph capture failed (%s); decoding eagerly", exc)
            torch.cuda.synchronize(self.dev)
            self.graphs = False
            self.step()
            return
        self._graph = graph
        kept = self.engine._graphs
        kept[self._key()] = (graph, self._state())
        while len(kept) > GRAPHS_KEPT:
            kept.popitem(last=False)
        graph.replay()

    def _run_steps(self, n: int) -> None:
        """Run ``n`` steps: eagerly, or as replays of this shape's CUDA graph."""
        for _ in range(n):
            if not self.graphs:
                self.step()
            elif self._graph is not None:
                self._graph.replay()
            elif (kept := self.engine._graphs.get(self._key())) is not None:  # an earlier call's
                self.engine._graphs.move_to_end(self._key())
                self._graph, stored = kept
                self._adopt(stored)
                self._graph.replay()
            elif not self._warm:  # first step at this shape: eager, on the capture stream
                stream = self._stream
                stream.wait_stream(torch.cuda.current_stream(self.dev))
                with torch.cuda.stream(stream):
                    self.step()
                torch.cuda.current_stream(self.dev).wait_stream(stream)
                self._warm = True
            else:
                self._capture()
            self.times.append(time.perf_counter())

    def decode(self) -> list[GenerationOutput]:
        """Prefill, step until every row has finished, and return the outputs."""
        self._graph, self._warm = None, False
        self._stream = torch.cuda.Stream(self.dev) if self.graphs else None
        self.prefill()
        stepno = 0
        # Target-only without stop ids or strings: every row emits one token per step, so the
        # host knows when each row finishes and needs no device sync to find out.
        predictable = self.spec is None and not self.has_stop_ids and not self.stop_strings
        active_max = [p.max_tokens for p in self.params]  # per batch row, kept in predictable mode
        cuda = self.dev.type == "cuda"
        # Finished rows are dropped once a quarter (eager) or half (graphs: each new batch
        # size costs a capture) of the batch has finished.
        drop_share = 2 if self.graphs else 4
        while True:
            if self.stop_strings:
                self._check_stop_strings(stepno)
            b = self.rows
            if predictable:
                done = [m <= stepno + 1 for m in active_max]
                n_done = sum(done)
                if cuda and stepno + 1 in active_max:
                    torch.cuda.synchronize(self.dev)  # rows finish now: time them
            else:
                n_done = int(self.finished.sum())
            self.times[-1] = time.perf_counter()
            if n_done == b:
                break
            if n_done and drop_share * n_done >= b:
                if predictable:
                    keep = [r for r, d in enumerate(done) if not d]
                    active_max = [active_max[r] for r in keep]
                    idx = torch.tensor(keep, **self.long)
                else:
                    idx = (~self.finished).nonzero().squeeze(1)
                self._select(idx)
            if predictable:  # up to the step at which the next row finishes
                n = min(m for m in active_max if m > stepno + 1) - 1 - stepno
            elif self.graphs and not self.stop_strings:
                n = CHECK_EVERY
            else:
                n = 1
            self._run_steps(n)
            stepno += n
            if n > 1 and cuda:
                torch.cuda.synchronize(self.dev)
                self.times[-n:] = [time.perf_counter()] * n
        self._flush()
        return self._results()

    def _results(self) -> list[GenerationOutput]:
        final = {key: v.cpu() for key, v in self.final.items()}
        out = self.out_buf[:-1].view(self.b0, self.buf_w).cpu()
        marg = self.marg_buf[:-1].view(self.b0, self.buf_w).clamp(0, 1).cpu()
        results = []
        for r in range(self.b0):
            n = int(final["n_out"][r])
            first_def = int(final["first_def"][r])
            toks = tuple(out[r, :n].tolist())
            text = None
            if self.tokenizer is not None:
                text = self.stop_text.get(r)
                if text is None:
                    text = self.tokenizer.decode(list(toks), skip_special_tokens=True)
            steps = int(final["steps"][r])
            metrics = RequestMetrics(
                num_drafts=steps if self.spec else 0,
                num_draft_tokens=steps * self.k,
                num_accepted_tokens=int(final["accepted"][r]),
                num_deferred_tokens=int(final["deferred"][r]),
                acceptance_histogram=tuple(final["hist"][r].tolist()) if self.spec else (),
                num_output_tokens=n,
                wall_time_s=self.times[min(int(final["finish_step"][r]), len(self.times) - 1)] - self.t0,
            )
            results.append(
                GenerationOutput(
                    index=self.indices[r],
                    prompt_token_ids=tuple(self.prompt_ids[r]),
                    token_ids=toks,
                    text=text,
                    finish_reason="stop" if bool(final["reason_stop"][r]) else "length",
                    seed=self.seeds[r],
                    metrics=metrics,
                    first_deferred_token=first_def if 0 <= first_def < n else None,
                    top2_margins=tuple(marg[r, :n].tolist()),
                )
            )
        return results
