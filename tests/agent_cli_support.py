"""Running one trial of an agent CLI for real: installed from the package registries into an agent
cache shared by the whole test run (and kept between runs on the same machine, so CI installs each
version once), against a scripted endpoint on the host's loopback (reached with NETWORK=public)."""

import asyncio
import os
import subprocess
from pathlib import Path
from typing import Any

from envloop.agents.cache import CACHE_VARIABLE
from envloop.core.ids import new_id
from envloop.core.trajectory import ModelStep, Trajectory
from envloop.core.trial import TrialOutcome, TrialSpec
from envloop.runners import ShellRunner
from envloop.testing import Received, Reply, ScriptedServer
from envloop.trajectories import read_trajectory
from tests.conftest import make_task

SECRET = "sk-agent-cli-test-5b1e"
MODEL = "team-model/sft"
TEST_CACHE_VARIABLE = "ENVLOOP_TEST_AGENT_CACHE"


SYSTEM_CACHE = Path("/usr/local/lib/envloop-test-agents")
"""Where a root test run keeps its cache: under /usr, which the bubblewrap sandbox shows read-only,
so trials use the installed trees where they are instead of copying them into their memory-backed
disk (the setting an operator would choose until providers mount the cache)."""


def shared_agent_cache() -> Path:
    """The agent cache of every test of the run: ENVLOOP_TEST_AGENT_CACHE, else one that later runs
    on this machine find again (CI installs each version once): under /usr/local when the run may
    write there, else under the user's cache."""
    default = (
        SYSTEM_CACHE
        if os.access(SYSTEM_CACHE.parent, os.W_OK)
        else Path.home() / ".cache" / "envloop-test-agents"
    )
    root = Path(os.environ.get(TEST_CACHE_VARIABLE) or default)
    os.environ[CACHE_VARIABLE] = str(root)
    return root


def run_trial(tmp_path: Path, agent: str, url: str, task: Path | None = None, **extra: str) -> TrialOutcome:
    shared_agent_cache()
    task = task or make_task(tmp_path / "tasks", "hello", solve="touch done")
    params = {
        "AGENT_NAME": agent,
        "MODEL_PROTOCOL": "openai",
        "MODEL_BASE_URL": url,
        "MODEL_NAME": MODEL,
        "MODEL_API_KEY": SECRET,
        "NETWORK": "public",
        **extra,
    }
    spec = TrialSpec(
        job_id="job_cli",
        trial_id=new_id("trl"),
        task_name=task.name,
        attempt=1,
        profile_ref=f"team/{agent}@1",
        runner="envloop/shell@1",
        params={k: v for k, v in params.items() if v},
        secret_values=(SECRET,),
        task_dir=task,
        instance_root=tmp_path / "instances",
        artifacts_dir=tmp_path / "artifacts",
        agent_timeout_sec=600,
    )
    return asyncio.run(ShellRunner().run(spec))


def kept(tmp_path: Path) -> Trajectory:
    return read_trajectory(tmp_path / "artifacts" / "trajectory.json")


def model_steps(tmp_path: Path) -> list[ModelStep]:
    return [step for step in kept(tmp_path).steps if isinstance(step, ModelStep)]


def tool_results(received: Received) -> int:
    """Tool results the conversation holds so far (Chat Completions `tool` messages)."""
    return sum(1 for message in received.messages if message.get("role") == "tool")


def echo(received: Received) -> Reply:
    """What `python -m envloop.testing` answers: the prompt back, no tool call."""
    return Reply(text=received.prompt)


def offers(received: Received, tool: str) -> bool:
    return any((t.get("function") or t).get("name") == tool for t in received.body.get("tools", []))


def assert_nothing_leaked(tmp_path: Path) -> None:
    found = subprocess.run(
        ["grep", "-rl", SECRET, str(tmp_path / "artifacts")], capture_output=True, text=True, check=False
    )
    assert found.stdout == ""


def agent_requests(server: ScriptedServer, tool: str) -> list[Any]:
    """The requests that offered the agent's tool (not a CLI's side requests, such as titles)."""
    return [r for r in server.received if offers(r, tool)]
