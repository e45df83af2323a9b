"""docs/ci.md: its workflow parses, and every qualgate command in it exists with those options."""

import re
import shlex
import subprocess

import click
import pytest
import yaml

from qualgate.cli import cli

from support import REPO

DOC = REPO / "docs" / "ci.md"


def blocks(lang):
    return re.findall(rf"^```{lang}\n(.*?)^```", DOC.read_text(), flags=re.S | re.M)


def workflow():
    (text,) = blocks("yaml")
    return yaml.safe_load(text)


def qualgate_commands():
    """Every ``qualgate ...`` invocation in the workflow's run steps and the bash blocks."""
    scripts = [step["run"] for job in workflow()["jobs"].values() for step in job["steps"] if "run" in step]
    scripts += blocks("bash")
    out = []
    for script in scripts:
        script = re.sub(r"\$\{\{.*?\}\}", "EXPR", script)
        for line in script.replace("\\\n", " ").splitlines():
            line = line.split(" #")[0] if not line.lstrip().startswith("#") else ""
            for part in re.split(r"\|\||&&|;|\|", line):
                words = shlex.split(part)
                if words[:1] == ["qualgate"]:
                    out.append(words[1:])
    return out


def test_the_workflow_is_a_github_actions_workflow():
    wf = workflow()
    assert set(wf["jobs"]) == {"lint", "check", "evaluate"}
    assert wf["jobs"]["check"]["needs"] == "lint" and wf["jobs"]["evaluate"]["needs"] == "check"
    # YAML 1.1 reads the key `on` as True
    assert "pull_request" in (wf.get("on") or wf.get(True))


def test_the_workflow_runs_lint_check_run_gate_in_that_order():
    order = [words[0] for words in qualgate_commands()[:5]]
    assert order == ["lint", "check", "run", "gate", "check"]


@pytest.mark.parametrize("words", qualgate_commands(), ids=lambda w: " ".join(w[:2]))
def test_every_command_exists_with_the_options_used(words):
    ctx = click.Context(cli)
    command = cli.get_command(ctx, words[0])
    assert command is not None, f"no command qualgate {words[0]}"
    params = {opt: p for p in command.params if isinstance(p, click.Option) for opt in p.opts + p.secondary_opts}
    args = iter(words[1:])
    for word in args:
        if not word.startswith("-"):
            continue
        name, eq, value = word.partition("=")
        assert name in params, f"qualgate {words[0]} has no option {name}"
        param = params[name]
        if param.is_flag or param.count:
            continue
        value = value if eq else next(args)
        if isinstance(param.type, click.Choice):
            assert value in param.type.choices, f"{name} {value} not in {param.type.choices}"
        elif isinstance(param.type, (click.types.IntParamType, click.types.FloatParamType)):
            param.type.convert(value, param, ctx)


def test_the_exit_code_table_lists_every_code():
    table = DOC.read_text().split("## Exit codes")[1].split("##")[0]
    assert [int(c) for c in re.findall(r"^\| (\d) \|", table, flags=re.M)] == [0, 1, 2, 3, 4]


def test_every_lint_rule_is_documented():
    from qualgate.ci import RULES

    documented = set(re.findall(r"^\| `([a-z-]+)` \|", DOC.read_text().split("## Lint rules")[1], flags=re.M))
    assert documented == set(RULES)


def test_every_job_installs_qualgate_from_the_repository_at_a_pinned_commit():
    wf = workflow()
    spec = wf["env"]["QUALGATE_PIP"]
    assert re.fullmatch(r"git\+https://\S+@[0-9a-f]{40}", spec), spec
    for name, job in wf["jobs"].items():
        installs = [s["run"] for s in job["steps"] if "pip install" in s.get("run", "")]
        assert installs, f"job {name} installs nothing"
        for cmd in installs:
            (requirement,) = shlex.split(cmd)[2:]
            # a direct reference (PEP 508 name @ url), not a name a package index must serve
            assert re.fullmatch(r"qualgate(\[[a-z,]+\])? @ \$QUALGATE_PIP", requirement), cmd


def _git(*args) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True)


def test_the_pinned_commit_has_every_command_and_option_the_workflow_uses():
    """The example pins a commit (a reviewed, immutable ref), which is necessarily older than the
    doc; it is kept honest: a commit of this repository's history whose command line defines every
    ``qualgate`` command and option the doc's workflow and scripts use."""
    pin = workflow()["env"]["QUALGATE_PIP"].rpartition("@")[2]
    if _git("rev-parse", "--git-dir").returncode != 0:
        pytest.skip("not a git checkout: the pinned commit cannot be looked up")
    if _git("rev-parse", "--is-shallow-repository").stdout.strip() == "true":
        pytest.skip("a shallow clone: the pinned commit may be outside its history")
    assert _git("cat-file", "-e", f"{pin}^{{commit}}").returncode == 0, f"docs/ci.md pins {pin}, not a commit here"
    assert _git("merge-base", "--is-ancestor", pin, "HEAD").returncode == 0, f"{pin} is not in HEAD's history"
    used = {(words[0], w.partition("=")[0]) for words in qualgate_commands() for w in words[1:] if w.startswith("--")}
    used |= {(words[0], None) for words in qualgate_commands()}
    missing = []
    for command, option in sorted(used, key=str):
        needle = f'"{option}"' if option else f'"{command}"'
        found = _git("grep", "-q", "-F", "-e", needle, pin, "--", "qualgate/cli", "qualgate/ci").returncode == 0
        if not found and option is None:  # a command named after its function
            found = _git("grep", "-q", "-F", "-e", f"def {command}(", pin, "--", "qualgate/cli").returncode == 0
        if not found:
            missing.append(f"qualgate {command}" + (f" {option}" if option else ""))
    assert not missing, f"docs/ci.md pins {pin[:12]}, whose command line lacks: {', '.join(missing)}"


SERVE = """#!/usr/bin/env bash
exec uv run --with vllm==0.33.0 vllm serve Qwen/Qwen3-8B --port 8000 \\
  --speculative-config '{"method": "draft_model", "model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 8,
  "rejection_sample_method": "fly", "fly_window_size": 2, "fly_entropy_threshold": 0.3, "fly_entropy_top_k": 3}'
"""


@pytest.mark.slow
def test_the_lint_and_check_jobs_steps_run_and_check_refuses_missing_evidence(tmp_path):
    """The lint and check jobs' run steps (after the install), as the runner would run them
    (bash -e, the job's env with the secret set to a test value), on a project whose serving
    config is FLy and which has no evidence yet: lint passes with its FLy warning, check exits 3
    naming the missing evidence (continue-on-error then sends the workflow to evaluate). With
    the secret missing (Actions then sets the variable to ""), check exits 3 naming the key."""
    import os
    import subprocess
    import sys

    (tmp_path / "deploy").mkdir()
    (tmp_path / "deploy" / "serve.sh").write_text(SERVE)
    env = {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}", "NO_COLOR": "1"}
    env.pop("GITHUB_STEP_SUMMARY", None)
    results = {}
    for name in ("lint", "check"):
        job = workflow()["jobs"][name]
        for step in job["steps"]:
            script = step.get("run")
            if script is None or "pip install" in script:
                continue  # actions, and the install (no network here; the package is installed)
            raw_env = {k: str(v) for k, v in (step.get("env") or {}).items()}
            step_env = {k: re.sub(r"\$\{\{ *secrets\..*?\}\}", "a-test-secret", v) for k, v in raw_env.items()}
            step_env = {k: re.sub(r"\$\{\{.*?\}\}", "", v) for k, v in step_env.items()}
            r = subprocess.run(
                ["bash", "-e", "-c", script], cwd=tmp_path, env={**env, **step_env}, capture_output=True, text=True
            )
            results[name] = r
            if name == "check" and "QUALGATE_EVIDENCE_KEY" in raw_env:
                no_secret = {k: re.sub(r"\$\{\{.*?\}\}", "", v) for k, v in raw_env.items()}
                results["no secret"] = subprocess.run(
                    ["bash", "-e", "-c", script], cwd=tmp_path, env={**env, **no_secret}, capture_output=True, text=True
                )
            if not step.get("continue-on-error"):
                assert r.returncode == 0, (name, r.stdout, r.stderr)
    assert "FLy" in results["lint"].stdout + results["lint"].stderr
    assert results["check"].returncode == 3
    assert "evidence/gate.json" in results["check"].stdout + results["check"].stderr
    assert results["no secret"].returncode == 3  # fail closed: a missing secret is no key
    assert "QUALGATE_EVIDENCE_KEY" in results["no secret"].stderr
