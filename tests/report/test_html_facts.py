"""The HTML page's facts: every field checked against the gate report, manifest and records it
was rendered from (a run of the demo's suite generator on the toy engine, 120 questions)."""

from __future__ import annotations

import html
import json
import re

import pytest
from click.testing import CliRunner

from qualgate.cli import cli
from qualgate.formatting import fmt_pct, fmt_points
from qualgate.records import read_records


@pytest.fixture(scope="module")
def run(tmp_path_factory, plan_writer):
    root = tmp_path_factory.mktemp("facts")
    plan = plan_writer(root / "plan", questions=120, seeds=(0,))
    out, page = root / "out", root / "page.html"
    r = CliRunner().invoke(cli, ["run", str(plan), "--out", str(out), "--quiet", "--html", str(page)])
    assert r.exit_code in (0, 1, 4), r.output
    return {
        "out": out,
        "page": page.read_text(encoding="utf-8"),
        "gate": json.loads((out / "gate.json").read_text()),
        "manifest": json.loads((out / "manifest.json").read_text()),
    }


def _section(page: str, ident: str) -> str:
    return re.search(rf'<section id="{ident}">(.*?)</section>', page, re.S).group(1)


def _rows(fragment: str) -> list[list[str]]:
    body = re.search(r"<tbody>(.*?)</tbody>", fragment, re.S).group(1)
    return [
        [html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)]
        for tr in re.findall(r"<tr>(.*?)</tr>", body, re.S)
    ]


def _flips(page: str) -> list[list]:
    text = re.search(r'<script id="flips-data" type="application/json">(.*?)</script>', page, re.S).group(1)
    return json.loads(text.replace("<\\/", "</"))


@pytest.mark.slow
def test_subtitle_names_the_gates_policy_margin_alpha_and_verdict(run):
    gate, m = run["gate"], run["manifest"]
    sub = html.unescape(re.search(r'<p class="sub">(.*?)</p>', run["page"]).group(1))
    s = gate["settings"]
    assert f"baseline {m['plan']['baseline']}; {s['policy']}," in sub
    assert f"margin {fmt_points(s['margin'])} points, alpha {s['alpha']:g}; verdict {gate['verdict']}" in sub
    assert "?" not in sub


@pytest.mark.slow
def test_provenance_shows_the_manifests_run_id_start_and_end(run):
    m = run["manifest"]
    rows = dict((k, v) for k, v, *_ in _rows(_section(run["page"], "provenance")))
    assert rows["run id"] == m["run_id"] and rows["status"] == m["status"] == "complete"
    assert rows["started"] == m["started_at"]
    assert rows["finished"] == m["ended_at"] and m["ended_at"] not in (None, "None")
    for name, c in m["configs"].items():
        assert rows[f"config {name}"].startswith(f"{c['config_id']} ({c['mode']})")


@pytest.mark.slow
def test_headline_and_verdict_table_lead_with_the_answer_and_the_baselines_accuracy(run):
    gate, m, out = run["gate"], run["manifest"], run["out"]
    verdicts = _section(run["page"], "verdicts")
    headline = html.unescape(re.search(r'<p class="headline"><strong>(.*?)</strong>', verdicts).group(1))
    rank = {"FAIL": 0, "INCONCLUSIVE": 1, "PASS": 2}
    worst = min(gate["candidates"], key=lambda c: (rank[c["verdict"]], -c["loss_upper_bound"]))
    assert headline.startswith(f"Verdict {gate['verdict']}. Worst candidate: {worst['name']} ({worst['verdict']}")
    assert f"loss at most {fmt_points(worst['loss_upper_bound'])} points" in headline
    assert verdicts.index("headline") < verdicts.index("<table>")
    rows = _rows(verdicts)
    base = m["plan"]["baseline"]

    def accuracy(name):
        recs = [r for r in read_records(out / "records" / f"{name}.jsonl") if r.outcome != "error"]
        return fmt_pct(sum(r.outcome == "correct" for r in recs) / len(recs))

    assert rows[0][:4] == [base, "target", "baseline", accuracy(base)]
    by_name = {c["name"]: c for c in gate["candidates"]}
    assert [r[0] for r in rows[1:]] == list(by_name)
    for r in rows[1:]:
        c = by_name[r[0]]
        assert r[2] == c["verdict"] and r[3] == accuracy(r[0])
        assert r[5] == fmt_points(c["loss_upper_bound"]) and r[7] == c["reason"]


@pytest.mark.slow
def test_flips_are_every_discordant_pair_in_natural_question_order_with_counts_per_direction(run):
    out, m, page = run["out"], run["manifest"], run["page"]
    flips = _flips(page)
    natural_key = _natural
    base = {r.key: r for r in read_records(out / "records" / f"{m['plan']['baseline']}.jsonl")}
    expected = {}
    for name in m["plan"]["candidates"]:
        for r in read_records(out / "records" / f"{name}.jsonl"):
            b = base[r.key]
            if (b.outcome == "correct") != (r.outcome == "correct"):
                expected[(name, r.question_id)] = "lost" if b.outcome == "correct" else "gained"
    assert {(f[0], f[3]): f[1] for f in flips} == expected
    assert any(len(q) > len("test-0-9") for _, q in expected)  # ids with 2 and 3 digits
    for cand in m["plan"]["candidates"]:
        for kind in ("lost", "gained"):
            ids = [f[3] for f in flips if f[0] == cand and f[1] == kind]
            assert ids == sorted(ids, key=natural_key)
    options = dict(re.findall(r'<option value="(lost|gained)">([^<]*)</option>', page))
    lost = sum(v == "lost" for v in expected.values())
    assert options == {"lost": f"lost ({lost:,})", "gained": f"gained ({len(expected) - lost:,})"}
    assert f"{len(expected):,} flips" in _section(page, "flips")


def _natural(text):
    # (the page's order, written independently of qualgate.report.html.natural_key)
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text)]


def test_natural_order_reads_digit_runs_as_numbers():
    from qualgate.report.html import natural_key

    ids = ["test-0-100", "test-0-13", "test-0-2", "test-0-0", "test-1-1"]
    assert sorted(ids, key=natural_key) == ["test-0-0", "test-0-2", "test-0-13", "test-0-100", "test-1-1"]


@pytest.mark.slow
def test_a_no_answer_is_labelled_strict_and_the_lenient_reading_is_named(tmp_path):
    """A strict ``no_answer`` whose record holds the lenient extractor's number must not read
    as ``138 (no_answer)``."""
    import shutil

    pytest.importorskip("selenium.webdriver")
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        pytest.skip("Debian's chromium and chromium-driver are not installed")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    from qualgate.report.html import HtmlReport, PageFlip, render_html
    from qualgate.verdict.flips import Flip

    flip = Flip("lost", "s", "q1", 0, 0, "138", "correct", "no_answer", "138", "138", "so 138", "hmm 138")
    page = HtmlReport("t", "s", 5.0, [], [], [], [], [], [], [PageFlip("fly", flip)], {}, [])
    path = tmp_path / "p.html"
    path.write_text(render_html(page), encoding="utf-8")
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu"):
        options.add_argument(arg)
    b = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    try:
        b.get(path.as_uri())
        cells = [td.text for td in b.find_elements(By.CSS_SELECTOR, "tr.flip td")]
    finally:
        b.quit()
    assert cells[6] == "138 (correct)"
    assert cells[7] == "no answer (strict); lenient extractor read 138"
