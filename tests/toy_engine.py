"""A test engine that needs no torch: ``engine: toy``, a :class:`qualgate.backends.Backend`
that answers the arithmetic of the run tests' suite right or wrong by a seeded rule.

The harness tests (runner, manifest, resume, lock, retry, shards, sweep, traffic, report) test
what the harness does with an engine's answers, not the answers themselves; this engine gives
them answers in milliseconds. The tests of the reference engine itself keep
``engine: reference`` and the tiny torch models (``tests/support.py``).

What it does with one request, deterministically from (prompt, ``sampling.seed``, config):

- the question is the last arithmetic expression of the last user message (the suite's
  ``What is 17 + 3 * 14 - 9?``, or a traffic request's ``1 + 2 =``), solved exactly by
  :func:`qualgate.demo.task.solve`; a message without one is answered without a number;
- the output is a few whitespace-separated words, each one token, ending in ``The answer is
  N.``: the right N, or a wrong one, by the draws of :data:`RULES`;
- ``max_tokens`` cuts the output (``finish_reason: length``).

The rules are those of the reference engine where the harness relies on them; each row of
:data:`RULES` and each refusal names the part of the reference engine it mirrors.

Registered by ``tests/conftest.py`` as ``register_backend("toy", "toy_engine:ToyBackend")``;
a ``qualgate`` subprocess started by a test registers it with :func:`register` (``tests/`` on
its ``PYTHONPATH``). ``QUALGATE_TOY_DELAY_S`` (environment) makes every ``generate`` call take
that many seconds more, so that a test can kill a run midway; it changes no output.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from qualgate.backends import Backend, Generation, Request, package_versions, register_backend
from qualgate.demo.task import solve
from qualgate.vllm033.speculative import FLY_LOSSY_WARNING, resolve_speculative

__all__ = ["RULES", "SAMPLING_KEYS", "ToyBackend", "prompt_length", "register"]

#: the rules of the toy, with where each mirrors the reference engine
RULES = {
    # chance that a sampled answer is right; target-only and standard speculative decoding
    # alike, since verification keeps the target's distribution (engines/_verify.py, the
    # standard rejection rule; docs/engine.md "randomness")
    "p_correct": 0.75,
    # FLy's extra chance of a wrong answer: FLy keeps a mismatching draft token when the target's
    # top-k entropy exceeds the threshold tau (engines/_verify.py, FlyRule), so tau = 0 keeps
    # every mismatch and is the most lossy; a wider window W defers fewer tokens. Loss here:
    # fly_loss * exp(-tau / fly_tau_scale) / W (a stand-in for the size, not a model of it),
    # chosen so that the demo's aggressive FLy (tau 0, W 2) loses about ten points, as it does
    # with the demo's models on the reference engine (tests/run/test_sequential_run.py)
    "fly_loss": 0.27,
    "fly_tau_scale": 0.1,
    # below this temperature decoding is greedy and ignores the seed (engines/_sampling.py,
    # SAMPLING_EPS, as vLLM)
    "greedy_below": 1e-5,
    # positions of the toy "model": prompt length + max_tokens beyond it is refused for that
    # request (engines/reference.py: max_position_embeddings; the run tests' models have 256)
    "max_positions": 256,
}

#: the sampling fields the reference engine accepts (engines/_sampling.py, SAMPLING_KEYS;
#: tests/backends/test_toy_engine.py checks the two lists are equal where torch is installed)
SAMPLING_KEYS = ("temperature", "top_p", "top_k", "max_tokens", "seed", "stop", "stop_token_ids", "ignore_eos", "n")
#: engine_options the toy reads (the reference engine's names, same meaning)
_SWITCHES = {"coupled": False}
#: filler words before the answer: the demo task's step openers (qualgate.demo.task.OPENERS)
_WORDS = ("First,", "Then", "Next,", "So")
_EXPRESSION = re.compile(r"\d+(?:\s*[-+*]\s*\d+)+")


def register() -> None:
    """Register ``engine: toy`` (in a process other than the test's own)."""
    register_backend("toy", "toy_engine:ToyBackend")


def prompt_length(messages: Sequence[Mapping[str, str]]) -> int:
    """The toy's prompt length in tokens: one per character of ``<role>content`` per message,
    plus the generation prompt ``<assistant>`` (a character tokenizer, as the demo's)."""
    return sum(len(f"<{m['role']}>{m['content']}") for m in messages) + len("<assistant>")


def _draw(*parts) -> float:
    """A uniform number in [0, 1) from a hash of ``parts`` (the same on every machine)."""
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _check_sampling(sampling: Mapping[str, Any]) -> tuple[int, float]:
    """``(max_tokens, temperature)``, refusing what engines/_sampling.py resolve_sampling refuses
    with its messages (the fields, max_tokens, n, temperature)."""
    unknown = sorted(set(sampling) - set(SAMPLING_KEYS))
    if unknown:
        raise ValueError(f"unknown sampling field(s) {unknown}; valid fields: {list(SAMPLING_KEYS)}")
    max_tokens = sampling.get("max_tokens")
    if max_tokens is None:
        raise ValueError(
            "sampling needs 'max_tokens' (vLLM's default of 16 silently truncates answers; set it explicitly)"
        )
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"sampling max_tokens must be >= 1, got {max_tokens!r}")
    if sampling.get("n", 1) != 1:
        raise ValueError(f"sampling n must be 1 (one sample per prompt; repeat the prompt), got {sampling['n']!r}")
    temperature = float(sampling.get("temperature", 1.0))
    if temperature < 0:
        raise ValueError(f"sampling temperature must be >= 0, got {temperature!r}")
    return max_tokens, temperature


class ToyBackend(Backend):
    """``engine: toy`` for one decoding config (see the module docstring)."""

    engine = "toy"

    def __init__(self, config):
        super().__init__(config)
        opts = config.engine_options
        device = opts.get("device")
        if device not in (None, "cpu"):
            # the reference engine on a machine without that device: torch raises a
            # RuntimeError when the engine opens, before any request
            raise RuntimeError(f"the toy engine has only a CPU, not {device!r}")
        self.coupled = opts.get("coupled", _SWITCHES["coupled"])
        if not isinstance(self.coupled, bool):  # backends/reference.py, _switches
            raise ValueError(f"engine_options.coupled must be true or false, got {self.coupled!r}")
        spec = dict(config.speculative) if config.speculative else None
        self.speculative = None
        if spec is not None:
            # engines/reference.py, _resolve_speculative: vLLM's resolution, then the methods
            # the reference engine implements
            resolved = resolve_speculative(spec)
            if resolved["method"] != "draft_model":
                raise ValueError(
                    f"the reference engine supports speculative method 'draft_model' only, got {resolved['method']!r}"
                )
            if resolved["rejection_sample_method"] not in ("standard", "fly"):
                raise ValueError(
                    "the reference engine supports rejection_sample_method in ['standard', 'fly'], "
                    f"got {resolved['rejection_sample_method']!r}"
                )
            self.speculative = resolved
        self.fly = self.speculative is not None and self.speculative["rejection_sample_method"] == "fly"
        self.closed = False

    @property
    def batch_size(self) -> int:  # backends/reference.py: batch_size, else max_num_seqs, else 256
        opts = self.config.engine_options
        return int(opts.get("batch_size") or opts.get("max_num_seqs") or 256)

    def fly_loss(self) -> float:
        """FLy's extra chance of a wrong answer at this config's threshold and window (0 otherwise)."""
        if not self.fly:
            return 0.0
        tau, window = self.speculative["fly_entropy_threshold"], self.speculative["fly_window_size"]
        return RULES["fly_loss"] * 2.718281828459045 ** (-tau / RULES["fly_tau_scale"]) / window

    def _one(self, request: Request) -> Generation:
        start = time.perf_counter()
        sampling = dict(request.sampling)
        max_tokens, temperature = _check_sampling(sampling)
        messages = list(request.messages)
        length = prompt_length(messages)
        if length + max_tokens > RULES["max_positions"]:  # engines/reference.py, generate
            raise ValueError(
                f"prompts[0]: prompt length {length} + max_tokens {max_tokens} exceeds "
                f"the model's max_position_embeddings ({RULES['max_positions']})"
            )
        greedy = temperature < RULES["greedy_below"]
        seed = None if greedy else sampling.get("seed")
        if seed is None and not greedy:
            raise ValueError("the toy engine needs sampling.seed (the harness always sets it)")
        mode = "target" if self.speculative is None else ("fly" if self.fly else "standard")
        # the noise stream: a coupled (or greedy) speculative run shares the target's, so
        # standard decoding reproduces target-only decoding token for token; an independent
        # one draws its own (engines/_sampling.py, STREAM_TARGET and the other streams)
        stream = "target" if mode == "target" or self.coupled or greedy else mode
        last = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
        found = _EXPRESSION.findall(last)
        words = [_WORDS[int(_draw(seed, stream, last, "word", i) * len(_WORDS))] for i in range(2)]
        if found:
            gold = solve(f"What is {found[-1]}?")
            right = _draw(seed, stream, last, "answer") < RULES["p_correct"]
            if right and self.fly and _draw(seed, "fly", last, "defer") < self.fly_loss():
                right = False
            off = 1 + int(_draw(seed, stream, last, "offset") * 9)
            words += ["The", "answer", "is", f"{gold if right else gold + off}."]
        else:
            words += ["I", "cannot", "tell."]
        tokens = words[:max_tokens]
        spec = self._speculation(len(tokens), seed, stream, last) if self.speculative else {}
        return Generation(
            text=" ".join(tokens),
            output_tokens=len(tokens),
            finish_reason="length" if len(tokens) < len(words) else "stop",
            latency_s=time.perf_counter() - start,
            **spec,
        )

    def _speculation(self, n: int, seed, stream, last) -> dict[str, int]:
        """vLLM's counts for ``n`` emitted tokens: each drafting step proposes K tokens and
        emits the accepted ones and one more (engines/_results.py, RequestMetrics); FLy's
        deferred tokens are among the accepted ones, standard decoding defers none."""
        k = self.speculative["num_speculative_tokens"]
        steps = accepted = deferred = emitted = 0
        while emitted < n:
            a = min(int(_draw(seed, stream, last, "accept", steps) * (k + 1)), n - emitted - 1)
            if self.fly:
                deferred += int(_draw(seed, stream, last, "deferred", steps) * (a + 1))
            steps, accepted, emitted = steps + 1, accepted + a, emitted + a + 1
        return {
            "spec_steps": steps,
            "draft_tokens": k * steps,
            "accepted_tokens": accepted,
            "deferred_tokens": deferred,
        }

    def generate(self, requests: Sequence[Request]) -> list[Generation]:
        if self.closed:
            raise RuntimeError("the toy engine was closed")
        delay = float(os.environ.get("QUALGATE_TOY_DELAY_S") or 0)
        if delay:
            time.sleep(delay)
        out = []
        for r in requests:  # backends/reference.py: a refused request fails alone
            try:
                out.append(self._one(r))
            except ValueError as exc:
                out.append(Generation.failed(exc))
        return out

    def info(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "versions": package_versions(),
            "device": "cpu",
            "gpu": None,
            "target": self.config.model,
            "drafter": self.speculative["model"] if self.speculative else None,
            "coupled": bool(self.speculative) and self.coupled,
            "warnings": [FLY_LOSSY_WARNING] if self.fly else [],  # backends/reference.py, info
        }

    def close(self) -> None:
        self.closed = True
