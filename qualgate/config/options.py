"""The gate's option vocabularies, and the reading options' defaults, each defined once.

Every function that takes one of these options checks it against the tuple here, the report
reader (:mod:`qualgate.evidence.gate_report`) and the plan reader (:mod:`qualgate.config.decoding`) validate the
files against them, and the command line builds its ``click.Choice`` lists from them. The
module imports nothing, so that the commands can use it at import and stay quick to start.
"""

__all__ = [
    "INCONCLUSIVE_AS",
    "INPUT_FORMATS",
    "MISSING",
    "MULTIPLICITIES",
    "NOISE_MODES",
    "ON_MISSING",
    "ON_PROMPT_MISMATCH",
    "ORDERS",
    "POLICIES",
    "READING_DEFAULTS",
    "WEIGHTINGS",
]

#: ``--input-format``: qualgate's own records, then the tools whose logs
#: :mod:`qualgate.records.importers` reads (one module each).
INPUT_FORMATS = ("qualgate", "lm-eval", "inspect", "nemo-evaluator", "lighteval")
#: ``policy``: the decision rule (:mod:`qualgate.verdict.fixed`).
POLICIES = ("noninferiority", "mcnemar")
#: ``weighting``: how suites combine into the pooled decision: counts summed, or suites
#: weighted equally.
WEIGHTINGS = ("pooled", "equal")
#: ``inconclusive``: the exit code of an INCONCLUSIVE verdict: its own (4), FAIL's or PASS's.
INCONCLUSIVE_AS = ("inconclusive", "fail", "pass")
#: ``missing``: which verdict decides when pairs are incomplete: with the gaps that may hide
#: a loss (either side) counted as lost, or with them dropped.
MISSING = ("worst-case", "drop")
#: ``on_missing``: keys present on one side only: refuse, or drop them (:mod:`qualgate.verdict.pairing`).
ON_MISSING = ("error", "drop")
#: ``on_prompt_mismatch``: pairs whose prompt hash or suite version differ: refuse, or report.
ON_PROMPT_MISMATCH = ("error", "report")
#: The reading options' defaults, recorded in a report decided from pairings read elsewhere.
READING_DEFAULTS = {"on_missing": "error", "max_errors": 0, "drop_truncated": False, "allow_unknown": False}
#: ``order`` of the sequential gate: the questions' seeded arrival order, or the records'.
ORDERS = ("seeded", "records")
#: ``multiplicity`` of the sequential gate across candidates (:mod:`qualgate.verdict.sequential`).
MULTIPLICITIES = ("bonferroni", "fixed-sequence")
#: ``engine_options.noise`` of the reference engine (:mod:`qualgate.engines._sampling`): noise
#: keyed by position per use, shared by every mode (coupled), drawn as vLLM 0.33's
#: ModelRunner V1 draws it from the request's generator (vllm-v1), or as vLLM 0.34's counter-based
#: kernels draw it (vllm-v2, :mod:`qualgate.engines._noise_v2`) (docs/engine.md, "Randomness").
NOISE_MODES = ("independent", "coupled", "vllm-v1", "vllm-v2")
