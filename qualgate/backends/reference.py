"""``engine: reference``: the PyTorch reference engine behind the backend interface.

Config mapping: ``model`` is the target and ``speculative.model`` the drafter (hub ids, or
paths, relative paths being read from the config file's folder); ``engine_options``:
``device`` (default CUDA when available; on CUDA, ``qualgate run`` opens the engine in a
worker process, one per GPU when ``device`` is unset or ``cuda``:
:mod:`qualgate.backends._devices`), ``dtype`` (``float32``, ``bfloat16``, ``float16``),
``max_num_seqs`` (requests decoded together), ``batch_size`` (requests per
harness batch, default ``max_num_seqs`` or 256), ``tokenizer`` (default: the target's) and
``noise`` (how the engine draws its random numbers: ``independent``, the default,
``coupled``, ``vllm-v1`` or ``vllm-v2``, see docs/engine.md; ``coupled: true`` is the same as
``noise: coupled``), ``cuda_graphs``
(default true: decoding steps replayed as CUDA graphs) and ``compile`` (default false:
``torch.compile`` of the whole decoding step, see docs/engine.md). The three
switches must be YAML booleans: a string such as ``"false"`` is refused, not read as true.

A request whose sampling the engine refuses (a field it does not implement) is an error
before decoding, the others staying one batch. A batch that the engine refuses
(``ValueError``: a prompt too long for the model, a token outside the vocabulary) is retried
request by request, so that only the offending requests come back as errors.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from qualgate.config.options import NOISE_MODES
from qualgate.vllm033.speculative import FLY_LOSSY_WARNING

from . import Backend, Generation, Request, package_versions, resolve_model_path

__all__ = ["ReferenceBackend"]

_DTYPES = ("float32", "bfloat16", "float16")
#: decimals kept of each token's top-2 margin in the records (float32 has about 7 digits)
MARGIN_DIGITS = 6
#: engine_options that switch something on or off, with their defaults
_SWITCHES = {"coupled": False, "cuda_graphs": True, "compile": False}


def _switches(opts) -> dict[str, bool]:
    out = {}
    for key, default in _SWITCHES.items():
        value = opts.get(key, default)
        if not isinstance(value, bool):
            raise ValueError(f"engine_options.{key} must be true or false, got {value!r}")
        out[key] = value
    return out


def _noise(opts, coupled: bool) -> str:
    noise = opts.get("noise")
    if noise is None:
        return "coupled" if coupled else "independent"
    if noise not in NOISE_MODES:
        raise ValueError(f"engine_options.noise must be one of {list(NOISE_MODES)}, got {noise!r}")
    if coupled and noise != "coupled":
        raise ValueError(f"engine_options.coupled: true contradicts engine_options.noise: {noise!r}")
    return noise


@contextlib.contextmanager
def _quiet_loading():
    """Hide transformers' weight-loading progress bars (they are not the harness's)."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # pragma: no cover
        yield
        return
    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()


class ReferenceBackend(Backend):
    """:class:`qualgate.engines.reference.ReferenceEngine` for one decoding config."""

    engine = "reference"
    # One call at a time (in_flight 1): decoding in a helper thread while the harness grades
    # slowed the engine's own host loop more than it saved (one H200, 96,000 requests: loop
    # 75.8 s overlapped, 67.1 s serial; benchmarks/results/bench_devices-h200x2.txt). On CUDA,
    # qualgate run opens it in worker processes instead, which keep calls in flight (_devices).

    def __init__(self, config):
        super().__init__(config)
        import torch

        from ..engines.reference import ReferenceEngine

        opts = config.engine_options
        device = opts.get("device")
        if isinstance(device, str) and device.startswith("cuda") and not torch.cuda.is_available():
            from ..errors import DataError

            raise DataError(
                f"the config asks for device {device!r}, and this machine has no CUDA device torch can use "
                "(torch.cuda.is_available() is False): set engine_options.device to cpu, or run it on a GPU",
                file=config.path,
                field="engine_options.device",
                value=device,
            )
        switches = _switches(opts)
        self._noise = _noise(opts, switches["coupled"])
        dtype = opts.get("dtype")
        if dtype is not None and dtype not in _DTYPES:
            raise ValueError(f"engine_options.dtype must be one of {list(_DTYPES)}, got {dtype!r}")
        self._target = resolve_model_path(config.model, config.path)
        spec = dict(config.speculative) if config.speculative else None
        self._drafter = None
        if spec is not None:
            self._drafter = resolve_model_path(spec["model"], config.path)
            spec["model"] = self._drafter
        self._speculative = spec
        tokenizer = opts.get("tokenizer")
        if tokenizer is not None:
            tokenizer = resolve_model_path(tokenizer, config.path)
        kwargs = {}
        if opts.get("max_num_seqs") is not None:
            kwargs["max_num_seqs"] = int(opts["max_num_seqs"])
        with _quiet_loading():
            self.engine_ = ReferenceEngine(
                self._target,
                drafter=self._drafter,
                device=opts.get("device"),
                tokenizer=tokenizer,
                dtype=getattr(torch, dtype) if dtype else None,
                cuda_graphs=switches["cuda_graphs"],
                compile=switches["compile"],
                **kwargs,
            )
        if self.engine_.tokenizer is None:
            raise ValueError(f"the target {config.model!r} has no tokenizer; set engine_options.tokenizer")

    @property
    def batch_size(self) -> int:
        opts = self.config.engine_options
        return int(opts.get("batch_size") or opts.get("max_num_seqs") or 256)

    def _run(self, requests: Sequence[Request]) -> list[Generation]:
        out = self.engine_.generate(
            [list(r.messages) for r in requests],
            sampling=[dict(r.sampling) for r in requests],
            speculative=self._speculative,
            noise=self._noise,
        )
        spec = self._speculative is not None
        gens = []
        for o in out:
            m = o.metrics
            gens.append(
                Generation(
                    text=o.text,
                    output_tokens=len(o.token_ids),
                    finish_reason=o.finish_reason,
                    spec_steps=m.num_drafts if spec else None,
                    draft_tokens=m.num_draft_tokens if spec else None,
                    accepted_tokens=m.num_accepted_tokens if spec else None,
                    deferred_tokens=m.num_deferred_tokens if spec else None,
                    latency_s=m.wall_time_s,
                    token_ids=list(o.token_ids),
                    top2_margins=[round(x, MARGIN_DIGITS) for x in o.top2_margins],
                )
            )
        return gens

    def generate(self, requests: Sequence[Request]) -> list[Generation]:
        from qualgate.engines.reference import resolve_sampling

        # a request whose sampling the engine refuses (a traffic request's own field that the
        # reference engine does not implement) is an error up front: the rest stay one batch,
        # not a batch decoded again request by request
        refused: dict[int, Generation] = {}
        for i, r in enumerate(requests):
            try:
                resolve_sampling(dict(r.sampling))
            except ValueError as exc:
                refused[i] = Generation.failed(exc)
        decoded = iter(self._decode([r for i, r in enumerate(requests) if i not in refused]))
        return [refused[i] if i in refused else next(decoded) for i in range(len(requests))]

    def _decode(self, requests: Sequence[Request]) -> list[Generation]:
        if not requests:
            return []
        try:
            return self._run(requests)
        except ValueError as exc:
            if len(requests) == 1:
                return [Generation.failed(exc)]
        out = []
        for r in requests:
            try:
                out += self._run([r])
            except ValueError as exc:
                out.append(Generation.failed(exc))
        return out

    def info(self) -> dict[str, Any]:
        import torch

        dev = self.engine_.device
        from qualgate import __version__

        return {
            "engine": self.engine,
            # what every record names (issue 45): qualgate's own engine, at qualgate's version
            "identity": {"engine": "reference", "version": __version__},
            "versions": package_versions("torch", "transformers"),
            "device": str(dev),
            "gpu": torch.cuda.get_device_name(dev) if dev.type == "cuda" else None,
            "dtype": str(next(self.engine_.target.parameters()).dtype).removeprefix("torch."),
            "target": self._target,
            "drafter": self._drafter,
            "max_num_seqs": self.engine_.max_num_seqs,
            "coupled": bool(self._speculative) and self._noise == "coupled",
            "noise": self._noise,
            "cuda_graphs": self.engine_.cuda_graphs,
            "compile": self.engine_.compile,
            "threads": torch.get_num_threads(),
            "engine_timing": self.engine_.timing(),  # (so far: the manifest takes it again at the close)
            # the engine logs this once per process, as vLLM does; every lossy config gets it here
            "warnings": [FLY_LOSSY_WARNING] if self.config.mode == "fly" else [],
        }

    def close(self) -> None:
        import gc

        import torch

        if getattr(self, "engine_", None) is None:
            return
        cuda = self.engine_.device.type == "cuda"
        self.engine_ = None
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()
