"""qualgate: decide, with paired statistics, whether an inference configuration loses quality.

Conventions used everywhere in the package
------------------------------------------
A *baseline* B and a *candidate* C are scored on the same questions with the same seeds.
For each paired unit:

- ``both_correct``: B correct and C correct
- ``lost``: B correct and C wrong (the candidate lost the question)
- ``gained``: B wrong and C correct
- ``both_wrong``: B wrong and C wrong

The *difference* is ``accuracy(C) - accuracy(B) = (gained - lost) / n``; the *loss* is its
negative, ``(lost - gained) / n``. A positive loss means the candidate is worse.

Test vocabulary follows :mod:`scipy.stats`: ``alternative`` is one of ``'two-sided'``,
``'greater'`` or ``'less'`` and refers to the difference C - B (``'less'``: the candidate is
worse); intervals take ``confidence_level``; results carry ``statistic`` and ``pvalue``.
"""

__version__ = "0.1.0"

__all__ = ["gate", "load_records", "power", "__version__"]


def gate(
    baseline,
    candidate,
    *more,
    margin: float | None = 0.02,
    alpha: float = 0.05,
    policy: str = "noninferiority",
    judge_units: bool = False,
    **options,
):
    """Gate one or more candidates against a baseline, as ``qualgate gate`` does.

    Records ``qualgate judge`` wrote (given as paths) are gated as the command gates them: the
    margin scaled by the judge's measured sensitivity and alpha less its bound's level
    (:func:`qualgate.judge.judged_gate`), or as given with ``judge_units=True``.

    ``baseline`` and each candidate are record files or directories, another tool's logs
    (detected per path), or :class:`~qualgate.records.RecordSet` objects from
    :func:`load_records`. Further keyword ``options`` are those of
    :func:`qualgate.verdict.fixed.run_gate` (``missing``, ``on_missing``, ``max_errors``,
    ``weighting``, ``inconclusive``, ``suite_policy``, ...).

    Returns a :class:`~qualgate.verdict.fixed.GateReport`: ``str(report)`` is the command's
    text table, ``report.verdict`` the worst candidate's verdict, ``report.to_dict()`` the gate
    report file's content. Raises :class:`~qualgate.errors.DataError` for records that cannot
    be read or paired, ``ValueError`` for invalid settings.
    """
    import os

    from qualgate.verdict.fixed import run_gate

    candidates = [candidate, *more]
    if all(isinstance(p, (str, os.PathLike)) for p in (baseline, *candidates)):
        from qualgate.judge import judged_gate

        judged = judged_gate(baseline, candidates, margin, alpha, judge_units=judge_units)
        if judged is not None:
            margin, alpha = judged.margin, judged.alpha
    return run_gate(baseline, candidates, margin=margin, alpha=alpha, policy=policy, **options)


def power(
    *,
    discordant,
    margin: float | None = 0.02,
    loss=None,
    n=None,
    design: str = "noninferiority",
    alpha: float = 0.05,
    target: float = 0.8,
    method: str = "exact",
    alternative: str | None = None,
):
    """Questions needed, the power at ``n``, or the detectable loss, as ``qualgate power``.

    ``method`` is the command's default, ``exact`` (the power of the test the gate runs, every
    outcome enumerated); ``normal`` for the approximation.

    ``discordant``, ``loss`` and ``n`` are numbers or lists of numbers (a list gives a grid).
    Returns a :class:`~qualgate.report.power.PowerGrid`: ``str()`` is the command's table,
    ``to_dict()`` its JSON, ``results`` the :mod:`qualgate.stats` result of each cell.
    """
    from qualgate.report.power import power_grid

    return power_grid(
        discordant=discordant,
        margin=margin,
        loss=loss,
        n=n,
        design=design,
        alpha=alpha,
        target=target,
        method=method,
        alternative=alternative,
    )


def load_records(path, *, fmt: str = "auto", drop_truncated: bool = False, allow_unknown: bool = False, options=None):
    """One side's records: a qualgate records file or directory, or another tool's log
    (``fmt``: ``auto`` detects it; see :mod:`qualgate.records.importers`)."""
    from qualgate.records.importers import load_records as load

    return load(path, fmt=fmt, options=options, drop_truncated=drop_truncated, allow_unknown=allow_unknown)
