"""The agent CLIs' examples as a user runs them: each example profile is accepted by `el profile
create` and its params by the shell runner, and `examples/agents/run-local.sh AGENT` runs the agent
against `el model serve` (the bundled SmolLM2) to a verdict whose trial holds model steps."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envloop.runners import ShellRunner
from envloop.runners.params import check_params
from tests.agent_cli_support import shared_agent_cache
from tests.conftest import El

ROOT = Path(__file__).resolve().parent.parent
CLI_AGENTS = ["codex", "opencode", "qwen-code", "mini-swe-agent", "aider"]


@pytest.mark.parametrize("agent", [*CLI_AGENTS, "claude-code"])
def test_each_agents_example_profile_is_accepted_as_written(agent: str, el: El) -> None:
    path = ROOT / "examples" / "profiles" / f"{agent}.json"
    params = json.loads(path.read_text())["spec"]["params"]
    assert params["AGENT_NAME"] == agent
    assert check_params(ShellRunner(), params) == []
    created = el.ok("profile", "create", f"team/{agent}", "1", "--file", str(path), "--json").json()
    assert created["params"]["MODEL_API_KEY"] != params["MODEL_API_KEY"]  # secret: never shown


@pytest.mark.slow
@pytest.mark.timeout(3000)
@pytest.mark.parametrize("agent", CLI_AGENTS)
def test_run_local_runs_the_agent_against_el_model_serve_to_a_verdict(
    agent: str, home: Path, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "ENVLOOP_HOME": str(home),
        "ENVLOOP_AGENT_CACHE": str(shared_agent_cache()),
        "EL": f"{sys.executable} -m envloop",
    }
    done = subprocess.run(
        ["bash", str(ROOT / "examples" / "agents" / "run-local.sh"), agent],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=2900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    el = El(home=home, cwd=tmp_path)
    [job] = el.ok("job", "list", "--json").json()
    [trial] = el.ok("trial", "list", "--job", job["id"], "--json").json()
    assert trial["error_type"] in (None, "model_error"), trial["error_message"]
    got = el.ok("trial", "get", trial["id"], "--steps", "--json").json()
    steps = got["trajectory"]["steps"]
    assert any(step["kind"] == "model" for step in steps), [step["kind"] for step in steps]
    assert steps[-1]["kind"] == "verifier" and trial["reward"] in (0.0, 1.0)
