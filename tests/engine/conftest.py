"""Tiny random-weight Llama pairs for the engine tests (built from a config: no downloads)."""

from __future__ import annotations

import functools
import os

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


#: where engine8 and engine32 decode; QUALGATE_TEST_DEVICE=cuda runs their tests on a GPU
#: (CUDA graphs on), which CI cannot do
DEVICE = os.environ.get("QUALGATE_TEST_DEVICE", "cpu")


@functools.lru_cache(maxsize=None)
def _pair(vocab: int, seed: int):
    """A 2-layer target and a 1-layer drafter sharing its embeddings, first layer and head.

    ``initializer_range=0.3`` makes the distributions peaked and context dependent; the
    shared weights make the drafter agree with the target often, not always.
    """
    torch.manual_seed(seed)
    common = dict(
        vocab_size=vocab,
        hidden_size=32,
        intermediate_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        initializer_range=0.3,
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
    )
    target = transformers.LlamaForCausalLM(transformers.LlamaConfig(num_hidden_layers=2, **common)).eval()
    drafter = transformers.LlamaForCausalLM(transformers.LlamaConfig(num_hidden_layers=1, **common)).eval()
    drafter.load_state_dict(target.state_dict(), strict=False)
    return target, drafter


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def device() -> str:
    """Where every engine test decodes (an engine on another device would move the cached
    models that the session's engines share)."""
    return DEVICE


@pytest.fixture(scope="session")
def make_pair():
    """``make_pair(vocab=8, seed=0) -> (target, drafter)``, cached."""
    return lambda vocab=8, seed=0: _pair(vocab, seed)


@pytest.fixture(scope="session")
def engine8(make_pair):
    from qualgate.engines.reference import ReferenceEngine

    return ReferenceEngine(*make_pair(8), device=DEVICE, max_num_seqs=10_000)


@pytest.fixture(scope="session")
def engine32(make_pair):
    from qualgate.engines.reference import ReferenceEngine

    return ReferenceEngine(*make_pair(32), device=DEVICE)
