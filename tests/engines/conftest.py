"""Tiny random-weight Llama pairs for the engine tests (built from a config: no downloads)."""

from __future__ import annotations

import os

import pytest

from support import tiny_llama_pair

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


#: where engine8 and engine32 decode; QUALGATE_TEST_DEVICE=cuda runs their tests on a GPU
#: (CUDA graphs on), which CI cannot do
DEVICE = os.environ.get("QUALGATE_TEST_DEVICE", "cpu")


def _pair(vocab: int, seed: int):
    """:func:`support.tiny_llama_pair` with BOS id 1 and EOS id 2 (the engine tests' vocabulary)."""
    return tiny_llama_pair(vocab, seed, bos=1, eos=2)


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
