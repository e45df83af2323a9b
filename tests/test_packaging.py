"""The wheel lists every package explicitly (so that suites/ ships as qualgate._suites)."""

import tomllib

from support import REPO


def test_every_package_directory_is_listed_in_pyproject():
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "qualgate").rglob("__init__.py")}
    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"


def test_speculative_defaults_match_vllm_033():
    from qualgate.vllm033.speculative import resolve_speculative

    r = resolve_speculative({"model": "d", "num_speculative_tokens": 8, "rejection_sample_method": "fly"})
    assert r == {
        "method": "draft_model",
        "model": "d",
        "num_speculative_tokens": 8,
        "rejection_sample_method": "fly",
        "draft_sample_method": "greedy",
        "fly_window_size": 6,
        "fly_entropy_threshold": 0.3,
        "fly_entropy_top_k": 3,
    }
