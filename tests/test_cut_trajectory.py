"""An agent phase cut short keeps its trace: when the agent runs out of time or crashes, every model
call the gateway carried is in the trial's trajectory (the answered ones with their tokens, the one
in progress as it stood) and the trial's usage counts them; the verifier still judges the work."""

import asyncio
import json
from pathlib import Path

import pytest

from envloop.core.ids import new_id
from envloop.core.trajectory import ModelStep
from envloop.core.trial import TrialOutcome, TrialSpec
from envloop.environments import LocalEnvironmentProvider
from envloop.environments.docker.images import BuildRecords
from envloop.environments.docker.provider import DockerEnvironmentProvider
from envloop.environments.local.bwrap import bwrap_executable
from envloop.runners import ShellRunner
from envloop.testing import Received, Reply, ScriptedServer
from envloop.trajectories import read_trajectory
from tests.conftest import make_task
from tests.docker_daemon import docker_daemon

__all__ = ["docker_daemon"]

KEY = "sk-cut-trajectory-9d2a"
HAS_BWRAP = bwrap_executable()[0] is not None
TWO_CALLS = r"""
import json, os, signal, sys, threading, urllib.request
def ask(prompt):
    request = urllib.request.Request(
        os.environ["MODEL_BASE_URL"] + "/chat/completions",
        data=json.dumps({"model": "any", "messages": [{"role": "user", "content": prompt}]}).encode(),
        headers={"Authorization": "Bearer " + os.environ["MODEL_API_KEY"]},
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    return json.load(opener.open(request, timeout=600))["choices"][0]["message"]["content"]
open("done", "w").write(ask("first"))
print("answered", flush=True)
if sys.argv[1] == "crash":
    threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
ask("second")  # answered long after the phase ends
"""


def _reply(received: Received) -> Reply:
    if received.prompt == "first":
        return Reply(text="first answer", input_tokens=120, output_tokens=30)
    return Reply(text="never read", delay_sec=60)


def _run(tmp_path: Path, sandbox: str, how: str, server_url: str) -> TrialOutcome:
    task = make_task(tmp_path / "tasks", "cut", toml="[agent]\ntimeout_sec = 6\n")
    (task / "environment" / "two_calls.py").write_text(TWO_CALLS)
    (task / "environment" / "Dockerfile").write_text(
        "FROM python:3.11-slim\nWORKDIR /app\nCOPY two_calls.py /app/\n"
    )
    spec = TrialSpec(
        job_id="job_cut",
        trial_id=new_id("trl"),
        task_name="cut",
        attempt=1,
        profile_ref="team/p@1",
        runner="envloop/shell@1",
        params={
            "AGENT_NAME": "command",
            "AGENT_COMMAND": f"python3 two_calls.py {how}",
            "MODEL_BASE_URL": server_url,
            "MODEL_API_KEY": KEY,
        },
        secret_values=(KEY,),
        task_dir=task,
        instance_root=tmp_path / "instances",
        artifacts_dir=tmp_path / "artifacts",
    )
    provider = (
        DockerEnvironmentProvider(BuildRecords(tmp_path / "builds"))
        if sandbox == "docker"
        else LocalEnvironmentProvider(sandbox)  # type: ignore[arg-type]
    )
    return asyncio.run(ShellRunner(provider).run(spec))


@pytest.mark.parametrize(
    "sandbox",
    [
        "plain",
        pytest.param("bwrap", marks=pytest.mark.skipif(not HAS_BWRAP, reason="no bwrap here")),
        pytest.param("docker", marks=[pytest.mark.docker, pytest.mark.slow]),
    ],
)
@pytest.mark.parametrize("how", ["timeout", "crash"])
def test_the_calls_of_an_agent_phase_cut_short_are_in_its_trajectory_and_usage(
    tmp_path: Path, sandbox: str, how: str, request: pytest.FixtureRequest
) -> None:
    if sandbox == "docker":
        request.getfixturevalue("docker_daemon")
    with ScriptedServer(default=_reply, api_key=KEY) as server:
        outcome = _run(tmp_path, sandbox, how, server.openai_url)
        asked = [received.prompt for received in server.received]
    assert asked == ["first", "second"]
    assert outcome.error is not None
    if how == "timeout":
        assert (outcome.error.type, outcome.stop_reason) == ("agent_timeout", "timeout")
    else:
        assert outcome.error.type == "agent_error" and outcome.error.exit_code in (137, -9)
    trajectory = read_trajectory(tmp_path / "artifacts" / "trajectory.json")
    first, second = [step for step in trajectory.steps if isinstance(step, ModelStep)]
    assert (first.text, first.usage.input_tokens, first.usage.output_tokens) == ("first answer", 120, 30)
    assert second.text == "" and second.finish_reason in ("agent_disconnected", "session_closed")
    assert (trajectory.usage.input_tokens, trajectory.usage.output_tokens) == (120, 30)
    assert outcome.usage == {"calls": 2, "input_tokens": 120, "output_tokens": 30}, json.dumps(outcome.usage)
    assert trajectory.steps[-1].kind == "verifier" and outcome.reward == 1.0  # the work done was judged
