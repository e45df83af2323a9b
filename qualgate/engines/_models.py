"""The reference engine's view of a model: how to call it, its masks, and its static KV cache.

- :class:`Model` wraps a Hugging Face causal LM (keyword names across transformers 5.x,
  vocabulary width, the 4-D mask its attention implementation wants).
- :class:`SlotCache` is a preallocated KV cache in which every row keeps its own slots:
  the token at absolute position ``p`` of row ``r`` lives in slot ``p + offset[r]``. Writes go
  to slots given as a device tensor, so a decoding step has the same shapes every time and
  can be captured in a CUDA graph. docs/engine.md explains the layout.
"""

from __future__ import annotations

import inspect
import math
import os

import torch

__all__ = ["Model", "SlotCache", "fit_vocab", "load_model", "prefill_cache"]


class Model:
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

    def _as_mask(self, allowed: torch.Tensor) -> torch.Tensor:
        """(B, q, L) booleans -> the (B, 1, q, L) mask this attention implementation takes."""
        allowed = allowed.unsqueeze(1)
        if self.bool_mask:
            return allowed
        bias = torch.zeros(allowed.shape, dtype=self.dtype, device=allowed.device)
        return bias.masked_fill_(~allowed, torch.finfo(self.dtype).min)

    def prefill_mask(self, valid: torch.Tensor) -> torch.Tensor:
        """Causal mask over a left-padded prompt batch; ``valid`` (B, L) marks real tokens.

        A query sees the valid slots up to its own and always its own slot, so that no row is
        fully masked (pad queries see only themselves). Built here and passed as 4-D because
        transformers then uses it as is.
        """
        length = valid.shape[1]
        kv = torch.arange(length, device=valid.device)
        q = kv.unsqueeze(1)
        return self._as_mask((valid.unsqueeze(1) | (kv == q)) & (kv <= q))

    def slot_mask(self, qslot, offset, length, qvalid=None) -> torch.Tensor:
        """Mask for queries at slots ``qslot`` (B, q) over the first ``length`` cache slots.

        A query sees its row's slots from ``offset`` (B,) up to its own; a query marked invalid
        in ``qvalid`` (B, q) sees only its own slot.
        """
        kv = torch.arange(length, device=qslot.device)
        q = qslot.unsqueeze(-1)
        seen = (kv >= offset.view(-1, 1, 1)) & (kv <= q)
        if qvalid is not None:
            seen = seen & qvalid.unsqueeze(-1)
        return self._as_mask(seen | (kv == q))

    def __call__(self, ids, positions, mask, cache, *, last_only=False):
        """Logits (float32) of ``ids`` at ``positions`` (B, T); ``mask`` 4-D or None."""
        kwargs = {self.cache_kw: cache}
        if last_only and self.keep_kw:
            kwargs["logits_to_keep"] = 1
        out = self.model(input_ids=ids, position_ids=positions, attention_mask=mask, use_cache=True, **kwargs)
        logits = out.logits[:, -1:] if last_only else out.logits
        return logits.float()


def prefill_cache():
    """A fresh transformers ``DynamicCache`` (prompts are prefilled into one, then copied)."""
    from transformers import DynamicCache

    return DynamicCache()


def _cache_tensors(cache):
    """(keys, values) per layer of a ``DynamicCache``, across transformers 5.x layouts."""
    layers = getattr(cache, "layers", None)
    if layers is not None:
        return [(layer.keys, layer.values) for layer in layers]
    return list(zip(cache.key_cache, cache.value_cache))  # pragma: no cover - 4.x layout


class SlotCache:
    """A static KV cache: per layer (B, heads, capacity, head dim) keys and values.

    Before each forward pass the engine sets :attr:`write` (B, T), the slots the T new
    tokens of each row go to, and :attr:`length`, how many leading slots attention reads
    (the capacity when shapes must be static, fewer when running eagerly). The model calls
    :meth:`update` once per layer, as it would a transformers cache.
    """

    def __init__(self, prefilled, start: int, capacity: int):
        """Allocate, and copy a prefilled ``DynamicCache`` (B, H, P, D) into slots ``start..``."""
        pairs = _cache_tensors(prefilled)
        b, h, p, d = pairs[0][0].shape
        shift = start
        self.keys, self.values = [], []
        for k, v in pairs:
            buf_k = k.new_zeros(b, h, capacity, d)
            buf_v = v.new_zeros(b, h, capacity, d)
            buf_k[:, :, shift : shift + p] = k
            buf_v[:, :, shift : shift + p] = v
            self.keys.append(buf_k)
            self.values.append(buf_v)
        self.capacity = capacity
        self.length = capacity
        self.write: torch.Tensor | None = None

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):
        b, h, t, d = key_states.shape
        idx = self.write.view(b, 1, t, 1).expand(b, h, t, d)
        k, v = self.keys[layer_idx], self.values[layer_idx]
        k.scatter_(2, idx, key_states.to(k.dtype))
        v.scatter_(2, idx, value_states.to(v.dtype))
        return k[:, :, : self.length], v[:, :, : self.length]

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.length

    def select(self, idx: torch.Tensor) -> None:
        """Keep rows ``idx`` (dropping finished requests)."""
        self.keys = [k.index_select(0, idx) for k in self.keys]
        self.values = [v.index_select(0, idx) for v in self.values]


def fit_vocab(logits, vocab):
    """Cut a wider drafter vocabulary to the target's; pad a narrower one with -inf."""
    width = logits.shape[-1]
    if width > vocab:
        return logits[..., :vocab]
    if width < vocab:
        return torch.nn.functional.pad(logits, (0, vocab - width), value=-math.inf)
    return logits


def load_model(spec, device, dtype, kind) -> Model:
    if isinstance(spec, (str, os.PathLike)):
        from transformers import AutoModelForCausalLM

        kwargs = {} if dtype is None else {"dtype": dtype}
        try:
            model = AutoModelForCausalLM.from_pretrained(os.fspath(spec), **kwargs)
        except (OSError, ValueError) as exc:  # a hub id that does not exist, no network, a bad folder
            from qualgate.errors import DataError

            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise DataError(f"the {kind} model cannot be loaded: {first}", field=kind, value=os.fspath(spec)) from exc
        name = os.fspath(spec)
    elif isinstance(spec, torch.nn.Module):
        model = spec
        name = getattr(getattr(model, "config", None), "_name_or_path", "") or ""
        if dtype is not None:
            model = model.to(dtype)
    else:
        raise ValueError(f"{kind} must be a transformers causal LM or a path to one, got {spec!r}")
    return Model(model.to(device).eval(), name)
