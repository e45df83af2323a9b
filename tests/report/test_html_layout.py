"""The HTML page's layout, measured in headless Chromium at 800 and 1400 px, light and dark.

The page is the one ``qualgate run --speed-rounds --html`` writes for the demo's suite
generator on the toy engine (120 questions, three candidates, interleaved speed rounds). In
the browser: no two header texts of a table overlap or leave their cell, no word or number of
a table cell is split over two lines (a break after a hyphen is allowed), and a flip's outputs
take the table's full width. Each view is saved as a PNG under the test's tmp dir
(``screenshots/``); :func:`screenshot` also writes the README's.
"""

from __future__ import annotations

import html.parser
import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from qualgate.cli import cli

#: in the page: per table, pairs of header texts that overlap or overflow their cell, every token
#: (whitespace-separated, split after hyphens) of a table cell whose text lies on two lines, and
#: the sections whose table is wider than the page (it would scroll sideways in its box)
_MEASURE = """
const bad = {overlaps: [], overflows: [], breaks: [], scrolls: []};
document.querySelectorAll('.wide').forEach((w) => {
  if (w.scrollWidth > w.clientWidth + 1) bad.scrolls.push(w.closest('section').id);
});
const box = (el) => { const r = document.createRange(); r.selectNodeContents(el); return r.getBoundingClientRect(); };
const meet = (a, b) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > 0.5 &&
                       Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 0.5;
document.querySelectorAll('table').forEach((t, ti) => {
  const heads = [...t.querySelectorAll('thead th')].filter((th) => th.textContent.trim());
  const texts = heads.map(box), cells = heads.map((th) => th.getBoundingClientRect());
  texts.forEach((a, i) => {
    const c = cells[i];
    if (a.left < c.left - 0.5 || a.right > c.right + 0.5) bad.overflows.push(heads[i].textContent);
    texts.slice(i + 1).forEach((b, j) => { if (meet(a, b)) bad.overlaps.push([heads[i].textContent, heads[i + 1 + j].textContent]); });
  });
});
document.querySelectorAll('td, th').forEach((cell) => {
  if (cell.closest('tr.flip-detail')) return;  // a model's output wraps where it must (pre-wrap)
  const walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
  for (let node = walk.nextNode(); node; node = walk.nextNode()) {
    if (node.parentElement.closest('code.raw')) continue;  // provenance: paths and JSON, not words
    for (const m of node.data.matchAll(/[^\\s-]+-?/g)) {
      const r = document.createRange(); r.setStart(node, m.index); r.setEnd(node, m.index + m[0].length);
      const lines = new Set([...r.getClientRects()].filter((q) => q.width > 0).map((q) => Math.round(q.top)));
      if (lines.size > 1) bad.breaks.push(m[0] + ' in: ' + node.data.slice(0, 80));
    }
  }
});
return bad;
"""


@pytest.fixture(scope="module")
def page(tmp_path_factory, plan_writer) -> Path:
    root = tmp_path_factory.mktemp("layout")
    plan = plan_writer(root / "plan", questions=120, seeds=(0,))
    out, page = root / "out", root / "page.html"
    args = ["run", str(plan), "--out", str(out), "--quiet", "--html", str(page), "--speed-rounds", "6"]
    r = CliRunner().invoke(cli, args + ["--speed-questions", "4"])
    assert r.exit_code in (0, 1, 4), r.output
    return page


@pytest.fixture(scope="module")
def browser():
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    binary, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (binary and driver):
        pytest.skip("Debian's chromium and chromium-driver are not installed")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"):
        options.add_argument(arg)
    b = webdriver.Chrome(service=Service(driver), options=options)
    b.set_page_load_timeout(30)
    yield b
    b.quit()


def view(browser, page: Path, width: int, scheme: str, *, height: int = 1600) -> None:
    """Open ``page`` at ``width`` CSS px in the ``scheme`` (``light`` or ``dark``) colour scheme."""
    browser.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
    )
    browser.execute_cdp_cmd(
        "Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": scheme}]}
    )
    browser.get(page.as_uri())


def measure(browser) -> dict:
    """The page's layout faults now (see ``_MEASURE``)."""
    return browser.execute_script(_MEASURE)


def screenshot(browser, page: Path, png: Path, width: int, scheme: str, height: int = 1600) -> dict:
    """Save the top ``height`` px of ``page`` at ``width`` in ``scheme`` as ``png``; its layout faults."""
    view(browser, page, width, scheme, height=height)
    png.parent.mkdir(parents=True, exist_ok=True)
    assert browser.get_screenshot_as_file(str(png)), png
    return measure(browser)


@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", [800, 1400])
def test_headers_do_not_collide_and_no_cell_breaks_a_word_or_number(browser, page, tmp_path, width, scheme):
    png = tmp_path / "screenshots" / f"report-{width}-{scheme}.png"
    faults = screenshot(browser, page, png, width, scheme)
    assert png.stat().st_size > 10_000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert faults == {"overlaps": [], "overflows": [], "breaks": [], "scrolls": []}
    assert browser.execute_script("return document.documentElement.scrollWidth") <= width  # no sideways page scroll
    assert browser.find_elements("css selector", "#flips-table tbody tr.flip")  # the flips were measured too


@pytest.mark.slow
@pytest.mark.parametrize("width", [800, 1400])
def test_a_flips_outputs_take_the_tables_full_width_with_the_first_difference_outlined(browser, page, width):
    from selenium.webdriver.support.ui import WebDriverWait

    view(browser, page, width, "light")
    browser.find_element("css selector", "tr.flip details summary").click()
    row = WebDriverWait(browser, 10).until(lambda b: b.find_elements("css selector", "tr.flip-detail") or False)[0]
    table = browser.find_element("id", "flips-table").rect["width"]
    pres = row.find_elements("css selector", ".pair pre")
    widths = [p.rect["width"] for p in pres]
    # side by side where two fit (1400 px: each near half the table), else stacked at full width
    share = 0.45 if width == 1400 else 0.9
    assert len(widths) == 2 and min(widths) >= share * table, (widths, table)
    if width == 1400:
        assert pres[0].rect["y"] == pres[1].rect["y"]
    else:
        assert pres[1].rect["y"] > pres[0].rect["y"] + pres[0].rect["height"] - 1
    note = row.find_element("css selector", "p.sub").text
    at = int(re.search(r"first difference at character ([\d,]+)", note).group(1).replace(",", ""))
    texts = [p.text for p in pres]
    assert texts[0][:at] == texts[1][:at] and texts[0][at : at + 1] != texts[1][at : at + 1]
    for p in pres:
        diff = p.find_elements("css selector", ".diff")
        assert len(diff) <= 1 and (not diff or diff[0].text == p.text[at : at + 1])


class _Ids(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids = []

    def handle_starttag(self, tag, attrs):
        self.ids += [v for k, v in attrs if k == "id"]


@pytest.mark.slow
def test_every_element_id_in_the_page_and_its_figures_is_unique(page):
    parser = _Ids()
    parser.feed(page.read_text(encoding="utf-8"))
    assert len(parser.ids) > 50  # the figures' ids are counted too
    assert [i for i, n in Counter(parser.ids).items() if n > 1] == []
    svg = page.read_text(encoding="utf-8")
    # every reference inside a figure points at an id of the page
    refs = set(re.findall(r'(?:url\(#|href="#)([^")]+)', svg))
    assert refs and refs <= set(parser.ids)


@pytest.mark.slow
def test_title_states_the_finding_and_speed_ups_carry_their_interval_and_warnings(page):
    text = page.read_text(encoding="utf-8")
    gate = json.loads((page.parent / "out" / "gate.json").read_text())
    manifest = json.loads((page.parent / "out" / "manifest.json").read_text())
    title = re.search(r"<title>(.*?)</title>", text).group(1)
    assert re.search(r"<h1>(.*?)</h1>", text).group(1) == title and manifest["run_id"] not in title
    for c in gate["candidates"]:
        assert c["name"] in title
        if c["verdict"] == "FAIL":
            assert f"{c['name']} may lose up to {100 * c['loss_upper_bound']:.2f} points: FAIL" in title
    results = manifest["speed"]["results"]
    level = {r["confidence_level"] for r in results.values()}
    assert len(level) == 1
    label = f"{level.pop():.1%} interval"
    # one label for the speed-ups' interval, wherever the page names it
    assert f"speed-up [{label}]" in text and f"the speed-up&#x27;s {label}" in text
    assert not re.search(r"\d+(\.\d)?\s?% CI", text)
    for name, r in results.items():
        low, high = r["confidence_interval"]
        # in its cell (spans that let a narrow page wrap between the value and the interval)
        assert f"{r['speedup']:.2f} [{low:.2f}, {high:.2f}]" in re.sub(r"</?span[^>]*>", "", text)
        if r["warning"]:
            assert f"{name}: warning: {r['warning']}".replace("'", "&#x27;") in text
        if low <= 1.0 <= high:
            assert f"{name}: the speed-up&#x27;s {label} [{low:.2f}, {high:.2f}] includes 1.00" in text


@pytest.mark.slow
def test_a_failing_candidates_flips_come_first_and_all_before_show_more(page):
    text = page.read_text(encoding="utf-8")
    gate = json.loads((page.parent / "out" / "gate.json").read_text())
    flips = json.loads(
        re.search(r'<script id="flips-data"[^>]*>(.*?)</script>', text, re.S).group(1).replace("<\\/", "</")
    )
    verdict = {c["name"]: c["verdict"] for c in gate["candidates"]}
    rank = {"FAIL": 0, "INCONCLUSIVE": 1, "PASS": 2}
    order = [rank[verdict[f[0]]] for f in flips]
    assert order == sorted(order)
    failing = sum(verdict[f[0]] == "FAIL" for f in flips)
    assert f'data-first="{failing}"' in text


def _verdict(name, verdict):
    return {"name": name, "mode": "fly", "verdict": verdict, "accuracy": 0.5, "loss": 0.0, "loss_upper": 0.1}


@pytest.mark.slow
def test_every_flip_of_a_failing_candidate_is_listed_before_show_more_and_before_a_passing_ones(browser, tmp_path):
    from qualgate.report.html import HtmlReport, PageFlip, render_html
    from qualgate.verdict.flips import Flip

    def flip(i, candidate):
        f = Flip("lost", "s", f"q{i}", 0, 0, "7", "correct", "incorrect", "7", "3", "so 7", "so 3")
        return PageFlip(candidate, f)

    flips = [flip(i, "passing") for i in range(30)] + [flip(i, "failing") for i in range(450)]
    verdicts = [_verdict("passing", "PASS") | {"speedup": None, "reason": ""}]
    verdicts.append(_verdict("failing", "FAIL") | {"speedup": None, "reason": ""})
    report = HtmlReport("t", "s", 5.0, verdicts, [], [], [], [], [], flips, {}, [])
    page = tmp_path / "page.html"
    page.write_text(render_html(report), encoding="utf-8")
    view(browser, page, 1400, "light")
    rows = browser.find_elements("css selector", "tr.flip")
    names = [r.get_attribute("data-candidate") for r in rows]
    assert names == ["failing"] * 450  # all of the failing candidate's, the passing one's behind "show more"
    more = browser.find_element("id", "flips-more")
    assert more.is_displayed()
    more.click()
    assert len(browser.find_elements("css selector", "tr.flip")) == 480


@pytest.mark.slow
def test_captions_and_columns_name_only_what_the_page_shows(page):
    """One suite: no pooled row, so no diamonds; sampled at temperature 1: no candidate is
    expected to match the baseline byte for byte, so no "lossless and greedy" column."""
    text = page.read_text(encoding="utf-8")
    gate = json.loads((page.parent / "out" / "gate.json").read_text())
    assert all(len(c["suites"]) == 1 for c in gate["candidates"])
    assert "diamond" not in text
    divergence = re.search(r'<section id="divergence">(.*?)</section>', text, re.S).group(1)
    assert "<th>candidate</th>" in divergence and "lossless and greedy" not in divergence
