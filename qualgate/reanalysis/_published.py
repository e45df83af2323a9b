"""The published tables shipped with qualgate (``qualgate/data/published/*.csv``).

Each is re-typed from vLLM pull request #53987 and its docs page
(``docs/features/speculative_decoding/fly.md``), with the source on every row
(``source_pr``, ``source_url``, ``source_commit``, ``source_part``). Empty cells were not
recoverable.
"""

from __future__ import annotations

from importlib import resources

__all__ = ["load_published", "published_path", "published_tables"]


def _folder():
    return resources.files("qualgate").joinpath("data", "published")


def published_tables() -> tuple[str, ...]:
    """Names of the shipped tables (file names without ``.csv``), sorted."""
    return tuple(sorted(p.name[:-4] for p in _folder().iterdir() if p.name.endswith(".csv")))


def published_path(name: str):
    """The shipped CSV file of table ``name`` (a path-like :mod:`importlib.resources` object)."""
    names = published_tables()
    key = name[:-4] if name.endswith(".csv") else name
    if key not in names:
        raise ValueError(f"name must be one of {list(names)}, got {name!r}")
    return _folder().joinpath(f"{key}.csv")


def load_published(name: str):
    """Load a shipped table as a :class:`pandas.DataFrame` of strings, as printed.

    Values are kept as text (``"92.0%"``, ``"20/30"``, ``"1.280"``) so that the printed
    precision survives; an empty string means the value was not recoverable.

    Examples
    --------
    >>> df = load_published("fly_pr53987_v1_eval")
    >>> df.loc[0, ["dataset", "n", "target_correct", "target_printed"]].tolist()
    ['GSM8K', '250', '230', '92.0%']
    """
    import pandas as pd

    with published_path(name).open("rb") as fh:
        return pd.read_csv(fh, dtype=str, keep_default_na=False)
