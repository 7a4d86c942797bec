"""The GitHub Actions recipe parses, and every xlabench command in it exists with the options it uses."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest
import yaml

from xlabench.cli import main

RECIPE = Path(__file__).resolve().parent.parent / "examples" / "github-actions-tpu.yml"


@pytest.fixture(scope="module")
def workflow() -> dict:
    return yaml.safe_load(RECIPE.read_text())


def _steps(workflow: dict) -> list[dict]:
    (job,) = workflow["jobs"].values()
    return job["steps"]


def _env(workflow: dict) -> dict[str, str]:
    (job,) = workflow["jobs"].values()
    return {**workflow.get("env", {}), **job.get("env", {})}


def _commands(workflow: dict) -> list[tuple[dict, list[str]]]:
    """(step, argv) of every xlabench command line in the workflow, with $VARS from env expanded."""
    env = _env(workflow)
    out = []
    for step in _steps(workflow):
        script = re.sub(r"\\\n\s*", " ", step.get("run", ""))  # join continued lines
        for line in script.splitlines():
            line = line.strip()
            if line.startswith("xlabench "):
                line = re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), m.group(0)), line)
                out.append((step, shlex.split(line)[1:]))
    return out


def _parse(argv: list[str]) -> click.Context:
    cmd = main.get_command(click.Context(main), argv[0])
    assert cmd is not None, f"xlabench has no command {argv[0]!r}"
    if isinstance(cmd, click.Group):  # `xlabench history html ...`: the subcommand parses the rest
        sub = cmd.get_command(click.Context(cmd), argv[1])
        assert sub is not None, f"xlabench {argv[0]} has no command {argv[1]!r}"
        return sub.make_context(argv[1], argv[2:])
    return cmd.make_context(argv[0], argv[1:])  # raises on an unknown option or a bad value


def test_recipe_is_a_workflow_for_a_self_hosted_tpu_runner(workflow):
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as True
    assert "pull_request" in triggers and "workflow_dispatch" in triggers
    (job,) = workflow["jobs"].values()
    assert "self-hosted" in job["runs-on"] and "tpu" in job["runs-on"]


def test_every_xlabench_command_in_the_recipe_exists_with_its_options(workflow):
    commands = _commands(workflow)
    names = [argv[0] for _, argv in commands]
    assert {"info", "validate", "gate", "plot"} <= set(names)
    for _, argv in commands:
        ctx = _parse(argv)
        assert not ctx.args, f"{argv}: unexpected extra arguments {ctx.args}"


def test_gate_runs_against_a_committed_baseline_and_feeds_the_summary_and_artifacts(workflow):
    env = _env(workflow)
    steps = _steps(workflow)
    gates = [(step, _parse(argv)) for step, argv in _commands(workflow) if argv[0] == "gate"]
    regular = [(s, c) for s, c in gates if not c.params["save_baseline"]]
    assert len(regular) == 1
    step, ctx = regular[0]
    assert ctx.params["suite_file"] == env["SUITE"] and Path(env["SUITE"]).parts[0] == "suites"
    assert ctx.params["baseline"] == env["BASELINE"] and Path(env["BASELINE"]).parts[0] == "baselines"
    assert ctx.params["confirm"] is True  # flagged cases are re-run before the job fails
    md, js, out = ctx.params["markdown_path"], ctx.params["json_path"], ctx.params["out_dir"]
    assert md and js
    # the baseline-measuring variant writes the same files, so the later steps serve both
    for _, c in gates:
        assert (c.params["markdown_path"], c.params["json_path"], c.params["out_dir"]) == (md, js, out)

    after = steps[steps.index(step) + 1:]
    summary = [s for s in after if "GITHUB_STEP_SUMMARY" in s.get("run", "")]
    assert summary and md in summary[0]["run"] and summary[0].get("if") == "always()"
    uploads = [s for s in after if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
    paths = uploads[0]["with"]["path"].split()
    assert uploads[0].get("if") == "always()"  # a failed gate still uploads what it measured
    assert f"{out.rstrip('/')}/" in paths and "plots/" in paths and md in paths and js in paths
    plot = [argv for _, argv in _commands(workflow) if argv[0] == "plot"]
    assert plot and ("--out", "plots/") == tuple(plot[0][-2:])
