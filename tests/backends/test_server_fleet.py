"""``engine: vllm-server`` over several replicas of one deployment: least-loaded dispatch,
identity checked on each, and a replica killed mid-run (``conftest.FakeVLLMServer.kill``:
it stops listening and resets its open connections, as a killed process does).
"""

from __future__ import annotations

import json

import pytest
from backends.test_vllm_server import FLY, server_config, some_requests
from click.testing import CliRunner

from qualgate.backends import open_backend
from qualgate.cli import cli

TIMING = {"run_id", "latency_s"}  # the only fields that differ between two runs


def run(plan, out):
    return CliRunner().invoke(cli, ["run", str(plan), "--out", str(out), "-q"])


def records(out, name):
    lines = (out / "records" / f"{name}.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(x).items() if k not in TIMING} for x in lines]


@pytest.mark.slow
def test_a_replica_killed_mid_run_loses_and_duplicates_no_record(fake_server, server_plan, tmp_path):
    one = {"target": fake_server(), "fly": fake_server(speculative=FLY)}
    (tmp_path / "one").mkdir()
    plan = server_plan(
        tmp_path / "one",
        {"target": {"urls": [one["target"].url]}, "fly": {"urls": [one["fly"].url], "speculative": FLY}},
    )
    assert run(plan, tmp_path / "one" / "out").exit_code == 4  # too few pairs to decide

    # three replicas per config; one of each dies after a few answers, with requests in flight
    fleets = {
        "target": [fake_server(delay_s=0.02, die_after=3), fake_server(delay_s=0.02), fake_server(delay_s=0.02)],
        "fly": [
            fake_server(speculative=FLY, delay_s=0.02),
            fake_server(speculative=FLY, delay_s=0.02, die_after=4),
            fake_server(speculative=FLY, delay_s=0.02),
        ],
    }
    (tmp_path / "many").mkdir()
    plan = server_plan(
        tmp_path / "many",
        {
            "target": {"urls": [s.url for s in fleets["target"]]},
            "fly": {"urls": [s.url for s in fleets["fly"]], "speculative": FLY},
        },
    )
    out = tmp_path / "many" / "out"
    r = run(plan, out)
    assert r.exit_code == 4, r.output
    manifest = json.loads((out / "manifest.json").read_text())
    for name, fleet in fleets.items():
        dead = next(s for s in fleet if s.die_after is not None)
        assert dead.dead and dead.die_after <= len(dead.bodies) < 18  # it died mid-run
        # every request answered (one answer may be lost in the reset and asked again)
        assert sum(len(s.bodies) for s in fleet) >= 18
        info = manifest["configs"][name]["info"]
        assert info["replicas"][dead.url]["state"] == "down"
        assert info["requests"]["retried_connection"] >= 1
        assert info["requests"]["failed"] == 0
        assert records(out, name) == records(tmp_path / "one" / "out", name)


def test_replicas_that_run_different_versions_exit_3(fake_server, server_plan, tmp_path):
    a, b = fake_server(), fake_server(version="0.34.0")
    plan = server_plan(tmp_path, {"target": {"urls": [a.url, b.url]}, "fly": {"urls": [a.url], "speculative": FLY}})
    r = run(plan, tmp_path / "out")
    assert r.exit_code == 3
    assert "the replicas run different versions" in r.stderr and "0.34.0" in r.stderr


def test_a_replica_on_another_model_exits_3(fake_server, server_plan, tmp_path):
    a, b = fake_server(), fake_server(model="Qwen/Qwen3-32B")
    plan = server_plan(tmp_path, {"target": {"urls": [a.url, b.url]}, "fly": {"urls": [a.url], "speculative": FLY}})
    r = run(plan, tmp_path / "out")
    assert r.exit_code == 3 and f"the server at {b.url} serves" in r.stderr


def test_an_unreachable_replica_is_left_out_and_taken_back_once_it_answers(fake_server):
    a, b = fake_server(), fake_server()
    port = int(b.url.rsplit(":", 1)[1])
    b.kill()
    with open_backend(server_config([a.url, b.url], recheck_s=0.0)) as backend:
        assert backend.info()["replicas"][b.url]["state"] == "down"
        assert all(g.error is None for g in backend.generate(some_requests(4)))
        assert len(a.bodies) == 4
        back = fake_server(port=port)  # the replica restarts on its address
        assert all(g.error is None for g in backend.generate(some_requests(8)))
        assert backend.info()["replicas"][b.url]["state"] == "up" and back.bodies
        assert any("back in the rotation" in c for c in backend.info()["checks"])


def test_a_replica_that_answers_for_another_model_is_taken_out_for_good(fake_server):
    def other_model(h, server, body):
        resp = server.completion(body)
        resp["model"] = "Qwen/Qwen3-32B"
        data = json.dumps(resp).encode()
        h.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(data), data))
        return True

    good, bad = fake_server(), fake_server(hostile={"completion": other_model})
    with open_backend(server_config([bad.url, good.url], concurrency=1)) as backend:
        gens = backend.generate(some_requests(6))
        info = backend.info()
    assert [g.text for g in gens] == [f"#### {i + 1}" for i in range(6)]
    assert info["replicas"][bad.url]["state"] == "excluded"
    assert "answered for model 'Qwen/Qwen3-32B'" in info["replicas"][bad.url]["last_error"]
    assert info["requests"]["retried_identity"] == 1 and len(good.bodies) == 6


def test_metrics_counters_that_go_back_count_from_zero():
    """A replica that restarted mid-config: its counters start again at zero."""
    from qualgate.backends._replicas import accumulate

    def counters(d, t, a, pos):
        return {"num_drafts": d, "num_draft_tokens": t, "num_accepted_tokens": a, "num_accepted_tokens_per_pos": pos}

    before, later = counters(10, 80, 30, [20, 10]), counters(15, 120, 40, [26, 14])
    grown = accumulate(None, before, later)
    assert grown == counters(5, 40, 10, [6, 4])
    restarted = counters(2, 16, 3, [2, 1])
    assert accumulate(grown, later, restarted) == counters(7, 56, 13, [8, 5])
