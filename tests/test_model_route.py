"""An agent that calls its model from inside its sandbox reaches it through the worker's model
gateway, attacked from inside: the sandbox holds a token of its own trial and never the real key
(not even encoded), the model endpoint itself and the host's other services stay out of reach, every
call is a model step of the trial, and once the agent phase ends the route is gone, so a verifier
cannot use what the agent left behind. Run in the bubblewrap sandbox and in docker alike."""

import asyncio
import base64
import json
import secrets
from pathlib import Path

import pytest

from envloop.core.ids import new_id
from envloop.core.trajectory import ModelStep, ToolStep
from envloop.core.trial import TrialOutcome, TrialSpec
from envloop.environments import LocalEnvironmentProvider
from envloop.environments.docker.images import BuildRecords
from envloop.environments.docker.provider import DockerEnvironmentProvider
from envloop.environments.local.bwrap import bwrap_executable
from envloop.runners import ShellRunner
from envloop.runners.model_route import PRIVATE_UPSTREAM_VARIABLE
from envloop.testing import Reply, ScriptedServer
from envloop.trajectories import read_trajectory
from tests.docker_daemon import docker_daemon
from tests.registries import host_addresses, host_listener

__all__ = ["docker_daemon"]
KEY = "sk-real-upstream-key-7e31c0"
HAS_BWRAP = bwrap_executable()[0] is not None

AGENT = r"""
import base64, json, os, socket, sys, urllib.request
found = {"base_url": os.environ["MODEL_BASE_URL"], "token": os.environ.get("MODEL_API_KEY", "")}
direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
request = urllib.request.Request(
    os.environ["MODEL_BASE_URL"] + "/chat/completions",
    data=json.dumps({"model": "any", "messages": [{"role": "user", "content": "hi"}]}).encode(),
    headers={"Authorization": "Bearer " + found["token"], "Content-Type": "application/json"},
)
found["answer"] = json.load(direct.open(request, timeout=30))["choices"][0]["message"]["content"]
for address, port in json.loads(os.environ["PROBES"]):
    try:
        socket.create_connection((address, port), timeout=3).close()
        found[f"{address}:{port}"] = "REACHED"
    except OSError as exc:
        found[f"{address}:{port}"] = type(exc).__name__
found["environ"] = base64.b64encode(json.dumps(dict(os.environ)).encode()).decode()
open("/tmp/route.json", "w").write(json.dumps(found))
print(json.dumps(found))
"""

VERIFIER = r"""
import json, urllib.request
left = json.load(open("/tmp/route.json"))
request = urllib.request.Request(
    left["base_url"] + "/chat/completions",
    data=json.dumps({"model": "any", "messages": [{"role": "user", "content": "grade me 1"}]}).encode(),
    headers={"Authorization": "Bearer " + left["token"], "Content-Type": "application/json"},
)
try:
    urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=10)
    print("verifier reached the model")
except Exception as exc:
    print("verifier refused:", type(exc).__name__)
open("/logs/verifier/reward.txt", "w").write("1")
"""


def write_task(root: Path) -> Path:
    for sub in ("tests", "solution", "environment"):
        (root / sub).mkdir(parents=True)
    # Closed on purpose (docker's default is Harbor's public): the gateway is the one way out.
    (root / "task.toml").write_text('version = "1.0"\n[environment]\nnetwork_mode = "no-network"\n')
    (root / "instruction.md").write_text("Ask the model.\n")
    (root / "environment" / "agent.py").write_text(AGENT)
    (root / "tests" / "check.py").write_text(VERIFIER)
    (root / "environment" / "Dockerfile").write_text(
        f"FROM python:3.11-slim\nWORKDIR /app\nCOPY agent.py /app/\nLABEL token={secrets.token_hex(8)}\n"
    )
    (root / "tests" / "test.sh").write_text('#!/usr/bin/env bash\npython3 "$(dirname "$0")/check.py"\n')
    return root


def run(tmp_path: Path, environment: str, probes: list[tuple[str, int]], **params: str) -> TrialOutcome:
    task = write_task(tmp_path / "task")
    spec = TrialSpec(
        job_id="job_route",
        trial_id=new_id("trl"),
        task_name="task",
        attempt=1,
        profile_ref="team/p@1",
        runner="envloop/shell@1",
        params={"AGENT_NAME": "command", "AGENT_COMMAND": "python3 agent.py", "PROBES": json.dumps(probes)}
        | params,
        secret_values=(KEY,),
        task_dir=task,
        instance_root=tmp_path / "instances",
        artifacts_dir=tmp_path / "artifacts",
    )
    provider = (
        DockerEnvironmentProvider(BuildRecords(tmp_path / "builds"))
        if environment == "docker"
        else LocalEnvironmentProvider(environment)  # type: ignore[arg-type]
    )
    return asyncio.run(ShellRunner(provider).run(spec))


def agent_found(tmp_path: Path) -> dict[str, str]:
    found: dict[str, str] = json.loads(
        (tmp_path / "artifacts" / "agent" / "stdout.txt").read_text().splitlines()[-1]
    )
    return found


def assert_routed(tmp_path: Path, outcome: TrialOutcome, upstream: ScriptedServer) -> dict[str, str]:
    assert outcome.error is None, outcome.error
    found = agent_found(tmp_path)
    assert found["answer"] == "from the model"
    # The sandbox held a token of its own trial, and the real key in no form.
    environ = base64.b64decode(found["environ"]).decode()
    assert KEY not in environ and base64.b64encode(KEY.encode()).decode() not in environ
    assert found["token"] and found["token"] != KEY
    # The endpoint got the real key and never the token.
    [received] = upstream.received
    assert received.headers["authorization"] == f"Bearer {KEY}"
    assert found["token"] not in json.dumps(received.headers)
    # The call is a model step of the trial, among its tool steps, and counts in its usage.
    trajectory = read_trajectory(tmp_path / "artifacts" / "trajectory.json")
    kinds = [step.kind for step in trajectory.steps]
    assert kinds.count("model") == 1 and kinds[-1] == "verifier"
    [model] = [step for step in trajectory.steps if isinstance(step, ModelStep)]
    assert (model.text, model.http_status) == ("from the model", 200)
    assert any(isinstance(step, ToolStep) for step in trajectory.steps)
    assert outcome.usage["calls"] == 1 and outcome.usage["input_tokens"] > 0
    # What the agent left is of no use to the verifier: the route closed with the agent phase.
    verifier = (tmp_path / "artifacts" / "verifier" / "stdout.txt").read_text()
    assert "verifier refused" in verifier, verifier
    return found


@pytest.mark.skipif(not HAS_BWRAP, reason="bwrap cannot create a sandbox on this host")
@pytest.mark.parametrize("network", ["none", "public"])
def test_in_bwrap_the_agent_reaches_its_model_only_through_the_gateway(tmp_path: Path, network: str) -> None:
    with ScriptedServer(default=lambda _: Reply(text="from the model"), api_key=KEY) as upstream:
        with ScriptedServer() as other:
            probes = [("127.0.0.1", upstream.port), ("127.0.0.1", other.port)]
            outcome = run(
                tmp_path,
                "bwrap",
                probes,
                NETWORK=network,
                MODEL_BASE_URL=upstream.openai_url,
                MODEL_API_KEY=KEY,
            )
        found = assert_routed(tmp_path, outcome, upstream)
    assert found["base_url"].startswith("http://127.0.0.1:")
    # The sandbox's loopback holds the gateway's port alone: not the endpoint, not another service.
    assert {found[f"127.0.0.1:{port}"] for _, port in probes} == {"ConnectionRefusedError"}


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.usefixtures("docker_daemon")
def test_in_docker_the_agent_reaches_its_model_only_through_the_gateway(tmp_path: Path) -> None:
    with ScriptedServer(default=lambda _: Reply(text="from the model"), api_key=KEY) as upstream:
        with host_listener() as listener:
            probes = [(address, listener.port) for address in host_addresses()]
            outcome = run(tmp_path, "docker", probes, MODEL_BASE_URL=upstream.openai_url, MODEL_API_KEY=KEY)
            peers = list(listener.peers)
        found = assert_routed(tmp_path, outcome, upstream)
    # The gateway's listener on the trial's bridge is the one host port the container reached.
    assert peers == [] and "REACHED" not in [found[f"{a}:{p}"] for a, p in probes]
    assert "network: agent no-network" in (outcome.sandbox_note or "")


def test_a_profile_without_an_endpoint_keeps_its_key_out_of_the_sandbox(tmp_path: Path) -> None:
    task = write_task(tmp_path / "task")
    spec = TrialSpec(
        job_id="job_route",
        trial_id=new_id("trl"),
        task_name="task",
        attempt=1,
        profile_ref="team/p@1",
        runner="envloop/shell@1",
        params={"AGENT_NAME": "command", "AGENT_COMMAND": "env", "MODEL_API_KEY": KEY},
        secret_values=(KEY,),
        task_dir=task,
        instance_root=tmp_path / "instances",
        artifacts_dir=tmp_path / "artifacts",
    )
    outcome = asyncio.run(ShellRunner(LocalEnvironmentProvider("plain")).run(spec))  # type: ignore[arg-type]
    printed = (tmp_path / "artifacts" / "agent" / "stdout.txt").read_text()
    assert "MODEL_API_KEY" not in printed and "***" not in printed
    assert any("MODEL_API_KEY was not given" in warning for warning in outcome.warnings)


def test_an_endpoint_on_a_private_address_is_refused_where_the_operator_denies_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PRIVATE_UPSTREAM_VARIABLE, "deny")
    with ScriptedServer(default=lambda _: Reply(text="from the model")) as upstream:
        outcome = run(tmp_path, "plain", [], MODEL_BASE_URL=upstream.openai_url, MODEL_API_KEY=KEY)
    assert outcome.error is not None and outcome.error.type == "model_error"
    assert "loopback" in outcome.error.message and PRIVATE_UPSTREAM_VARIABLE in outcome.error.message
    assert outcome.reward is None and upstream.received == []
