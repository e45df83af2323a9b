"""Llama shapes of the demo target and drafter (same tokenizer, same vocabulary)."""

from __future__ import annotations

__all__ = ["SHAPES", "build_model", "llama_config", "parse_shape"]

#: Shapes of the shipped models: layers, hidden width, attention heads, MLP width.
SHAPES = {
    "target": {"layers": 6, "hidden": 160, "heads": 5, "ff": 384},
    "drafter": {"layers": 2, "hidden": 128, "heads": 4, "ff": 384},
}
MAX_POSITIONS = 256


def parse_shape(spec: str | dict) -> dict:
    """A shape from a preset name (``'target'``), a dict, or ``'layers=2,hidden=64,...'``."""
    if isinstance(spec, dict):
        shape = dict(spec)
    elif spec in SHAPES:
        shape = dict(SHAPES[spec])
    else:
        try:
            shape = {k.strip(): int(v) for k, v in (kv.split("=") for kv in spec.split(","))}
        except ValueError:
            raise ValueError(
                f"shape must be one of {sorted(SHAPES)} or 'layers=L,hidden=H,heads=A,ff=F', got {spec!r}"
            ) from None
    if set(shape) != {"layers", "hidden", "heads", "ff"}:
        raise ValueError(f"shape needs exactly layers, hidden, heads, ff; got {spec!r}")
    if shape["hidden"] % shape["heads"]:
        raise ValueError(f"hidden must be a multiple of heads, got {spec!r}")
    return shape


def llama_config(shape, tokenizer):
    """A ``LlamaConfig`` for a shape and the demo tokenizer (tied embeddings, no bias)."""
    from transformers import LlamaConfig

    shape = parse_shape(shape)
    return LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=shape["hidden"],
        intermediate_size=shape["ff"],
        num_hidden_layers=shape["layers"],
        num_attention_heads=shape["heads"],
        num_key_value_heads=shape["heads"],
        max_position_embeddings=MAX_POSITIONS,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )


def build_model(shape, tokenizer, *, seed: int):
    """A freshly initialised ``LlamaForCausalLM`` (float32), initialised from ``seed``."""
    import torch
    from transformers import LlamaForCausalLM

    config = llama_config(shape, tokenizer)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.bos_token_id = None
    return model
