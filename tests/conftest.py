"""Fixtures shared by every test module."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import REPO, SHARED


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.fail(f"../shared not found beside the checkout (looked in {SHARED})")
    return SHARED


@pytest.fixture(scope="session")
def repo_dir() -> Path:
    return REPO
