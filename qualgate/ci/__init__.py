"""CI integration: lint serving configs, bind gate evidence to them, audit logs, admission.

- :func:`read_serving_config`: a vLLM serving config (YAML/JSON, ``vllm serve`` command
  line, args file) or a qualgate decoding config, with its config id.
- :func:`lint`: findings about what the config really does under vLLM 0.33.
- :func:`check`: whether a config may be deployed: a lossless one always; a lossy one only
  with a gate report that passed exactly this config id.
- :func:`audit_log`: the lossy warning, scheduler overrides and config echoes of a server log.
- :func:`admission` and :func:`running_plateau`: the token-budget arithmetic behind running
  request caps, and whether measured running requests plateau below ``max_num_seqs``.
"""

from qualgate.vllm033.serving import ServingConfig, read_serving_config

from ._admission import (
    AdmissionResult,
    PlateauReport,
    Scrape,
    admission,
    admission_for,
    method_charge,
    parse_exposition,
    read_metrics,
    render_admission,
    running_plateau,
)
from ._audit import AuditEvent, AuditReport, audit_log, audit_text
from ._check import CheckResult, check, parse_age
from ._lint import RULES, SEVERITIES, Finding, LintReport, lint, lint_config, max_topk_entropy
from ._release import Release, deployment_release
from ._server import read_server, server_config

__all__ = [
    "RULES",
    "SEVERITIES",
    "AdmissionResult",
    "AuditEvent",
    "AuditReport",
    "CheckResult",
    "Finding",
    "LintReport",
    "PlateauReport",
    "Release",
    "Scrape",
    "ServingConfig",
    "admission",
    "admission_for",
    "audit_log",
    "audit_text",
    "check",
    "deployment_release",
    "lint",
    "lint_config",
    "max_topk_entropy",
    "method_charge",
    "parse_age",
    "render_admission",
    "parse_exposition",
    "read_metrics",
    "read_serving_config",
    "read_server",
    "running_plateau",
    "server_config",
]
