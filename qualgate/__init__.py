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
