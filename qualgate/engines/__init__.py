"""Inference engines that qualgate runs decoding configurations on.

- :mod:`qualgate.engines.reference`: the batched PyTorch reference engine (target-only,
  standard speculative and FLy decoding for any pair of Hugging Face causal LMs), extra
  ``reference``.

Engine modules import torch lazily: importing this package imports nothing heavy.
"""
