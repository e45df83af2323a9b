"""Fixtures of the suites tests: an offline ``datasets`` with its cache in a temp folder,
and the real suites loaded once per session from ``../shared/data``."""

from __future__ import annotations

import pytest

from support import SHARED, require_shared

DATA = SHARED / "data"
LOCAL = {
    "gsm8k": DATA / "gsm8k" / "test.jsonl",
    "math500": DATA / "math500" / "test.jsonl",
    "aime25": DATA / "aime2025" / "test.jsonl",
}


@pytest.fixture(scope="session", autouse=True)
def hf_cache(tmp_path_factory):
    """Route every ``datasets`` cache write to a temp folder and forbid Hub access."""
    import datasets.config

    cache = tmp_path_factory.mktemp("hf_datasets_cache")
    mp = pytest.MonkeyPatch()
    mp.setattr(datasets.config, "HF_DATASETS_CACHE", cache)
    mp.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    mp.setenv("HF_DATASETS_CACHE", str(cache))
    mp.setenv("HF_HUB_OFFLINE", "1")
    mp.setenv("HF_DATASETS_OFFLINE", "1")
    yield cache
    mp.undo()


@pytest.fixture(scope="session")
def real_suite(hf_cache):
    """``real_suite(name)``: the built-in suite loaded from the shared local copy (cached)."""
    from qualgate.suites import load_suite

    require_shared()
    loaded = {}

    def get(name):
        if name not in loaded:
            loaded[name] = load_suite(name, data_files=LOCAL[name], cache_dir=hf_cache)
        return loaded[name]

    return get
