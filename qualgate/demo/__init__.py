"""The embedded demo: a synthetic arithmetic task and a small target/drafter pair trained on it.

- :mod:`qualgate.demo.task` generates the questions (suite ``demo_arithmetic``, generator
  name ``demo_arithmetic``) and their chains of thought.
- :mod:`qualgate.demo.tokenizer` builds the character-level chat tokenizer both models use.
- :mod:`qualgate.demo.models` holds the Llama shapes; :mod:`qualgate.demo.train` trains them
  deterministically (``python -m qualgate.demo.train --out DIR --device cuda``).
- :mod:`qualgate.demo.plan` loads the plan ``qualgate demo`` runs (``plan.yaml``), sized on
  demand.

The trained pair ships in ``qualgate/demo/weights/{target,drafter}`` as Hugging Face model
folders; :func:`model_path` finds them.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["MODELS", "WEIGHTS_DIR", "model_path"]

#: Folder of the shipped weights (``target/`` and ``drafter/``).
WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"
MODELS = ("target", "drafter")


def model_path(which: str) -> Path:
    """The folder of the shipped ``'target'`` or ``'drafter'`` model.

    Raises
    ------
    ValueError
        ``which`` is not one of :data:`MODELS`.
    FileNotFoundError
        The weights are not there (not trained yet: run ``python -m qualgate.demo.train``
        and copy its output folders here).
    """
    if which not in MODELS:
        raise ValueError(f"which must be one of {list(MODELS)}, got {which!r}")
    path = WEIGHTS_DIR / which
    if not (path / "config.json").is_file():
        raise FileNotFoundError(
            f"demo {which} weights not found in {path}; train them with "
            "`python -m qualgate.demo.train --out DIR` and copy DIR/target and DIR/drafter there"
        )
    return path
