"""docs/ci.md: its workflow parses, and every qualgate command in it exists with those options."""

import re
import shlex

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
