"""Kept importable for manifests written by earlier versions, which name
``qualgate.harness.request_seed``; the runner is :mod:`qualgate.run.runner`."""

from qualgate.run.runner import request_seed

__all__ = ["request_seed"]
