"""The HTML report: one self-contained page, checked as text and in a real headless Chromium.

The browser is Debian's ``chromium`` driven by its ``chromedriver`` through selenium (both
installed by .ci/run); the page is opened from disk with ``file://``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil

import pytest
from click.testing import CliRunner

from qualgate.cli import cli
from qualgate.records import Record
from qualgate.report.html import HtmlReport, PageFlip, collect_flips, render_html
from qualgate.verdict.flips import Flip


@pytest.fixture(scope="module")
def out(tmp_path_factory, plan_writer):
    """A finished tiny run (3 configs, 4 questions x 2 seeds) with its page."""
    root = tmp_path_factory.mktemp("html")
    plan = plan_writer(root / "plan", questions=4, seeds=(0, 1))
    r = CliRunner().invoke(
        cli, ["run", str(plan), "--out", str(root / "out"), "--quiet", "--html", str(root / "out" / "page.html")]
    )
    assert r.exit_code == 4, r.output  # 8 pairs a config: too few to decide
    return root / "out"


@pytest.fixture(scope="module")
def browser():
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    binary, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (binary and driver):
        # CI installs them (.ci/run) and must run these tests; elsewhere they are optional
        assert not os.environ.get("CI"), "CI needs Debian's chromium and chromium-driver"
        pytest.skip("Debian's chromium and chromium-driver are not installed")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,2000"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    b = webdriver.Chrome(service=Service(driver), options=options)
    b.set_page_load_timeout(30)
    yield b
    b.quit()


def _record(qid, outcome, *, seed=0, answer=None, output=None, suite="s"):
    return Record(
        schema_version=1,
        run_id="r",
        config_id="c",
        suite=suite,
        suite_version="1",
        question_id=qid,
        seed=seed,
        sample_index=0,
        outcome=outcome,
        prompt_hash="h",
        answer_strict=answer,
        gold="7",
        output=output,
    )


def _flip(i, candidate, direction, suite):
    lost = direction == "lost"
    flip = Flip(
        direction,
        suite,
        f"q{i}",
        0,
        0,
        "7",
        "correct" if lost else "incorrect",
        "incorrect" if lost else "correct",
        "7" if lost else "3",
        "3" if lost else "7",
        "so it is 7",
        "so it is 3",
    )
    return PageFlip(candidate, flip, f"prompt {i}")


def _synthetic_page(tmp_path):
    flips = [
        _flip(i, c, d, s)
        for i, (c, d, s) in enumerate(
            [
                ("fly", "lost", "gsm8k"),
                ("fly", "gained", "gsm8k"),
                ("fly", "lost", "math500"),
                ("eagle", "lost", "gsm8k"),
                ("eagle", "gained", "math500"),
                ("eagle", "gained", "math500"),
            ]
        )
    ]
    report = HtmlReport(
        title="t",
        subtitle="s",
        margin=2.0,
        verdicts=[],
        forest=[],
        speed=[],
        acceptance=[],
        sequential=[],
        calibration=[],
        flips=flips,
        flip_counts={"fly": {"lost": 2, "gained": 1}, "eagle": {"lost": 1, "gained": 2}},
        provenance=[("run id", "x")],
    )
    path = tmp_path / "page.html"
    path.write_text(render_html(report), encoding="utf-8")
    return path


def test_flips_are_the_pairs_one_side_got_right_and_errors_are_not_flips():
    base = [
        _record("a", "correct"),
        _record("b", "incorrect"),
        _record("c", "correct"),
        _record("d", "correct"),
        _record("e", "correct", seed=1),
    ]
    cand = [
        _record("a", "incorrect"),
        _record("b", "correct"),
        _record("c", "correct"),
        _record("d", "error"),
        _record("e", "no_answer", seed=1),
    ]
    flips = collect_flips(base, cand, "fly", prompts={("s", "a"): "what is 3+4?"})
    assert [(p.flip.question_id, p.flip.seed, p.flip.kind) for p in flips] == [
        ("a", 0, "lost"),
        ("e", 1, "lost"),
        ("b", 0, "gained"),
    ]
    assert flips[0].prompt == "what is 3+4?" and flips[1].prompt is None


@pytest.mark.slow
def test_report_page_is_self_contained_and_names_every_config(out):
    page = (out / "page.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    # nothing is fetched: no src/href but the SVGs' in-page references (#id), no stylesheet
    # links, no CSS imports or urls
    assert not re.search(r"\b(src|href)\s*=\s*\"(?!#)", page)
    assert re.search(r"\bhref\s*=\s*\"#", page)  # the check above sees the SVGs' references
    assert "<link" not in page and "@import" not in page and not re.search(r"url\((?!#)", page)
    for ident in ("verdicts", "forest", "speed-risk", "acceptance", "flips", "provenance"):
        assert f'id="{ident}"' in page
    manifest = json.loads((out / "manifest.json").read_text())
    for name, entry in manifest["configs"].items():
        assert entry["config_id"] in page and f"config {name}" in page


@pytest.mark.slow
def test_report_command_writes_the_page_and_says_where(out, tmp_path):
    target = tmp_path / "r.html"
    r = CliRunner().invoke(cli, ["report", str(out), "--html", str(target)])
    assert r.exit_code == 4, r.output  # the gate's: INCONCLUSIVE
    assert f"HTML report: {target}" in r.stderr
    assert target.read_text(encoding="utf-8").count("<svg") >= 3


@pytest.mark.slow
def test_gate_html_of_a_sequential_gate_draws_the_always_valid_bounds(out, tmp_path):
    target = tmp_path / "g.html"
    records = out / "records"
    r = CliRunner().invoke(
        cli,
        [
            "gate",
            str(records / "target.jsonl"),
            str(records / "fly.jsonl"),
            "--margin",
            "0.1",
            "--sequential",
            "--html",
            str(target),
        ],
    )
    assert r.exit_code == 4, r.output
    page = target.read_text(encoding="utf-8")
    assert 'id="sequential"' in page and "(sequential)" in page


@pytest.mark.slow
def test_page_loads_in_chromium_with_no_console_errors_and_every_plot_drawn(browser, out):
    browser.get((out / "page.html").as_uri())
    from selenium.webdriver.common.by import By

    errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    assert errors == []
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
    for ident in ("forest", "speed-risk", "acceptance"):
        svg = browser.find_element(By.CSS_SELECTOR, f"figure#{ident} svg")
        assert svg.size["width"] > 200 and svg.size["height"] > 50
    assert len(browser.find_elements(By.CSS_SELECTOR, "#verdicts tbody tr")) == 3  # the baseline, standard, fly
    assert browser.find_elements(By.CSS_SELECTOR, "#provenance tbody tr")


@pytest.mark.slow
def test_flips_filter_shows_only_the_chosen_direction_candidate_and_suite(browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    browser.get(_synthetic_page(tmp_path).as_uri())

    def visible():
        rows = browser.find_elements(By.CSS_SELECTOR, "tr.flip")
        return [
            (r.get_attribute("data-candidate"), r.get_attribute("data-direction"), r.get_attribute("data-suite"))
            for r in rows
            if r.is_displayed()
        ]

    assert len(visible()) == 6
    Select(browser.find_element(By.NAME, "direction")).select_by_value("gained")
    assert sorted(visible()) == [
        ("eagle", "gained", "math500"),
        ("eagle", "gained", "math500"),
        ("fly", "gained", "gsm8k"),
    ]
    Select(browser.find_element(By.NAME, "candidate")).select_by_value("fly")
    assert visible() == [("fly", "gained", "gsm8k")]
    assert browser.find_element(By.ID, "flips-shown").text == "1 of 1"
    Select(browser.find_element(By.NAME, "direction")).select_by_value("*")
    Select(browser.find_element(By.NAME, "suite")).select_by_value("math500")
    assert visible() == [("fly", "lost", "math500")]
    assert [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")] == []


@pytest.mark.slow
def test_page_turns_dark_with_the_system_theme_and_hides_filters_when_printed(browser, tmp_path):
    from selenium.webdriver.common.by import By

    browser.get(_synthetic_page(tmp_path).as_uri())

    def background():
        return browser.execute_script("return getComputedStyle(document.body).backgroundColor")

    browser.execute_cdp_cmd(
        "Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]}
    )
    assert background() == "rgb(22, 22, 22)"
    browser.execute_cdp_cmd(
        "Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "light"}]}
    )
    assert background() == "rgb(255, 255, 255)"
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
    assert not browser.find_element(By.CSS_SELECTOR, ".filters").is_displayed()
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": ""})
    assert browser.find_element(By.CSS_SELECTOR, ".filters").is_displayed()


def test_long_outputs_keep_their_start_and_their_end():
    from qualgate.report.page import MAX_OUTPUT_CHARS, _clip

    text = "x" * (3 * MAX_OUTPUT_CHARS) + " The answer is 42."
    shown = _clip(text)
    assert shown.endswith("The answer is 42.") and shown.startswith("x") and "characters not shown" in shown
    assert len(shown) < MAX_OUTPUT_CHARS + 100
    assert _clip("short") == "short" and _clip(None) is None


def _page_of(tmp_path, flips):
    report = HtmlReport(
        title="t",
        subtitle="s",
        margin=2.0,
        verdicts=[],
        forest=[],
        speed=[],
        acceptance=[],
        sequential=[],
        calibration=[],
        flips=flips,
        flip_counts={},
        provenance=[],
    )
    path = tmp_path / "page.html"
    path.write_text(render_html(report), encoding="utf-8")
    return path


@pytest.mark.slow
def test_outputs_show_as_text_with_the_answer_marked_even_when_they_hold_markup(browser, tmp_path):
    from selenium.webdriver.common.by import By

    hostile = "</script><script>window.pwned=1</script><img src=x onerror='window.pwned=2'> so 3 & <b>3</b>"
    page = _flip(0, "fly", "lost", "gsm8k")
    flip = dataclasses.replace(
        page, flip=dataclasses.replace(page.flip, candidate_output=hostile, candidate_answer="3")
    )
    browser.get(_page_of(tmp_path, [flip]).as_uri())
    from selenium.webdriver.support.ui import WebDriverWait

    browser.find_element(By.CSS_SELECTOR, "tr.flip details summary").click()
    # the details are built on the toggle event, which fires asynchronously after the click
    pres = WebDriverWait(browser, 10).until(
        lambda b: b.find_elements(By.CSS_SELECTOR, "tr.flip-detail .pair pre") or False
    )
    assert pres[1].text == hostile.replace("<b>3</b>", "<b>3</b>")
    assert pres[1].find_element(By.TAG_NAME, "mark").text == "3"
    assert pres[0].find_element(By.TAG_NAME, "mark").text == "7"
    assert browser.execute_script("return window.pwned === undefined")
    assert browser.find_elements(By.CSS_SELECTOR, "tr.flip-detail pre")[0].text == "prompt 0"


@pytest.mark.slow
def test_thousands_of_flips_are_listed_a_page_at_a_time(browser, tmp_path):
    from selenium.webdriver.common.by import By

    browser.get(_page_of(tmp_path, [_flip(i, "fly", "lost", "gsm8k") for i in range(450)]).as_uri())
    more = browser.find_element(By.ID, "flips-more")
    counts = []
    for _ in range(10):  # bounded: a button that never hides fails the assert below, not the run
        counts.append(len(browser.find_elements(By.CSS_SELECTOR, "tr.flip")))
        if not more.is_displayed():
            break
        more.click()
    assert counts == [200, 400, 450]
    assert browser.find_element(By.ID, "flips-shown").text == "450 of 450"
