"""`qualgate admission`: token-budget arithmetic and running-request plateaus from Prometheus."""

import http.server
import json
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from qualgate.ci import admission, parse_exposition, read_metrics, running_plateau
from qualgate.cli import cli
from qualgate.errors import DataError

DATA = Path(__file__).parent / "data"
KEY = (("engine", "0"), ("model_name", "Qwen/Qwen3-8B"))


def run(*args):
    return CliRunner().invoke(cli, ["admission", *map(str, args)])


# ------------------------------------------------------------------ arithmetic


def test_the_token_budget_binds_512_128_6():
    r = admission(512, 128, 6)
    assert (r.admitted, r.binding) == (85, ("token_budget",))


def test_max_num_seqs_binds_when_the_budget_is_large():
    assert admission(8192, 128, 6).binding == ("max_num_seqs",)


def test_the_lookahead_cap_binds_for_a_long_lookahead():
    r = admission(512, 128, 6, lookahead=16)
    assert (r.admitted, r.binding) == (32, ("lookahead_cap",))


def test_tied_bounds_are_all_reported():
    assert admission(512, 64, 8, lookahead=8).binding == ("max_num_seqs", "token_budget", "lookahead_cap")


@given(st.integers(1, 10**6), st.integers(1, 4096), st.integers(1, 64), st.none() | st.integers(1, 64))
@pytest.mark.slow
def test_admitted_is_the_largest_count_within_every_bound(budget, seqs, charge, lookahead):
    r = admission(budget, seqs, charge, lookahead=lookahead)
    n = r.admitted
    assert n <= seqs and n * charge <= budget and (lookahead is None or n * lookahead <= budget)
    assert n + 1 > seqs or (n + 1) * charge > budget or (lookahead is not None and (n + 1) * lookahead > budget)


@pytest.mark.parametrize(
    "kwargs", [dict(budget=0, max_num_seqs=1, charge=1), dict(budget=1, max_num_seqs=1, charge=1.5)]
)
def test_invalid_arguments_name_the_parameter(kwargs):
    with pytest.raises(ValueError, match="must be a positive integer"):
        admission(**kwargs)


def test_cli_prints_the_minimum_and_the_binding_bound():
    r = run("--budget", 512, "--max-seqs", 128, "--charge", 6)
    assert r.exit_code == 0
    assert r.stdout == (
        "admitted running requests: 85 = min(max_num_seqs 128, 512 // 6 = 85)\n"
        "binding: the token budget (budget // charge)\n"
    )


def test_cli_with_lookahead_prints_the_cap_and_the_end_of_vllms_override_line():
    r = run("--budget", 512, "--max-seqs", 128, "--charge", 8, "--lookahead", 8)
    assert r.stdout.splitlines() == [
        "admitted running requests: 64 = min(max_num_seqs 128, 512 // 8 = 64, 512 // 8 = 64)",
        "binding: the token budget (budget // charge) and the lookahead cap (budget // lookahead)",
        "vLLM logs (WARNING, vllm.config.vllm): ... Overriding max_num_active_seqs from 128 to 64.",
    ]


# charge and lookahead per method, from vllm/config/speculative.py:2057-2098 (drafting slots),
# vllm/v1/core/sched/scheduler.py:844-848, 1002-1003 (1 + K + slots) and
# vllm/config/vllm.py:625-652 (num_lookahead_tokens)
@pytest.mark.parametrize(
    "method, k, opts, charge, lookahead",
    [
        ("draft_model", 8, {}, 10, 8),
        ("draft_model", 8, {"parallel_drafting": True}, 17, 8),  # PARD: 2K + 1
        ("eagle3", 4, {"parallel_drafting": True}, 8, 4),  # P-EAGLE: 2K
        ("eagle3", 3, {}, 4, 3),
        ("mtp", 1, {}, 2, 1),
        ("dflash", 7, {}, 8, 8),
        ("dspark", 5, {}, 6, 5),
        ("dspark", 5, {"fill_in": True}, 6, 6),
        ("ngram", 3, {}, 4, 0),
    ],
)
def test_charge_and_lookahead_follow_vllms_table(method, k, opts, charge, lookahead):
    from qualgate.ci import method_charge

    assert method_charge(method, k, **opts) == (charge, lookahead)


def test_the_dspark_k5_case_logs_an_override_although_the_token_budget_binds():
    # the article's case: budget 512, max_num_seqs 128, DSpark K = 5: 512 // 5 = 102 < 128
    r = run("--budget", 512, "--max-seqs", 128, "--method", "dspark", "--k", 5)
    assert r.exit_code == 0
    assert r.stdout.splitlines() == [
        "dspark, K = 5: charge 6 tokens per decode request, lookahead 5",
        "admitted running requests: 85 = min(max_num_seqs 128, 512 // 6 = 85, 512 // 5 = 102)",
        "binding: the token budget (budget // charge)",
        "vLLM logs (WARNING, vllm.config.vllm): The dspark draft pass needs 5 query tokens per "
        "request within max_num_batched_tokens=512. Overriding max_num_active_seqs from 128 "
        "to 102.",
    ]


def test_no_override_line_when_the_lookahead_cap_is_not_below_max_num_seqs():
    r = run("--budget", 8192, "--max-seqs", 128, "--method", "dflash", "--k", 7)
    assert "Overriding" not in r.stdout


def test_draft_model_is_charged_k_plus_2_and_never_logs_an_override():
    r = run("--budget", 512, "--max-seqs", 128, "--method", "draft_model", "--k", 8)
    assert "512 // 10 = 51" in r.stdout and "Overriding" not in r.stdout


def test_a_budget_vllm_refuses_is_a_usage_error_with_vllms_message():
    r = run("--budget", 8, "--max-seqs", 128, "--method", "dflash", "--k", 7)
    assert r.exit_code == 2 and "does not have enough slots" in r.output


def test_cli_json_has_every_bound():
    out = json.loads(run("--budget", 512, "--max-seqs", 128, "--charge", 6, "--format", "json").stdout)
    assert out["admission"]["bounds"] == {"max_num_seqs": 128, "token_budget": 85}


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--budget", 512, "--max-seqs", 128],
        ["--budget", 512, "--charge", 6],
        ["--budget", 0, "--max-seqs", 128, "--charge", 6],
        ["--metrics", DATA / "metrics-capped.prom"],
    ],
)
def test_incomplete_or_invalid_arguments_exit_2(args):
    assert run(*args).exit_code == 2


# ------------------------------------------------------------------ metrics


def test_concatenated_scrapes_with_timestamps_are_split_in_time_order():
    scrapes = parse_exposition((DATA / "metrics-capped.prom").read_text())
    assert len(scrapes) == 12
    assert [s.running[KEY] for s in scrapes][:3] == [20.0, 60.0, 85.0]
    assert scrapes[1].time - scrapes[0].time == pytest.approx(15.0)


def test_scrapes_without_timestamps_split_where_a_series_repeats():
    scrapes = parse_exposition((DATA / "metrics-saturated.prom").read_text())
    assert len(scrapes) == 5 and len(scrapes[0].running) == 2


def test_running_requests_capped_below_max_num_seqs_under_load():
    rep = running_plateau(read_metrics(str(DATA / "metrics-capped.prom")), 128)
    (s,) = rep.series
    assert (s.loaded, s.plateau, s.plateau_count, s.capped) == (8, 85.0, 7, True)


def test_running_requests_reaching_max_num_seqs_are_not_capped():
    rep = running_plateau(read_metrics(str(DATA / "metrics-saturated.prom")), 128)
    engine0, engine1 = rep.series
    assert (engine0.plateau, engine0.capped) == (128.0, False)
    assert (engine1.loaded, engine1.capped) == (0, False)
    assert not rep.capped


def test_cli_compares_the_plateau_with_the_predicted_admission():
    r = run("--budget", 512, "--max-seqs", 128, "--charge", 6, "--metrics", DATA / "metrics-capped.prom")
    assert r.exit_code == 0
    assert "running plateaus at 85 (7 loaded scrape(s)): capped" in r.stdout
    assert "the plateau 85 matches the predicted 85" in r.stdout


def test_an_invalid_exposition_line_exits_3_naming_the_line():
    r = run("--metrics", DATA / "metrics-broken.prom", "--max-num-seqs", 128)
    assert r.exit_code == 3 and "metrics-broken.prom:3" in r.stderr


def test_a_file_without_running_samples_is_a_data_error(tmp_path):
    p = tmp_path / "m.prom"
    p.write_text('vllm:num_requests_waiting{engine="0"} 3\n')
    with pytest.raises(DataError, match="no vllm:num_requests_running samples"):
        running_plateau(read_metrics(str(p)), 128)


class _Scrapes(http.server.BaseHTTPRequestHandler):
    bodies: list[str] = []
    served = 0

    def do_GET(self):
        body = self.bodies[min(type(self).served, len(self.bodies) - 1)].encode()
        type(self).served += 1
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def metrics_server():
    def body(running, waiting):
        return (
            "# TYPE vllm:num_requests_running gauge\n"
            f'vllm:num_requests_running{{engine="0",model_name="m"}} {running}\n'
            "# TYPE vllm:num_requests_waiting gauge\n"
            f'vllm:num_requests_waiting{{engine="0",model_name="m"}} {waiting}\n'
        )

    _Scrapes.bodies = [body(10, 0), body(64, 20), body(64, 31), body(63, 9)]
    _Scrapes.served = 0
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Scrapes)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    server.shutdown()
    server.server_close()


def test_a_metrics_url_is_polled_and_judged(metrics_server):
    r = run("--metrics", metrics_server, "--max-num-seqs", 128, "--samples", 4, "--interval", 0, "--format", "json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)["metrics"]
    assert out["scrapes"] == 4 and _Scrapes.served == 4
    (s,) = out["series"]
    assert (s["loaded"], s["plateau"], s["plateau_count"], s["capped"]) == (3, 64.0, 2, True)


def test_an_unreachable_url_exits_3():
    # a port nothing listens on: bind one, close it, then ask it
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    r = run("--metrics", f"http://127.0.0.1:{port}/metrics", "--max-num-seqs", 8, "--samples", 1)
    assert r.exit_code == 3 and "cannot fetch metrics" in r.stderr
