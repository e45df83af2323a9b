"""Evidence forgeries against `qualgate check`: the scenarios, and a runner for any qualgate.

(Longer than 450 lines: one small function per scenario, kept in one file so that the list
``SCENARIOS`` reads as the table of the closing note.)

Each scenario starts from honest evidence written by the real `qualgate gate` on generated
records (a candidate fly-w2 that passes a 2-point margin, a candidate fly-default that loses
6.7 points) and forges it: edited fields, hand-written files, rewritten records, relabelled
baselines, hidden missingness, loose settings, re-dated or re-signed reports. A forgery is
*accepted* when `qualgate check` exits 0 for the config the forgery is meant to let through.

Verification modes (how CI is set up):

- ``records``: the record files are where the report says (recomputation possible), no key;
- ``signed``: the records are gone, ``QUALGATE_EVIDENCE_KEY`` is set (honest reports were
  written with it; the forger does not have it);
- ``unsigned``: the records are gone and no key is set;
- ``trust-unsigned``: as ``unsigned`` with ``--trust-unsigned`` (the operator trusts the file
  as it is: reported apart, not counted);
- ``before``: main's qualgate, records present, `check CONFIG --evidence FILE [args]`.

Run ``python tests/ci/forgeries.py --pythonpath DIR --modes before`` to print the table for
the qualgate found on that path (e.g. a checkout of the code before the change), or
``PYTHONPATH=. python tests/ci/forgeries.py --in-process --modes records,signed,unsigned,trust-unsigned``
for this one.
"""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
import hmac
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

DATA = Path(__file__).parent / "data"
N = 600
KEY = "ci-secret-for-tests"
KEY_ENV = "QUALGATE_EVIDENCE_KEY"
MODES = ("records", "signed", "unsigned")
W2, DEFAULT = DATA / "fly-w2.yaml", DATA / "fly-default.decoding.yaml"
#: the configs the candidates' records were written for
CANDIDATE_CONFIGS = {"fly-w2": DATA / "fly-w2.decoding.yaml", "fly-default": DEFAULT}


# ------------------------------------------------------------------ records and honest reports


def ids():
    from qualgate.ci import read_serving_config
    from qualgate.config.decoding import load_config

    return {
        "target": load_config(DATA / "target.decoding.yaml").config_id,
        "fly-w2": load_config(DATA / "fly-w2.decoding.yaml").config_id,
        "fly-default": read_serving_config(DEFAULT).config_id(),
    }


def write_records(path, config_id, mode, outcomes):
    """One record per question (outcome strings or booleans; ``None``: no record)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        for i, o in enumerate(outcomes):
            if o is None:
                continue
            o = {True: "correct", False: "incorrect"}.get(o, o)
            rec = {
                "schema_version": 1,
                "run_id": "forge",
                "config_id": config_id,
                "suite": "gsm8k",
                "suite_version": "1",
                "question_id": f"q{i:04d}",
                "seed": 0,
                "sample_index": 0,
                "outcome": o,
                "prompt_hash": "0" * 16,
                "mode": mode,
            }
            if o == "error":
                rec["error"] = "HTTP 500"
            fh.write(json.dumps(rec) + "\n")
    return path


BASE = [k % 10 != 0 for k in range(N)]  # 90% correct
LOST = [i for i, ok in enumerate(BASE) if ok][:40]


def flip(outcomes, lose, gain):
    out = list(outcomes)
    for i in [i for i, ok in enumerate(out) if ok][:lose]:
        out[i] = False
    for i in [i for i, ok in enumerate(out) if not ok][:gain]:
        out[i] = True
    return out


@dataclass
class Ctx:
    """One mode's honest material: records under ``root/recs``, reports under ``root``."""

    root: Path
    invoke: Callable  #: invoke(args, env) -> (exit code, output)
    new: bool  #: the qualgate under test writes report version 2 (--baseline-config, keys)
    key: str | None  #: the key honest reports are signed with
    ids: dict = field(default_factory=ids)
    n: int = 0

    def gate(self, *args, out, baseline_config=DATA / "target.decoding.yaml"):
        extra = ["--baseline-config", str(baseline_config)] if self.new and baseline_config else []
        if extra:  # and what each candidate serves (issue 46: the baseline must be its own reference)
            for p in [a for a in args if isinstance(a, Path)][1:]:
                extra += ["--candidate-config", str(CANDIDATE_CONFIGS[p.stem])]
        env = {KEY_ENV: self.key} if self.key else {}
        code, text = self.invoke(["gate", *map(str, args), *extra, "--output", str(out)], env)
        report = json.loads(Path(out).read_text())
        assert code == report["exit_code"], text  # the code the report records for its verdict
        return report

    def recs(self, name, mode, outcomes, config=None):
        return write_records(self.root / "recs" / name, self.ids[config or name.split(".")[0]], mode, outcomes)

    def scratch(self) -> Ctx:
        self.n += 1
        return Ctx(self.root / f"s{self.n}", self.invoke, self.new, self.key, self.ids)

    def save(self, doc, name="forged.json") -> Path:
        p = self.root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(doc if isinstance(doc, str) else json.dumps(doc, indent=2))
        return p


def honest(ctx: Ctx) -> dict:
    """The shared honest reports of a mode."""
    b = ctx.recs("target.jsonl", "target", BASE)
    w2 = ctx.recs("fly-w2.jsonl", "fly", flip(BASE, 2, 2))
    fd = ctx.recs("fly-default.jsonl", "fly", flip(BASE, 40, 0))
    return {
        "both": ctx.gate(b, w2, fd, "--margin", 0.02, out=ctx.root / "both.json"),
        "pass": ctx.gate(b, w2, "--margin", 0.02, out=ctx.root / "pass.json"),
        "margin5": ctx.gate(b, fd, "--margin", 0.5, out=ctx.root / "margin5.json"),
    }


# ------------------------------------------------------------------ editing helpers


def settings(doc):
    return doc["settings"] if "settings" in doc else doc


def cand(doc, name):
    return next(c for c in doc["candidates"] if c["name"] == name)


def set_config_id(entry, cid):
    entry["config_id"] = cid
    if isinstance(entry.get("side"), dict):
        entry["side"]["config_id"] = cid


def make_pass(doc, name):
    """Turn a candidate's verdict into PASS everywhere the reader looks at it."""
    c = cand(doc, name)
    c["verdict"] = "PASS"
    if isinstance(c.get("missing"), dict):
        c["missing"]["verdict_worst_case"] = c["missing"]["verdict_dropped"] = "PASS"
    verdicts = [x["verdict"] for x in doc["candidates"]]
    doc["verdict"] = "FAIL" if "FAIL" in verdicts else "INCONCLUSIVE" if "INCONCLUSIVE" in verdicts else "PASS"
    doc["exit_code"] = {"PASS": 0, "FAIL": 1, "INCONCLUSIVE": 4}[doc["verdict"]]
    return doc


def sign(doc, key):
    """An HMAC-SHA256 over the canonical document (README, "The gate report"), computed here
    independently of qualgate's own code."""
    if "signature" not in doc:
        return doc
    body = {k: v for k, v in doc.items() if k != "signature"}
    blob = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    doc["signature"] = {
        "algorithm": "hmac-sha256",
        "value": hmac.new(key.encode(), blob.encode(), hashlib.sha256).hexdigest(),
    }
    return doc


def age(doc, days, ctx, *, resign=True):
    """The honest report as if written ``days`` ago (its records too), signed then."""
    t = dt.datetime.now(dt.UTC).replace(microsecond=0) - dt.timedelta(days=days)
    doc["created_at"] = t.isoformat().replace("+00:00", "Z")
    for f in (ctx.root / "recs").glob("*.jsonl"):
        os.utime(f, (t.timestamp(), t.timestamp()))
    return sign(doc, ctx.key) if resign and ctx.key else doc


def _now_z(days=0):
    t = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(days=days)
    return t.isoformat().replace("+00:00", "Z")


# ------------------------------------------------------------------ the scenarios


@dataclass(frozen=True)
class Scenario:
    name: str
    make: Callable  #: make(ctx, honest) -> (config, evidence path, extra check args)
    modes: tuple[str, ...] = MODES
    what: str = ""


def _edit(name, what, config, edit, args=(), modes=MODES, source="both"):
    def make(ctx, h):
        doc = edit(copy.deepcopy(h[source]), ctx)
        return config, ctx.save(doc, f"{name}.json"), list(args)

    return Scenario(name, make, modes, what)


def _fresh(name, what, build, modes=MODES):
    """A scenario that writes its own records and honest report first (in a scratch dir)."""

    def make(ctx, h):
        return build(ctx.scratch())

    return Scenario(name, make, modes, what)


def _raw(doc, old, new):
    text = json.dumps(doc, indent=2)
    assert old in text, old
    return text.replace(old, new, 1)


def _dup_verdict(doc, ctx):
    text = json.dumps(doc, indent=2)
    c = cand(doc, "fly-default")
    needle = f'"config_id": "{c["config_id"]}",\n      "mode": "fly",\n      "verdict": "FAIL"'
    assert needle in text
    return text.replace(needle, needle + ',\n      "verdict": "PASS"', 1)


def _copy_first(doc, ctx):
    twin = copy.deepcopy(cand(doc, "fly-w2"))
    set_config_id(twin, ctx.ids["fly-default"])
    twin["name"] = "fly-default"
    doc["candidates"].insert(0, twin)
    return doc


def _seven_keys(doc, ctx):
    return {
        "kind": "qualgate.gate_report",
        "version": doc["version"],
        "created_at": _now_z(),
        "policy": "noninferiority",
        "margin": 0.02,
        "candidates": [{"name": "fly-default", "config_id": ctx.ids["fly-default"], "verdict": "PASS"}],
        "verdict": "PASS",
    }


def _full_shape_by_hand(doc, ctx):
    fake = copy.deepcopy(doc)
    for f in fake["baseline"].get("files", []):
        if isinstance(f, dict):
            f["sha256"], f["path"] = "ab" * 32, "/nowhere/target.jsonl"
    make_pass(fake, "fly-default")
    c = cand(fake, "fly-default")
    for f in c.get("side", {}).get("files", []):
        if isinstance(f, dict):
            f["sha256"], f["path"] = "cd" * 32, "/nowhere/fly.jsonl"
    if "pvalue_holm" in c:
        c["pvalue_holm"], c["pooled"]["pvalue_loss"] = 0.001, 0.9
    fake["created_at"] = _now_z()
    return fake


def _stats_too(doc, ctx):
    make_pass(doc, "fly-default")
    c = cand(doc, "fly-default")
    c["pvalue_holm"], c["pooled"]["pvalue_loss"], c["pooled"]["pvalue_noninferiority"] = 0.001, 0.9, 0.001
    c["loss_upper_bound"] = c["pooled"]["loss_upper_bound"] = 0.01
    return doc


def _swap_ids(doc, ctx):
    a, b = cand(doc, "fly-w2"), cand(doc, "fly-default")
    ida, idb = a["config_id"], b["config_id"]
    set_config_id(a, idb)
    set_config_id(b, ida)
    return doc


def _replace_id(doc, ctx):
    set_config_id(cand(doc, "fly-w2"), ctx.ids["fly-default"])
    return doc


def _margin(value):
    def edit(doc, ctx):
        settings(doc)["margin"] = value
        return doc

    return edit


def _nan_margin(doc, ctx):
    return _raw(doc, '"margin": 0.5', '"margin": NaN')


def _lower(doc, ctx):
    c = cand(doc, "fly-default")
    c["verdict"] = "pass"
    doc["verdict"], doc["exit_code"] = "pass", 0
    return doc


def _old_redated(ctx):
    h = {"pass": _honest_pass(ctx)}
    doc = age(h["pass"], 60, ctx)  # honest, but 60 days old (and signed then)
    doc["created_at"] = _now_z()  # re-dated
    return W2, ctx.save(doc), ["--max-age", "30d"]


def _honest_pass(ctx):
    b = ctx.recs("target.jsonl", "target", BASE)
    w2 = ctx.recs("fly-w2.jsonl", "fly", flip(BASE, 2, 2))
    return ctx.gate(b, w2, "--margin", 0.02, out=ctx.root / "honest.json")


def _old_default(ctx):
    doc = age(_honest_pass(ctx), 400, ctx)
    return W2, ctx.save(doc), []


def _future(doc, ctx):
    doc["created_at"] = _now_z(days=2)
    return sign(doc, ctx.key) if ctx.key else doc


def _records_rewritten(ctx):
    """An honest PASS, then the candidate's records replaced by a lossy run's."""
    doc = _honest_pass(ctx)
    ctx.recs("fly-w2.jsonl", "fly", flip(BASE, 40, 0))
    return W2, ctx.save(doc), []


def _records_and_digests_rewritten(ctx):
    """As above, with the report's digest of the rewritten file updated to match."""
    config, path, args = _records_rewritten(ctx)
    doc = json.loads(path.read_text())
    side = cand(doc, "fly-w2").get("side", {})
    for f in side.get("files", []):
        if isinstance(f, dict):
            f["sha256"] = hashlib.sha256(Path(f["path"]).read_bytes()).hexdigest()
    return config, ctx.save(doc), args


def _relabelled_baseline(ctx):
    # the baseline ran FLy (its config id says so) but its records say mode: target
    b = ctx.recs("lossy.jsonl", "target", BASE, config="fly-default")
    w2 = ctx.recs("fly-w2.jsonl", "fly", flip(BASE, 2, 2))
    ctx.gate(b, w2, "--margin", 0.02, out=ctx.root / "relabelled.json", baseline_config=None)
    return W2, ctx.root / "relabelled.json", []


def _lossy_baseline_config_edited(ctx, *, both):
    b = ctx.recs("lossy.jsonl", "fly", BASE, config="fly-default")
    w2 = ctx.recs("fly-w2.jsonl", "fly", flip(BASE, 2, 2))
    doc = ctx.gate(b, w2, "--margin", 0.02, out=ctx.root / "lossy.json", baseline_config=DEFAULT)
    doc["baseline"]["mode"] = "target"
    if "config" in doc["baseline"]:
        from qualgate.config.decoding import load_config
        from qualgate.evidence.gate_report import describe_config

        t = load_config(DATA / "target.decoding.yaml")
        doc["baseline"]["config"] = describe_config(t.model, t.speculative, {"dtype": "bfloat16"})
    if both:
        doc["baseline"]["config_id"] = ctx.ids["target"]
    return W2, ctx.save(doc), []


def _alpha(ctx):
    b = ctx.recs("target.jsonl", "target", BASE[:100])
    w2 = ctx.recs("fly-w2.jsonl", "fly", BASE[:100])
    doc = ctx.gate(b, w2, "--margin", 0.02, "--alpha", 0.45, out=ctx.root / "alpha.json")
    assert doc["verdict"] == "PASS"  # only because of alpha: at 0.05 it is INCONCLUSIVE
    return W2, ctx.root / "alpha.json", []


def _hidden_losses(how):
    def build(ctx):
        b = ctx.recs("target.jsonl", "target", BASE)
        out = ["correct" if ok else "incorrect" for ok in BASE]
        for i in LOST[:26]:  # 26 of the 40 lost answers
            out[i] = "error" if how == "error" else None
        for i in LOST[26:]:
            out[i] = "incorrect"
        fd = ctx.recs("fly-default.jsonl", "fly", out)
        args = ["--max-errors", 30] if how == "error" else ["--on-missing", "drop"]
        ctx.gate(b, fd, "--margin", 0.05, *args, out=ctx.root / "hidden.json")
        return DEFAULT, ctx.root / "hidden.json", ["--max-margin", 0.05]

    return build


def _hidden_losses_declared_drop(ctx):
    b = ctx.recs("target.jsonl", "target", BASE)
    out = ["correct" if ok else "incorrect" for ok in BASE]
    for i in LOST[:26]:
        out[i] = "error"
    for i in LOST[26:]:
        out[i] = "incorrect"
    fd = ctx.recs("fly-default.jsonl", "fly", out)
    extra = ["--missing", "drop"] if ctx.new else []
    ctx.gate(b, fd, "--margin", 0.05, "--max-errors", 30, *extra, out=ctx.root / "drop.json")
    return DEFAULT, ctx.root / "drop.json", ["--max-margin", 0.05]


def _hidden_losses_relabelled(ctx):
    config, path, args = _hidden_losses_declared_drop(ctx)
    doc = json.loads(path.read_text())
    if "settings" in doc:
        doc["settings"]["missing"] = "worst-case"
        cand(doc, "fly-default")["missing"]["verdict_worst_case"] = "PASS"
    return config, ctx.save(doc), args


def _copied_signature(doc, ctx):
    other = ctx.root / "pass.json"
    make_pass(doc, "fly-default")
    doc["signature"] = json.loads(other.read_text()).get("signature")
    return doc


def _wrong_key(doc, ctx):
    return sign(make_pass(doc, "fly-default"), "the-forgers-own-key")


def _exit_only(doc, ctx):
    doc["verdict"], doc["exit_code"] = "PASS", 0
    return doc


def _downgrade(doc, ctx):
    make_pass(doc, "fly-default")
    doc["version"] = 1
    for k in ("settings", "design", "plan", "signature"):
        doc.pop(k, None)
    doc.update({"policy": "noninferiority", "margin": 0.02, "alpha": 0.05})
    return doc


def _sequential(ctx):
    b = ctx.recs("target.jsonl", "target", BASE)
    fd = ctx.recs("fly-default.jsonl", "fly", flip(BASE, 40, 0))
    doc = ctx.gate(b, fd, "--margin", 0.02, "--sequential", "--order", "records", out=ctx.root / "seq.json")
    make_pass(doc, "fly-default")
    return DEFAULT, ctx.save(doc), []


def _infinity(doc, ctx):
    make_pass(doc, "fly-default")
    return _raw(doc, '"loss_upper_bound": ', '"loss_upper_bound": -Infinity, "x": ')


def _baseline_is_candidate(ctx):
    b = ctx.recs("lossy.jsonl", "fly", BASE, config="fly-default")
    w2 = ctx.recs("fly-w2.jsonl", "fly", flip(BASE, 2, 2))
    ctx.gate(b, w2, "--margin", 0.02, out=ctx.root / "lossy.json", baseline_config=DEFAULT)
    return DEFAULT, ctx.root / "lossy.json", []


def _gone(doc, ctx):
    make_pass(doc, "fly-default")
    c = cand(doc, "fly-default")
    if "side" in c and isinstance(c["side"].get("files", [None])[0], dict):
        c["side"]["files"][0]["path"] = "/nowhere/fly-default.jsonl"
    return doc


SCENARIOS = [
    _edit(
        "verdict-fail-to-pass",
        "a FAIL edited to PASS (verdict, exit code, missingness verdicts)",
        DEFAULT,
        lambda d, c: make_pass(d, "fly-default"),
    ),
    _edit(
        "verdict-only",
        "only the candidate's verdict edited",
        DEFAULT,
        lambda d, c: (cand(d, "fly-default").update(verdict="PASS"), d)[1],
    ),
    _edit("verdict-and-statistics", "verdict, p-values and bound edited to agree with each other", DEFAULT, _stats_too),
    _edit("config-ids-swapped", "the PASS candidate's config id swapped with the FAIL one's", DEFAULT, _swap_ids),
    _edit(
        "config-id-replaced",
        "another config's PASS relabelled with this config's id",
        DEFAULT,
        _replace_id,
        source="pass",
    ),
    _edit("seven-key-json", "a hand-written 7-key JSON", DEFAULT, _seven_keys),
    _edit(
        "full-shape-by-hand",
        "a hand-written report of the full shape with invented digests",
        DEFAULT,
        _full_shape_by_hand,
    ),
    _fresh("re-dated", "a 60-day-old PASS re-dated to pass --max-age 30d", _old_redated),
    _fresh("any-age-by-default", "a 400-day-old PASS, checked without --max-age", _old_default),
    _edit("future-dated", "created_at two days ahead", W2, _future, source="pass"),
    _edit("margin-edited", "margin 0.5 edited to 0.01", DEFAULT, _margin(0.01), source="margin5"),
    _edit("margin-nan", "margin NaN", DEFAULT, _nan_margin, source="margin5"),
    _edit("margin-negative", "margin -1", DEFAULT, _margin(-1), source="margin5"),
    _edit("margin-string", 'margin "0.01" as a string', DEFAULT, _margin("0.01"), source="margin5"),
    _edit(
        "any-margin-by-default",
        "an honest PASS at a 50-point margin, checked without --max-margin",
        DEFAULT,
        lambda d, c: d,
        source="margin5",
    ),
    _fresh("loose-alpha", "an honest PASS at alpha 0.45 (INCONCLUSIVE at 0.05)", _alpha),
    _edit("lower-case-verdict", '"pass" in lower case', DEFAULT, _lower),
    _edit("pass-copy-first", "a PASS copy of the candidate inserted first", DEFAULT, _copy_first),
    _edit("duplicate-verdict-key", '"verdict": "FAIL", "verdict": "PASS" in one object', DEFAULT, _dup_verdict),
    _fresh(
        "records-rewritten",
        "the candidate's records replaced by a lossy run's after the report",
        _records_rewritten,
        modes=("records",),
    ),
    _fresh(
        "records-and-digests-rewritten",
        "as above, and the report's digest updated to match",
        _records_and_digests_rewritten,
        modes=("records",),
    ),
    _edit("record-path-redirected", "the candidate's record path pointed elsewhere, verdict edited", DEFAULT, _gone),
    _fresh("relabelled-baseline", "a FLy baseline whose records say mode: target", _relabelled_baseline),
    _fresh(
        "baseline-config-edited",
        "a FLy baseline's stated config replaced by the target's",
        lambda ctx: _lossy_baseline_config_edited(ctx, both=False),
    ),
    _fresh(
        "baseline-id-and-config-edited",
        "a FLy baseline's config id and config replaced by the target's",
        lambda ctx: _lossy_baseline_config_edited(ctx, both=True),
    ),
    _fresh("baseline-is-the-config", "the served config is the report's (lossy) baseline", _baseline_is_candidate),
    _fresh("losses-as-errors", "26 lost pairs recorded as error, --max-errors 30", _hidden_losses("error")),
    _fresh("losses-dropped", "26 lost pairs missing, --on-missing drop", _hidden_losses("drop")),
    _fresh(
        "losses-dropped-by-option", "26 lost pairs as error, gated with --missing drop", _hidden_losses_declared_drop
    ),
    _fresh("missingness-relabelled", "a --missing drop report relabelled worst-case", _hidden_losses_relabelled),
    _edit("signature-copied", "a PASS edited in, another report's signature copied", DEFAULT, _copied_signature),
    _edit("signed-with-own-key", "a PASS edited in and signed with the forger's key", DEFAULT, _wrong_key),
    _edit("overall-verdict-only", "top-level verdict and exit code edited, candidate FAIL", DEFAULT, _exit_only),
    _edit("downgraded-version", "a PASS edited in and the report rewritten as version 1", DEFAULT, _downgrade),
    _fresh("sequential-verdict", "a sequential FAIL edited to PASS", _sequential),
    _edit("infinity-token", "-Infinity and an unknown key in the candidate", DEFAULT, _infinity),
]


# ------------------------------------------------------------------ running them


def hide_records(root: Path):
    for d in sorted(root.rglob("recs")):
        if d.is_dir():
            d.rename(d.with_name("recs-away"))


def check_args(config, evidence, args, mode):
    return ["check", "--vllm-version", "0.33.0", str(config), "--evidence", str(evidence), *map(str, args)] + (
        ["--trust-unsigned"] if mode == "trust-unsigned" else []
    )


def run_mode(root: Path, invoke, mode: str, *, new: bool = True, only=None):
    """``[(scenario, exit code, output)]`` for one mode."""
    key = KEY if mode == "signed" else None
    ctx = Ctx(root, invoke, new, key)
    h = honest(ctx)
    out = []
    for s in SCENARIOS:
        as_mode = "unsigned" if mode == "trust-unsigned" else mode
        if (only and s.name not in only) or (as_mode in MODES and as_mode not in s.modes):
            continue
        config, evidence, args = s.make(ctx, h)
        if mode not in ("records", "before"):
            hide_records(root)
        env = {KEY_ENV: KEY} if mode == "signed" else {}
        code, text = invoke(check_args(config, evidence, args, mode), env)
        out.append((s, code, text))
        if mode not in ("records", "before"):  # bring the shared records back for the next one
            for d in sorted(root.rglob("recs-away")):
                d.rename(d.with_name("recs"))
    return out


def subprocess_invoke(pythonpath):
    def invoke(args, env):
        full = {k: v for k, v in os.environ.items() if k not in (KEY_ENV, "GITHUB_STEP_SUMMARY")}
        full.update(env, PYTHONPATH=str(pythonpath))
        r = subprocess.run([sys.executable, "-m", "qualgate", *args], capture_output=True, text=True, env=full)
        return r.returncode, r.stdout + r.stderr

    return invoke


def in_process_invoke():
    from click.testing import CliRunner

    from qualgate.cli import cli

    def invoke(args, env):
        r = CliRunner(env={KEY_ENV: None, "GITHUB_STEP_SUMMARY": None, **env}).invoke(cli, list(map(str, args)))
        if r.exception is not None and not isinstance(r.exception, SystemExit):  # a traceback
            raise r.exception
        return r.exit_code, r.output

    return invoke


def main(argv=None):
    import argparse
    import tempfile

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pythonpath", default=str(Path(__file__).resolve().parents[2]))
    ap.add_argument(
        "--modes", default="before", help="comma list of " + ", ".join((*MODES, "trust-unsigned", "before"))
    )
    ap.add_argument("--in-process", action="store_true", help="run the qualgate importable here, in this process")
    a = ap.parse_args(argv)
    invoke = in_process_invoke() if a.in_process else subprocess_invoke(a.pythonpath)
    results = {}
    for mode in a.modes.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            results[mode] = {s.name: code for s, code, _ in run_mode(Path(tmp), invoke, mode, new=mode != "before")}
    modes = list(results)
    print("| scenario | " + " | ".join(modes) + " |")
    print("| --- |" + " :-: |" * len(modes))
    for s in SCENARIOS:
        cells = []
        for m in modes:
            code = results[m].get(s.name)
            cells.append("—" if code is None else ("**accepted**" if code == 0 else f"refused ({code})"))
        print(f"| {s.name}: {s.what} | " + " | ".join(cells) + " |")
    for m in modes:
        tried = len(results[m])
        print(f"{m}: {tried} tried, {sum(c == 0 for c in results[m].values())} accepted")


if __name__ == "__main__":
    sys.path.insert(0, sys.argv[sys.argv.index("--pythonpath") + 1] if "--pythonpath" in sys.argv else ".")
    main()
