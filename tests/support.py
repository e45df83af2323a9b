"""Paths and helpers importable from any test module (``tests/`` is on ``pythonpath``)."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: Read-only reference material laid beside the checkout (never copied into the project).
SHARED = REPO.parent / "shared"
