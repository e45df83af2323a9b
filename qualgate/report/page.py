"""The HTML page of :mod:`qualgate.report.html`: its data classes and the rendering.

Everything here is layout: escaping, tables, the inline style (light, dark and print) and
the inline script of the flips filter. No statistics and no I/O.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from qualgate.formatting import fmt_pct, fmt_points
from qualgate.verdict.flips import Flip

__all__ = ["MAX_OUTPUT_CHARS", "HtmlReport", "PageFlip", "interval_label", "render_html"]

#: characters of an output shown in the page; longer outputs keep their start and their end
#: (where the answer is) around an elision mark
MAX_OUTPUT_CHARS = 3000


@dataclass(frozen=True)
class PageFlip:
    """One flip (:class:`qualgate.verdict.flips.Flip`) as the page lists it: with its candidate and prompt."""

    candidate: str
    flip: Flip
    prompt: str | None = None


@dataclass(frozen=True)
class HtmlReport:
    """Everything the page shows, as plain data (see the module docstring)."""

    title: str
    subtitle: str
    margin: float
    verdicts: list[dict]
    forest: list
    speed: list[dict]
    acceptance: list[tuple[str, float]]
    sequential: list[dict]
    calibration: list[dict]
    flips: list[PageFlip]
    flip_counts: dict[str, dict[str, int]]
    provenance: list[tuple[str, str]]
    notes: list[str] = field(default_factory=list)
    #: the divergence audit's rows (:func:`qualgate.report.divergence.audit_rows`)
    divergence: list[list[str]] = field(default_factory=list)
    headline: str = ""  #: the verdict and the worst candidate, above the verdicts
    #: the achieved level of the speed-ups' intervals (interleaved rounds), ``None`` without one
    speed_level: float | None = None


def interval_label(level: float) -> str:
    """The one name of an interval on the page (and in the run's log): ``96.9% interval``."""
    return f"{level:.1%} interval"


_CSS = """
:root{color-scheme:light dark;--fg:#1b1b1b;--bg:#fff;--muted:#666;--line:#ddd;--mark:#fff2a8;
--pass:#1a7f37;--fail:#c62828;--inc:#b26a00}
@media (prefers-color-scheme:dark){:root{--fg:#e6e6e6;--bg:#161616;--muted:#aaa;--line:#444;--mark:#6b5a00;
--pass:#5fd37a;--fail:#ff7b72;--inc:#f0b35a}figure svg{filter:invert(1) hue-rotate(180deg)}}
body{font:14px/1.45 system-ui,sans-serif;color:var(--fg);background:var(--bg);margin:2rem auto;max-width:72rem;padding:0 1rem}
h1{font-size:1.4rem;margin:0}h2{font-size:1.1rem;margin-top:2rem;border-bottom:1px solid var(--line)}
.sub{color:var(--muted)}table{border-collapse:collapse;width:100%}.wide{overflow-x:auto}
th,td{border-bottom:1px solid var(--line);padding:.3rem .5rem;text-align:left;vertical-align:top}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}td.id,span.id{white-space:nowrap}td.num.split{white-space:normal}span.nw{white-space:nowrap}
.warn{color:var(--inc)}code.raw{overflow-wrap:anywhere}
.PASS{color:var(--pass);font-weight:600}.FAIL{color:var(--fail);font-weight:600}.INCONCLUSIVE{color:var(--inc);font-weight:600}
figure{margin:1rem 0}figure svg{width:100%;max-width:52rem;height:auto}
pre{white-space:pre-wrap;overflow-wrap:anywhere;margin:0;font-size:12px}mark{background:var(--mark);color:inherit}
.pair{display:grid;grid-template-columns:repeat(auto-fit,minmax(28rem,1fr));gap:1rem}.pair>div{min-width:0}
.diff{outline:2px solid var(--fail);outline-offset:-1px}tr.flip-detail>td{padding:.5rem 0 1rem}
.filters{margin:.5rem 0}.filters label{margin-right:1rem;white-space:nowrap}details summary{cursor:pointer}
#flips-table.one-suite .suite{display:none}
@media print{.filters,#flips-more{display:none}body{max-width:none}figure svg{filter:none}}
"""

_JS = """
(function(){
  var data=JSON.parse(document.getElementById('flips-data').textContent), table=document.getElementById('flips-table'),
      PAGE=200, FIRST=Math.max(PAGE, Number(table.dataset.first)||0), limit=FIRST,  // a failing candidate's: all
      body=table.querySelector('tbody'), sel=document.querySelectorAll('.filters select'),
      shown=document.getElementById('flips-shown'), more=document.getElementById('flips-more');
  // one flip: [candidate, direction, suite, question, seed, sample, gold, baseline outcome,
  //            candidate outcome, baseline answer, candidate answer, baseline output, candidate output, prompt]
  function el(tag, text, cls){var e=document.createElement(tag); if(text!==undefined){e.textContent=text;}
    if(cls){e.className=cls;} return e;}
  function firstDiff(a, b){  // the first character where the two outputs differ; -1: identical or unknown
    if(a===null||b===null||a===b){return -1;} var i=0; while(i<a.length&&i<b.length&&a[i]===b[i]){i++;} return i;}
  function marked(text, answer, diff){  // the output: the answer's last occurrence marked, the first difference outlined
    var pre=el('pre'); if(text===null){pre.appendChild(el('em','no output recorded')); return pre;}
    var at=answer ? text.lastIndexOf(answer) : -1, cuts=[0,text.length];
    if(at>=0){cuts.push(at, at+answer.length);}
    if(diff>=0&&diff<text.length){cuts.push(diff, diff+1);}
    cuts=cuts.filter(function(c,i,a){return a.indexOf(c)===i;}).sort(function(x,y){return x-y;});
    for(var i=0;i+1<cuts.length;i++){
      var s=cuts[i], node=document.createTextNode(text.slice(s,cuts[i+1]));
      if(s===diff){var d=el('span',undefined,'diff'); d.title='first difference'; d.appendChild(node); node=d;}
      if(at>=0&&s>=at&&s<at+answer.length){var m=el('mark'); m.appendChild(node); node=m;}
      pre.appendChild(node);}
    return pre;}
  function detail(f, tr){  // the prompt and both outputs in a row of their own, the table's full width
    var d=el('details'), row=null; d.appendChild(el('summary','outputs'));
    d.addEventListener('toggle',function(){
      if(row){row.hidden=!d.open; return;} if(!d.open){return;}
      row=el('tr',undefined,'flip-detail'); var td=el('td'); td.colSpan=tr.children.length; row.appendChild(td);
      if(f[13]!==null){td.appendChild(el('strong','prompt')); td.appendChild(el('pre',f[13]));}
      var at=firstDiff(f[11],f[12]);
      if(at>=0){td.appendChild(el('p','first difference at character '+at.toLocaleString('en')+
        ' of the text shown (outlined in both outputs)','sub'));}
      var pair=el('div',undefined,'pair');
      [['baseline output',f[11],f[9]],['candidate output',f[12],f[10]]].forEach(function(s){
        var box=el('div'); box.appendChild(el('strong',s[0])); box.appendChild(marked(s[1],s[2],at)); pair.appendChild(box);});
      td.appendChild(pair); tr.after(row);});
    return d;}
  function answer(a, outcome){  // a no_answer's recorded answer is the lenient extractor's reading
    if(outcome==='no_answer'){return 'no answer (strict)'+(a===null?'':'; lenient extractor read '+a);}
    return (a===null?'—':a)+' ('+outcome+')';}
  function row(f){
    var tr=el('tr',undefined,'flip'); tr.dataset.candidate=f[0]; tr.dataset.direction=f[1]; tr.dataset.suite=f[2];
    [[f[0],'id'],[f[2],'id suite'],[f[3],'id'],[f[4]+'/'+f[5],'id']].forEach(function(v){
      tr.appendChild(el('td',String(v[0]),v[1]));});
    tr.appendChild(el('td',f[1],f[1]==='lost'?'FAIL':'PASS')); tr.appendChild(el('td',f[6]===null?'—':f[6]));
    tr.appendChild(el('td',answer(f[9],f[7]))); tr.appendChild(el('td',answer(f[10],f[8])));
    var td=el('td'); tr.appendChild(td); td.appendChild(detail(f,tr)); return tr;}
  function render(){
    var want={candidate:'*',direction:'*',suite:'*'}; sel.forEach(function(s){want[s.name]=s.value;});
    var match=data.filter(function(f){return (want.candidate==='*'||f[0]===want.candidate)&&
      (want.direction==='*'||f[1]===want.direction)&&(want.suite==='*'||f[2]===want.suite);});
    var frag=document.createDocumentFragment(); match.slice(0,limit).forEach(function(f){frag.appendChild(row(f));});
    body.replaceChildren(frag); shown.textContent=Math.min(limit,match.length)+' of '+match.length;
    more.hidden=match.length<=limit;}
  sel.forEach(function(s){s.addEventListener('change',function(){limit=FIRST; render();});});
  more.addEventListener('click',function(){limit+=PAGE; render();}); render();
})();
"""


def _e(x) -> str:
    return html.escape("—" if x is None else str(x))


def _clip(text: str | None) -> str | None:
    if text is None or len(text) <= MAX_OUTPUT_CHARS:
        return text
    half = MAX_OUTPUT_CHARS // 2
    return f"{text[:half]}\n[… {len(text) - 2 * half:,} characters not shown …]\n{text[-half:]}"


def _table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    num: Sequence[int] = (),
    ids: Sequence[int] = (),
    split: Sequence[int] = (),
) -> str:
    """A table in a box that scrolls sideways where the page is too narrow for it: its cells wrap
    between words only; ``num`` (numbers) and ``ids`` (names) columns do not wrap, ``split``
    (numbers) columns only between their ``span.nw`` parts (a value and its interval)."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = []

    def cell(i: int, c: str) -> str:
        if i in split:
            return f'<td class="num split">{c}</td>'
        return f'<td class="num">{c}</td>' if i in num else f'<td class="id">{c}</td>' if i in ids else f"<td>{c}</td>"

    for row in rows:
        cells = "".join(cell(i, c) for i, c in enumerate(row))
        body.append(f"<tr>{cells}</tr>")
    return f'<div class="wide"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def _fmt_speed(v: dict) -> str:
    """The speed-up with its interval, as the run's text report writes it (``1.23 [0.98, 1.52]``),
    escaped; a narrow page wraps it between the value and the interval, never inside either."""
    from qualgate.report.run import fmt_speedup

    x = v["speedup"]
    if x is None or not math.isfinite(x):
        return "—"
    value, _, interval = fmt_speedup(x, v.get("speedup_ci")).partition(" ")
    parts = [value, interval] if interval else [value]
    return " ".join(f'<span class="nw">{html.escape(p)}</span>' for p in parts)


def _speed_notes(r: HtmlReport) -> str:
    """The warnings the run logged about its speed-ups, and each interval that includes 1.0."""
    notes = []
    for v in r.verdicts:
        ci = v.get("speedup_ci")
        if v.get("speed_warning"):
            notes.append(f"{v['name']}: warning: {v['speed_warning']}")
        if ci is not None and ci[0] <= 1.0 <= ci[1]:
            notes.append(
                f"{v['name']}: the speed-up's {interval_label(r.speed_level or 0.95)} "
                f"[{ci[0]:.2f}, {ci[1]:.2f}] includes 1.00: not shown faster than the baseline"
            )
    return "".join(f'<p class="warn">{html.escape(n)}</p>' for n in notes)


def _verdict_section(r: HtmlReport) -> str:
    rows = [
        [
            _e(v["name"]),
            _e(v["mode"]),
            f'<span class="{_e(v["verdict"])}">{_e(v["verdict"])}</span>',
            _e(fmt_pct(v["accuracy"])),
            _e(fmt_points(v["loss"], sign=True) if v["loss"] is not None else None),
            _e(fmt_points(v["loss_upper"])),
            _fmt_speed(v),
            _e(v["reason"]),
        ]
        for v in r.verdicts
    ]
    speed = f"speed-up [{interval_label(r.speed_level)}]" if r.speed_level else "speed-up"
    headers = ["config", "mode", "verdict", "accuracy", "loss (pts)", "loss upper bound (pts)", speed, "reason"]
    lead = f'<p class="headline"><strong>{html.escape(r.headline)}</strong></p>' if r.headline else ""
    table = _table(headers, rows, num=(3, 4, 5), ids=(0, 1, 2), split=(6,))
    return f'<section id="verdicts"><h2>Verdicts</h2>{lead}{table}{_speed_notes(r)}</section>'


def _divergence_section(r: HtmlReport) -> str:
    """Each candidate's divergence audit against the baseline (:mod:`qualgate.verdict.divergence`)."""
    if not r.divergence:
        return ""
    headers = [
        "candidate",
        "pairs",
        "byte-identical",
        "unit",
        "first difference, 10th / 50th / 90th percentile (from 0)",
        "near-ties / top-2 margins known",
        "lossless and greedy",
    ]
    rows = [[_e(c) for c in row] for row in r.divergence]
    if not any(row[-1] for row in r.divergence):  # no candidate is expected to be identical: no column
        headers, rows = headers[:-1], [row[:-1] for row in rows]
    return (
        '<section id="divergence"><h2>Divergence</h2><p class="sub">Outputs byte-identical to the '
        "baseline's, and where the others first differ (in tokens when the records carry token ids, else "
        "in characters); a near-tie is a first difference where the target's top-2 probability margin is "
        f"below the audit's threshold: numerics, not a changed decision.</p>{_table(headers, rows, num=(1, 2), ids=(0, 3, 4, 5))}</section>"
    )


def _figure(svg: str, caption: str, ident: str) -> str:
    return f'<figure id="{ident}" class="plot">{svg}<figcaption>{html.escape(caption)}</figcaption></figure>'


def _plots_section(r: HtmlReport) -> str:
    from qualgate.report import plots as _plots

    parts = ['<section id="plots"><h2>Loss intervals</h2>']
    if r.forest:
        parts.append(
            _figure(
                _plots.forest_plot(r.forest, margin=r.margin),
                "loss per candidate and suite"
                + (" (and pooled: diamonds)" if any(getattr(i, "pooled", False) for i in r.forest) else "")
                + ": the two-sided interval whose upper end is the gate's one-sided bound; the dashed line is the margin",
                "forest",
            )
        )
    else:
        parts.append("<p>No fixed-sample intervals (a sequential gate: see its bounds below).</p>")
    if r.speed:
        measured = any(p["speedup_low"] is not None for p in r.speed)
        caption = "speed-up against the loss upper bound, one point per candidate" + (
            f"; bars: the speed-up's {interval_label(r.speed_level or 0.95)}. The speed-up is the median of "
            "the interleaved rounds' ratios to the baseline, not the ratio of median tok/s, so the run's tok/s "
            "column can rank configs differently"
            if measured
            else "; each speed-up is one measurement of engine throughput (no interval was measured)"
        )
        parts.append(
            "<h2>Speed against risk</h2>"
            + _figure(_plots.speed_risk_plot(r.speed, margin=r.margin), caption, "speed-risk")
        )
    if r.acceptance:
        labels, values = zip(*r.acceptance)
        parts.append(
            "<h2>Acceptance length</h2>"
            + _figure(
                _plots.acceptance_plot(labels, values), "mean acceptance length per speculative config", "acceptance"
            )
        )
    if r.sequential:
        parts.append(
            "<h2>Sequential evidence</h2>"
            + _figure(
                _plots.sequential_plot(r.sequential, margin=r.margin),
                "always-valid bounds of the loss at each look, up to where each candidate stopped (the axis is "
                "clipped at -4 and 5 times the margin)",
                "sequential",
            )
        )
    parts.append("</section>")
    return "".join(parts)


def _calibration_section(r: HtmlReport) -> str:
    if not r.calibration:
        return ""
    rows = []
    for c in r.calibration:
        cal = c["report"]
        low, high = cal.discordant_ci
        rows.append(
            [
                _e(c["name"]),
                _e(f"{cal.questions:,}"),
                _e(fmt_pct(cal.discordant, 2)),
                _e(f"{fmt_pct(low, 2)} – {fmt_pct(high, 2)}"),
                _e(f"{cal.pvalue:.3g}"),
                _e("consistent" if cal.consistent else "NOT consistent"),
            ]
        )
    headers = [
        "lossless candidate",
        "questions",
        "discordance",
        interval_label(1 - r.calibration[0]["report"].alpha),
        "p (no difference)",
        "A/A",
    ]
    return (
        f'<section id="aa"><h2>A/A check (lossless candidates against the baseline)</h2>'
        f"{_table(headers, rows, num=(1, 2, 3, 4), ids=(0,))}</section>"
    )


def _options(name: str, label: str, values: Sequence[str], texts: Sequence[str] | None = None) -> str:
    opts = '<option value="*">all</option>' + "".join(
        f'<option value="{_e(v)}">{_e(t)}</option>' for v, t in zip(values, texts or values)
    )
    return f'<label>{html.escape(label)} <select name="{name}">{opts}</select></label>'


#: the flips of a FAIL candidate first, then INCONCLUSIVE, then PASS (the baseline and others last)
_FLIP_ORDER = {"FAIL": 0, "INCONCLUSIVE": 1, "PASS": 2}


def _flips_section(r: HtmlReport) -> str:
    """The filters, an empty table and the flips as JSON: the page's script lists them (a page
    at a time, so that thousands of flips open fast) and builds each one's details on demand."""
    counts = "; ".join(f"{k}: {v['lost']} lost, {v['gained']} gained" for k, v in r.flip_counts.items())
    total = sum(v["lost"] + v["gained"] for v in r.flip_counts.values())
    listed = len(r.flips)
    verdicts = {v["name"]: str(v["verdict"]) for v in r.verdicts}
    flips = sorted(r.flips, key=lambda p: _FLIP_ORDER.get(verdicts.get(p.candidate), 3))
    failing = sum(verdicts.get(p.candidate) == "FAIL" for p in flips)
    filters = "".join(
        [
            _options("candidate", "candidate", sorted({f.candidate for f in r.flips})),
            _options("suite", "suite", sorted({f.flip.suite for f in r.flips})),
            _options(
                "direction",
                "direction",
                ["lost", "gained"],
                [f"{d} ({sum(v[d] for v in r.flip_counts.values()):,})" for d in ("lost", "gained")],
            ),
        ]
    )
    data = [
        [
            p.candidate,
            f.kind,
            f.suite,
            f.question_id,
            f.seed,
            f.sample_index,
            f.gold,
            f.baseline_outcome,
            f.candidate_outcome,
            f.baseline_answer,
            f.candidate_answer,
            _clip(f.baseline_output),
            _clip(f.candidate_output),
            _clip(p.prompt),
        ]
        for p in flips
        for f in (p.flip,)
    ]
    # inside <script>, "</" would end the element: JSON allows "<\/" for it
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    headers = [
        "candidate",
        "suite",
        "question",
        "seed / sample",
        "direction",
        "gold",
        "baseline answer",
        "candidate answer",
        "",
    ]
    head = "".join(f'<th class="suite">{h}</th>' if h == "suite" else f"<th>{h}</th>" for h in headers)
    # one suite: its column says nothing the filter does not (and the narrow page needs the room)
    one = ' class="one-suite"' if len({f.flip.suite for f in r.flips}) == 1 else ""
    capped = f" (the first {listed:,} of each candidate's are listed)" if listed < total else ""
    return (
        f'<section id="flips"><h2>Flips</h2><p>{total:,} flips{capped}: {html.escape(counts or "none")}. '
        f'Shown: <span id="flips-shown">{listed}</span>.</p><div class="filters">{filters}</div>'
        f'<div class="wide"><table id="flips-table"{one} data-first="{failing}"><thead><tr>{head}</tr></thead>'
        "<tbody></tbody></table></div>"
        f'<button id="flips-more" type="button" hidden>show more</button>'
        f'<script id="flips-data" type="application/json">{payload}</script></section>'
    )


def render_html(r: HtmlReport) -> str:
    """The page for ``r``: one self-contained HTML document."""
    provenance = _table(["", ""], [[_e(k), f'<code class="raw">{_e(v)}</code>'] for k, v in r.provenance], ids=(0,))
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in r.notes)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{html.escape(r.title)}</title><style>{_CSS}</style></head><body>"
        f'<header><h1>{html.escape(r.title)}</h1><p class="sub">{html.escape(r.subtitle)}</p></header>'
        + _verdict_section(r)
        + _plots_section(r)
        + _calibration_section(r)
        + _divergence_section(r)
        + _flips_section(r)
        + f'<section id="provenance"><h2>Provenance</h2>{provenance}</section>'
        + (f'<section id="notes"><h2>Notes</h2><ul>{notes}</ul></section>' if notes else "")
        + f"<script>{_JS}</script></body></html>\n"
    )
