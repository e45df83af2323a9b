"""The doubles against real vLLM (its CPU build, 0.32): where both can answer, they answer alike.

The HTTP double (``conftest.FakeVLLMServer``) and the ``vllm.LLM`` double
(``conftest.RecordingLLM``) stay where the real engine cannot run here: 0.33's FLy, GPU-only
options, faults on demand (429 bursts, a server killed mid-request). These tests put the same
requests to a double and to real vLLM and require the same answers wherever both apply:
every field the double sends is in vLLM's reply with the same JSON type, every metric it serves
vLLM serves under the same name and labels, qualgate's client reads both into the same fields
and refuses the same over-long request, and the ``vllm.LLM`` double takes only arguments, and
answers only with attributes, that vLLM's own classes have.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
import urllib.request

import pytest

from qualgate.backends import Request, open_backend
from qualgate.config.decoding import parse_config
from qualgate.suites import load_suite

from vllm_server import TARGET, needs_vllm

pytestmark = [needs_vllm, pytest.mark.slow, pytest.mark.vllm]


def _shape(value, path="") -> dict[str, str]:
    """``path -> JSON type`` of every leaf and container of a parsed JSON value (a list: its
    first item, ``[]``)."""
    kind = {dict: "object", list: "array", str: "string", bool: "bool", int: "number", float: "number"}
    out = {path or "$": "null" if value is None else kind[type(value)]}
    if isinstance(value, dict):
        for k, v in value.items():
            out.update(_shape(v, f"{path}.{k}"))
    elif isinstance(value, list) and value:
        out.update(_shape(value[0], f"{path}[]"))
    return out


def _missing(double: dict[str, str], real: dict[str, str]) -> list[str]:
    """The double's paths vLLM lacks or types differently (a null in either matches any type:
    an optional field that this reply left empty)."""
    return [
        f"{p}: double {t}, vLLM {real.get(p, 'absent')}"
        for p, t in double.items()
        if p not in real or (t != real[p] and "null" not in (t, real[p]))
    ]


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def _post(url: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.fixture
def double(fake_server):
    """The HTTP double serving the demo target, as the real server does."""
    return fake_server(model=str(TARGET), version="0.32.0")


def _questions(n: int):
    return load_suite("demo_arithmetic").questions[:n]


def _chat(question, **extra) -> dict:
    return {
        "model": str(TARGET),
        "messages": list(question.prompt),
        "seed": 7,
        "temperature": 1.0,
        "max_completion_tokens": 48,
        **extra,
    }


def test_every_field_the_server_double_sends_is_in_vllms_reply_with_the_same_type(vllm_target_server, double):
    (question,) = _questions(1)
    for route in ("/v1/models", "/version"):
        real, fake = _get(vllm_target_server.url + route), _get(double.url + route)
        assert not _missing(_shape(fake), _shape(real)), (route, _missing(_shape(fake), _shape(real)))
    (rs, real), (fs, fake) = (
        _post(s.url + "/v1/chat/completions", _chat(question)) for s in (vllm_target_server, double)
    )
    assert rs == fs == 200
    assert not _missing(_shape(fake), _shape(real)), _missing(_shape(fake), _shape(real))
    # the identity fields qualgate binds a config to hold the same values on both
    models = [_get(s.url + "/v1/models")["data"][0] for s in (vllm_target_server, double)]
    assert [(m["id"], m["root"]) for m in models] == [(str(TARGET), str(TARGET))] * 2


def test_a_request_over_the_context_length_is_refused_by_both_with_the_same_400(vllm_target_server, double):
    over = _chat(_questions(1)[0], max_completion_tokens=10**6)
    (rs, real), (fs, fake) = (_post(s.url + "/v1/chat/completions", over) for s in (vllm_target_server, double))
    assert rs == fs == 400, (real, fake)
    assert not _missing(_shape(fake), _shape(real)), (real, fake)
    # the same words, the numbers aside (the double serves a model of another max_model_len)
    words = [re.sub(r"\d+", "N", r["error"]["message"]) for r in (real, fake)]
    assert words[0] == words[1] and "cannot be greater than max_model_len" in words[0], words


def _families(text: str) -> dict[str, frozenset[str]]:
    """Prometheus sample name -> its label names."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(vllm:[a-z_:]+)\{([^}]*)\}", line)
        if m:
            out[m.group(1)] = frozenset(re.findall(r'(\w+)="', m.group(2)))
    return out


def test_each_metric_the_server_double_serves_vllm_serves_with_the_same_labels(vllm_target_server, double):
    real, fake = _families(vllm_target_server.get("/metrics")), _families(double.prometheus())
    assert fake and {n: real.get(n) for n in fake} == fake


def test_qualgate_reads_the_double_and_vllm_into_the_same_fields(vllm_target_server, double):
    questions = _questions(4)
    got = {}
    for name, server in (("vllm", vllm_target_server), ("double", double)):
        config = parse_config(
            {
                "name": name,
                "engine": "vllm-server",
                "model": str(TARGET),
                "sampling": {"temperature": 1.0, "max_tokens": 48},
                "engine_options": {"base_urls": [server.url]},
            },
            path=f"<{name}>",
        )
        backend = open_backend(config)
        try:
            gens = backend.generate(
                [
                    Request(q.prompt, {"temperature": 1.0, "max_tokens": 48, "seed": 11 + i})
                    for i, q in enumerate(questions[:3])
                ]
                + [Request(questions[3].prompt, {"temperature": 1.0, "max_tokens": 10**6, "seed": 1})]
            )
        finally:
            backend.close()
        got[name] = [
            {k: type(v).__name__ for k, v in dataclasses.asdict(g).items() if k not in ("latency_s",)} for g in gens
        ]
        assert gens[-1].error and "cannot be greater than max_model_len" in gens[-1].error, gens[-1]
    assert got["double"] == got["vllm"]


def test_the_llm_double_takes_and_answers_only_what_vllms_classes_have(fake_llm):
    from vllm.entrypoints.llm import LLM
    from vllm.outputs import CompletionOutput, RequestOutput
    from vllm.v1.metrics import reader

    assert set(inspect.signature(fake_llm.chat).parameters) <= set(inspect.signature(LLM.chat).parameters)
    assert hasattr(LLM, "get_metrics")
    # what the double's chat answers: RequestOutput(outputs=[CompletionOutput(...)], metrics)
    llm = fake_llm(model=str(TARGET))
    params = type("P", (), {"seed": 3})()
    (out,) = llm.chat([list(_questions(1)[0].prompt)], [params])
    assert set(vars(out)) <= set(inspect.signature(RequestOutput.__init__).parameters)
    assert set(vars(out.outputs[0])) <= {f.name for f in dataclasses.fields(CompletionOutput)}
    kinds = {"value": {reader.Gauge, reader.Counter}, "values": {reader.Vector}}
    for metric in llm.get_metrics():
        fields = set(vars(metric))
        assert any(fields == {f.name for f in dataclasses.fields(k)} for kind in kinds.values() for k in kind), fields
