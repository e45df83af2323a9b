"""``qualgate sweep``: the fastest setting that provably loses less than the margin.

A *grid* varies speculative keys of one config of a plan (FLy's window, entropy threshold
and top-k, the number of speculative tokens, ...)::

    base: fly-w2                       # a config of the plan; its other settings are kept
    grid:                              # speculative keys -> values, least aggressive first
      fly_entropy_threshold: [0.6, 0.3, 0.1, 0.0]
      fly_window_size: [6, 4, 2, 1]
    order: declared                    # or: acceptance (a pilot orders them; see below)
    pilot_questions: 50                # with order: acceptance

Every grid point becomes a decoding config validated by the same rules as a config file
(:func:`qualgate.config.decoding.parse_config`). The candidates are then tested as a **fixed
sequence** (Maurer, Hothorn & Lehmacher 1995; Westfall & Krishen 2001; the simplest
graphical procedure of Bretz et al. 2009, all weight passed on to the next hypothesis): in
order, each with the sequential non-inferiority gate (:mod:`qualgate.verdict.sequential`) at the full
``alpha``, stopping at the first that does not PASS. Whatever the true losses, the chance of
declaring *any* config with a loss of at least the margin non-inferior stays below ``alpha``:
a false PASS needs the first such config in the order to pass its own level-``alpha`` test
(``benchmarks/sweep_fwer.py`` checks it by simulation). The order must not depend on the test
data; it is either the grid's declared order (the product of the value lists, first key
outermost) or, with ``order: acceptance``, the mean acceptance length measured on a pilot
of ``pilot_questions`` questions that the tests never use (the last ones of the seeded
order), lowest first: fewer accepted draft tokens, fewer deferrals, less risk.

Clear failures stop early (the sequential gate), and the candidates after the first
non-PASS are never run. The configs that passed are then timed against the baseline in
interleaved rounds (:mod:`qualgate.run.speed`); the chosen config is the fastest of them (by the
median speed-up). The result holds the Pareto frontier (speed-up against the loss upper bound)
of the tested candidates, and the questions and engine time spent against running every grid
point at the full question count.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qualgate.config.decoding import Plan, load_yaml, parse_config
from qualgate.errors import DataError, ExitCode
from qualgate.evidence.contract import Verdict
from qualgate.formatting import fmt_pct, fmt_points, markdown_table, text_table, write_atomic
from qualgate.records.yaml_schema import Choice, Field, Int, ListOf, Where
from qualgate.records.yaml_schema import Mapping as Schema

__all__ = ["Grid", "SweepResult", "expand_grid", "load_grid", "render_markdown", "render_text", "run_sweep"]

GRID_KEYS = ("base", "grid", "order", "pilot_questions")
ORDERS = ("declared", "acceptance")


@dataclass(frozen=True)
class Grid:
    """A validated grid (see the module docstring)."""

    base: str
    axes: tuple[tuple[str, tuple], ...]
    order: str = "declared"
    pilot_questions: int = 50
    path: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "base": self.base,
            "grid": {k: list(v) for k, v in self.axes},
            "order": self.order,
            "pilot_questions": self.pilot_questions,
            "path": self.path,
        }


_GRID_MESSAGE = "a non-empty mapping of speculative key -> list of values"
_GRID = Schema(
    {
        "base": Field(),  # a candidate of the plan (load_grid)
        "grid": Field(
            Schema(
                values=ListOf(empty=False, unique=True, message="a non-empty list of values"),
                empty=False,
                message=_GRID_MESSAGE,
            ),
            required=True,
            null=True,
            missing=_GRID_MESSAGE,
        ),
        "order": Field(Choice(ORDERS), default="declared"),
        "pilot_questions": Field(Int(min=1, message="must be a positive integer"), default=50),
    },
    message="a grid is a mapping with base, grid, order, pilot_questions",
    unknown=f"unknown key; a grid has {list(GRID_KEYS)}",
    unknown_value=False,
)


def load_grid(path: str | Path, plan: Plan) -> Grid:
    """Read and validate a grid file against ``plan`` (:class:`DataError` naming the key)."""
    where = str(path)
    candidates = sorted(set(plan.configs) - {plan.baseline})
    named = f"must name a candidate config of the plan {candidates}"
    base_field = Field(Choice(tuple(candidates), message=named), required=True, missing=named)
    data = dataclasses.replace(_GRID, fields={**_GRID.fields, "base": base_field}).check(load_yaml(path), Where(where))
    base = data["base"]
    if plan.configs[base].speculative is None:
        raise DataError("the base config has no speculative block to vary", file=where, field="base", value=base)
    axes = tuple((str(key), tuple(values)) for key, values in data["grid"].items())
    result = Grid(base, axes, data["order"], data["pilot_questions"], where)
    expand_grid(result, plan)  # every point must be a valid config
    return result


def _label(key: str, value) -> str:
    short = {
        "fly_window_size": "W",
        "fly_entropy_threshold": "tau",
        "fly_entropy_top_k": "topk",
        "num_speculative_tokens": "K",
    }.get(key, key)
    return f"{short}{value}"


def expand_grid(grid: Grid, plan: Plan) -> dict:
    """name -> :class:`~qualgate.config.decoding.DecodingConfig` for every grid point, in declared order.

    Each point is the base config with its speculative keys replaced, re-validated as a config
    file would be; a point the rules refuse is a :class:`DataError` naming the point.
    """
    base = plan.configs[grid.base]
    keys = [k for k, _ in grid.axes]
    out = {}
    for values in itertools.product(*(v for _, v in grid.axes)):
        name = f"{grid.base}-" + "-".join(_label(k, v) for k, v in zip(keys, values))
        spec = {**base.speculative, **dict(zip(keys, values))}
        if "fly_window_size" not in dict(zip(keys, values)) and "num_speculative_tokens" in keys:
            spec.pop("fly_window_size", None)  # let vLLM's default min(6, K - 1) follow K
        raw = {
            "name": name,
            "engine": base.engine,
            "model": base.model,
            "speculative": spec,
            "sampling": base.sampling,
            "engine_options": base.engine_options,
        }
        try:
            cfg = parse_config(raw, path=grid.path, name=name)
        except DataError as exc:
            raise DataError(
                f"grid point {dict(zip(keys, values))} is not a valid config: {exc}", file=grid.path, field="grid"
            ) from None
        out[name] = dataclasses.replace(cfg, path=base.path)
    ids = [c.config_id for c in out.values()]
    if len(set(ids)) != len(ids):
        raise DataError(
            "two grid points resolve to the same config (a value equal to a default?)", file=grid.path, field="grid"
        )
    return out


@dataclass(frozen=True)
class SweepResult:
    """What :func:`run_sweep` found (see the module docstring)."""

    out: str
    grid: Grid
    order: tuple[str, ...]  #: the tested sequence, in order
    pilot: dict[str, Any] | None  #: name -> mean acceptance length (order: acceptance)
    rows: tuple[dict, ...]  #: per tested candidate: verdict, loss bound, speed-up, ...
    not_run: tuple[str, ...]
    chosen: str | None
    frontier: tuple[str, ...]
    cost: dict[str, Any]
    margin: float
    alpha: float
    #: with ``discordance_from``: the pilot's discordance and the questions a fixed design needs
    sizing: dict[str, Any] | None = None

    @property
    def exit_code(self) -> int:
        return int(ExitCode.OK if self.chosen else ExitCode.FAIL)

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["grid"] = self.grid.to_dict()
        return {"kind": "qualgate.sweep_report", "version": 1, **out, "exit_code": self.exit_code}


def _pilot_order(plan: Plan, names, work, pilot_questions, per_question, backend_factory, log, progress=None):
    """Mean acceptance length of each candidate on the pilot questions (then discarded)."""
    import contextlib

    from qualgate.run.speed import batch_generator

    items = work[-pilot_questions * per_question :]
    acceptance = {}
    for name in names:
        cfg = plan.configs[name]
        with (
            backend_factory(cfg) as backend,
            progress(f"pilot {name}", len(items)) if progress else contextlib.nullcontext() as bar,
        ):
            generate = batch_generator(cfg, backend)
            size = max(1, int(backend.batch_size))
            gens = []
            for start in range(0, len(items), size):  # (a batch at a time, for the progress)
                gens += generate(items[start : start + size])
                if bar is not None:
                    bar.update(len(items[start : start + size]))
        steps = sum(g.spec_steps or 0 for g in gens)
        accepted = sum(g.accepted_tokens or 0 for g in gens)
        acceptance[name] = 1 + accepted / steps if steps else 1.0
        log(f"pilot {name}: mean acceptance length {acceptance[name]:.3f}")
    return acceptance


def _frontier(rows) -> tuple[str, ...]:
    """Tested candidates no other beats on both speed-up (higher) and loss bound (lower)."""
    pts = [r for r in rows if r.get("speedup") is not None]
    keep = []
    for r in pts:
        if not any(
            o is not r
            and o["speedup"] >= r["speedup"]
            and o["loss_upper_bound"] <= r["loss_upper_bound"]
            and (o["speedup"] > r["speedup"] or o["loss_upper_bound"] < r["loss_upper_bound"])
            for o in pts
        ):
            keep.append(r["name"])
    return tuple(sorted(keep, key=lambda n: next(r["speedup"] for r in pts if r["name"] == n)))


def run_sweep(
    plan: Plan,
    grid: Grid,
    out: str | Path,
    *,
    batch_questions: int = 100,
    max_questions: int | None = None,
    power: float = 0.8,
    order_seed: int = 0,
    speed=None,
    backend_factory=None,
    progress=None,
    log=None,
    resume: bool = False,
    discordance_from=None,
) -> SweepResult:
    """Run the sweep into ``out`` (a run directory: ``qualgate report`` reads it too).

    Writes the records and manifest as ``qualgate run`` does, ``gate.json`` (the sequential
    report of the tested sequence, ``multiplicity: fixed-sequence``), ``sweep.json`` (the
    :class:`SweepResult`) and ``chosen.yaml`` (the chosen config, which ``qualgate check``
    resolves to the config id that ``gate.json`` holds evidence for).

    ``discordance_from``: a :class:`qualgate.verdict.calibration.PilotDiscordance` (a pilot or a
    stored A/A run of the design, e.g. FLy against standard): the sweep states the questions a
    fixed design needs at that discordance (the plan's margin and alpha, ``power``) and warns,
    before any decoding, when its question budget is smaller.
    """
    import yaml

    from qualgate.backends import open_backend
    from qualgate.run.runner import load_suites, run_plan, work_items
    from qualgate.run.sequential import SequentialSettings
    from qualgate.run.speed import SpeedSettings, measure_speed

    # the pilot and the speed rounds time one engine per config; the runs may spread over GPUs
    run_factory = {"backend_factory": backend_factory} if backend_factory else {}
    backend_factory = backend_factory or open_backend
    log = log or (lambda msg: None)
    out = Path(out)
    points = expand_grid(grid, plan)
    suites = load_suites(plan)
    work = work_items(suites, plan.seeds, plan.samples, order_seed=order_seed)
    per_question = len(plan.seeds) * plan.samples
    available = len(work) // per_question
    pilot = None
    names = list(points)
    test_questions = available if max_questions is None else min(available, max_questions)
    full = dataclasses.replace(
        plan, configs={plan.baseline: plan.configs[plan.baseline], **points}, candidates=tuple(names)
    )
    if grid.order == "acceptance":
        if grid.pilot_questions >= available:
            raise DataError(
                f"the pilot needs fewer questions than the plan has ({available})",
                file=grid.path,
                field="pilot_questions",
                value=grid.pilot_questions,
            )
        test_questions = min(test_questions, available - grid.pilot_questions)
        pilot = _pilot_order(full, names, work, grid.pilot_questions, per_question, backend_factory, log, progress)
        names.sort(key=lambda n: pilot[n])
        full = dataclasses.replace(full, candidates=tuple(names))
    sizing = None
    if discordance_from is not None:
        from qualgate.stats import noninferiority_sample_size

        pairs = noninferiority_sample_size(plan.margin, discordance_from.value, alpha=plan.alpha, power=power).n
        needed = discordance_from.questions_for(pairs)
        sizing = discordance_from.to_dict() | {"pairs_needed": pairs, "questions_needed": needed}
        log(f"{discordance_from.describe()}: a fixed design needs {needed:,} questions at power {power:g}")
        if test_questions < needed:
            log(
                f"warning: the sweep tests each point on at most {test_questions:,} questions, fewer than the "
                f"{needed:,} needed: expect INCONCLUSIVE verdicts (a larger plan, or a design with smaller discordance)"
            )
    settings = SequentialSettings(batch_questions, test_questions, power, multiplicity="fixed-sequence")
    result = run_plan(
        full,
        out,
        resume=resume,
        suites=suites,
        progress=progress,
        log=log,
        sequential=settings,
        order_seed=order_seed,
        **run_factory,
    )
    manifest = result.manifest
    if result.gate is None:
        raise DataError(f"the gate refused the records: {manifest['gate'].get('message')}", file=str(out))
    comparisons = {c.name: c for c in result.gate.comparisons}
    tested = [n for n in names if n in comparisons]
    passed = [n for n in tested if comparisons[n].verdict is Verdict.PASS]
    speeds = {}
    if passed:
        speed = speed or SpeedSettings()
        manifest["speed"] = measure_speed(
            full,
            work[: test_questions * per_question],
            speed,
            names=passed,
            backend_factory=backend_factory,
            log=log,
            progress=progress,
        )
        speeds = manifest["speed"]["results"]
    rows = []
    for n in tested:
        c, s = comparisons[n], speeds.get(n, {})
        tput = manifest["configs"][n]["throughput"]
        rows.append(
            {
                "name": n,
                "config_id": points[n].config_id,
                "settings": {k: points[n].speculative.get(k) for k, _ in grid.axes},
                "verdict": c.verdict,
                "stopped_by": c.result.reason,
                "questions_used": c.result.n_questions,
                "loss": c.result.loss,
                "loss_upper_bound": c.result.upper_bound,
                "speedup": s.get("speedup"),
                "speedup_ci": s.get("confidence_interval"),
                "speed_warning": s.get("warning"),
                "engine_s": tput["engine_s"],
                "requests": tput["requests"],
                "acceptance": pilot.get(n) if pilot else None,
            }
        )
    chosen = max(passed, key=lambda n: speeds[n]["speedup"]) if passed else None
    cost = _cost(manifest, plan.baseline, rows, names, test_questions, per_question)
    sweep = SweepResult(
        str(out),
        grid,
        tuple(tested),
        pilot,
        tuple(rows),
        tuple(n for n in names if n not in tested),
        chosen,
        _frontier(rows),
        cost,
        plan.margin,
        plan.alpha,
        sizing,
    )
    from qualgate.run.manifest import write_json_atomic

    write_json_atomic(out / "manifest.json", manifest)
    write_json_atomic(out / "sweep.json", sweep.to_dict())
    if chosen:
        cfg = points[chosen]
        doc = {
            "name": chosen,
            "engine": cfg.engine,
            "model": cfg.model,
            "speculative": cfg.speculative,
            "sampling": cfg.sampling,
            "engine_options": cfg.engine_options,
        }
        header = (
            f"# chosen by qualgate sweep {manifest['run_id']}: the fastest config of the sweep that passed "
            f"the non-inferiority gate (margin {fmt_points(plan.margin)} points); evidence: gate.json\n"
            "# model paths are written as in the base config (relative ones to its folder), since the\n"
            "# config id that binds the evidence is computed from them as written\n"
        )
        write_atomic(out / "chosen.yaml", header + yaml.safe_dump(doc, sort_keys=False))
    return sweep


def _cost(manifest, baseline, rows, names, test_questions, per_question) -> dict[str, Any]:
    """Questions and engine seconds spent, against every grid point at ``test_questions``."""
    configs = manifest["configs"]
    spent_q = sum(r["questions_used"] for r in rows)
    base = configs[baseline]["throughput"]
    per_request = [r["engine_s"] / r["requests"] for r in rows if r["requests"]]
    mean_per_request = sum(per_request) / len(per_request) if per_request else 0.0
    requests_full = test_questions * per_question
    fixed_s = base["engine_s"] / max(1, base["requests"]) * requests_full
    for n in names:
        t = configs[n]["throughput"]
        fixed_s += (t["engine_s"] / t["requests"] if t["requests"] else mean_per_request) * requests_full
    spent_s = base["engine_s"] + sum(r["engine_s"] for r in rows)
    return {
        "questions_spent": spent_q,
        "questions_fixed": test_questions * len(names),
        "engine_s_spent": spent_s,
        "engine_s_fixed_estimate": fixed_s,
        "baseline_questions": base["requests"] // per_question,
    }


def _table(r: SweepResult) -> tuple[list[str], list[list[str]]]:
    headers = ["#", "candidate", "verdict", "questions", "loss UB (pts)", "speed-up [CI]", "frontier"]
    rows = []
    for i, row in enumerate(r.rows, 1):
        ci = row["speedup_ci"]
        speed = (
            "—"
            if row["speedup"] is None
            else (f"{row['speedup']:.2f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""))
        )
        mark = "chosen" if row["name"] == r.chosen else ("yes" if row["name"] in r.frontier else "")
        rows.append(
            [
                str(i),
                row["name"],
                row["verdict"],
                f"{row['questions_used']:,}",
                fmt_points(row["loss_upper_bound"]),
                speed,
                mark,
            ]
        )
    return headers, rows


def _summary(r: SweepResult) -> list[str]:
    c = r.cost
    out = [
        f"qualgate sweep: {len(r.rows) + len(r.not_run)} grid points of {r.grid.base}, fixed-sequence "
        f"non-inferiority at margin {fmt_points(r.margin)} points, alpha {r.alpha:g} (order: {r.grid.order})"
    ]
    out.append(
        f"chosen: {r.chosen}" if r.chosen else "chosen: none passes (the first candidate of the sequence did not PASS)"
    )
    row = next((x for x in r.rows if x["name"] == r.chosen), None)
    if row and row["speedup_ci"] and row["speedup_ci"][1] < 1:
        out.append(
            f"note: {r.chosen} passes but is slower than the baseline (speed-up {row['speedup']:.2f}, interval "
            f"up to {row['speedup_ci'][1]:.2f}): no config of this grid buys speed on this engine"
        )
    if r.not_run:
        out.append(f"not run (after the first non-PASS the sequence stops): {', '.join(r.not_run)}")
    if r.sizing:
        out.append(
            f"sizing: discordance {fmt_pct(r.sizing['value'], 2)} from {' and '.join(r.sizing['paths'])}: a fixed "
            f"design needs {r.sizing['questions_needed']:,} questions per point"
        )
    out.append(
        f"cost: {c['questions_spent']:,} candidate questions (+{c['baseline_questions']:,} baseline) against "
        f"{c['questions_fixed']:,} for every grid point at the full count; engine time {c['engine_s_spent']:.1f} s "
        f"against an estimated {c['engine_s_fixed_estimate']:.1f} s"
    )
    return out


def render_text(r: SweepResult) -> str:
    headers, rows = _table(r)
    warnings = [f"warning: {row['name']}: {row['speed_warning']}" for row in r.rows if row.get("speed_warning")]
    return "\n".join(_summary(r) + ["", text_table(rows, headers)] + warnings) + "\n"


def render_markdown(r: SweepResult) -> str:
    headers, rows = _table(r)
    return "\n".join([f"- {line}" for line in _summary(r)] + ["", markdown_table(rows, headers)]) + "\n"
