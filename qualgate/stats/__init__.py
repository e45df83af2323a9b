"""Paired statistics for baseline-vs-candidate comparisons (see :mod:`qualgate` for the conventions)."""
