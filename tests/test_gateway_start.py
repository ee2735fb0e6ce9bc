"""A worker's model gateway starts once, before any trial is given its address, however many trials
ask for it at the same moment: a fresh worker's first trials all start together, and none may be
handed a gateway that is not listening yet (that trial was lost with `AssertionError: start() the
gateway first`). Lazy starts of the same kind (the host's firewall chains, the allowlist proxy's
image) share one start too (`envloop.core.single_flight`)."""

import asyncio
import json
from pathlib import Path

import pytest
from sqlalchemy import select

from envloop.core.ids import new_id
from envloop.core.single_flight import SingleFlight
from envloop.core.trajectory import ModelStep
from envloop.core.trial import TrialOutcome, TrialSpec
from envloop.environments import LocalEnvironmentProvider
from envloop.environments.local import SANDBOX_VARIABLE
from envloop.environments.local.bwrap import bwrap_executable
from envloop.runners import ShellRunner
from envloop.services import datasets, job_submission, profiles
from envloop.services.context import Context
from envloop.store.tables import Trial
from envloop.testing import Reply, ScriptedServer
from envloop.trajectories import read_trajectory
from tests.conftest import make_task, run_trials, write_profile

KEY = "sk-gateway-start-31f0"
HAS_BWRAP = bwrap_executable()[0] is not None
ASK_THE_MODEL = r"""
import json, os, urllib.request
request = urllib.request.Request(
    os.environ["MODEL_BASE_URL"] + "/chat/completions",
    data=json.dumps({"model": "any", "messages": [{"role": "user", "content": "hi"}]}).encode(),
    headers={"Authorization": "Bearer " + os.environ["MODEL_API_KEY"], "Content-Type": "application/json"},
)
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
answer = json.load(opener.open(request, timeout=60))["choices"][0]["message"]["content"]
if answer == "from the model":
    open("done", "w").write(answer)
"""


def _asking_task(root: Path) -> Path:
    """A task whose image holds the agent in its working directory."""
    task = make_task(root, "ask")
    (task / "environment" / "ask.py").write_text(ASK_THE_MODEL)
    (task / "environment" / "Dockerfile").write_text(
        "FROM python:3.11-slim\nWORKDIR /app\nCOPY ask.py /app/\n"
    )
    return task


def _agent_params(server: ScriptedServer) -> dict[str, str]:
    return {
        "AGENT_NAME": "command",
        "AGENT_COMMAND": "python3 ask.py",
        "MODEL_BASE_URL": server.openai_url,
        "MODEL_API_KEY": KEY,
        "MODEL_NAME": "any",
    }


def _spec(tmp_path: Path, task: Path, number: int, params: dict[str, str]) -> TrialSpec:
    return TrialSpec(
        job_id="job_start",
        trial_id=new_id("trl"),
        task_name=task.name,
        attempt=1,
        profile_ref="team/p@1",
        runner="envloop/shell@1",
        params=params,
        secret_values=(KEY,),
        task_dir=task,
        instance_root=tmp_path / "instances",
        artifacts_dir=tmp_path / "artifacts" / str(number),
    )


def test_trials_that_reach_for_the_gateway_together_all_find_it_listening(tmp_path: Path) -> None:
    """Sixteen trials of one fresh event loop started at the same moment (the plain sandbox, so
    that they reach their agent phase within the gateway's start)."""
    task = _asking_task(tmp_path / "tasks")

    async def all_at_once() -> list[TrialOutcome]:
        runner = ShellRunner(LocalEnvironmentProvider("plain"))  # type: ignore[arg-type]
        params = _agent_params(server)
        specs = [_spec(tmp_path, task, number, params) for number in range(16)]
        return await asyncio.gather(*(runner.run(spec) for spec in specs))

    with ScriptedServer(default=lambda _: Reply(text="from the model"), api_key=KEY) as server:
        outcomes = asyncio.run(all_at_once())
        calls = len(server.received)
    assert [outcome.error for outcome in outcomes if outcome.error is not None] == []
    assert calls == 16
    for number, outcome in enumerate(outcomes):
        assert outcome.reward == 1.0
        trajectory = read_trajectory(tmp_path / "artifacts" / str(number) / "trajectory.json")
        assert sum(isinstance(step, ModelStep) for step in trajectory.steps) == 1


@pytest.mark.slow
@pytest.mark.parametrize(
    "sandbox",
    [
        "plain",
        pytest.param(
            "bwrap", marks=pytest.mark.skipif(not HAS_BWRAP, reason="bwrap cannot create a sandbox here")
        ),
    ],
)
def test_thirty_two_trials_started_at_once_by_a_fresh_worker_are_all_scored(
    ctx: Context, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sandbox: str
) -> None:
    """The stress test: a worker of capacity 32 whose first claim is 32 trials, each calling its
    model through the gateway from its sandbox. Without a sandbox to set up the trials reach their
    agent phase closest together (most of them within the gateway's start)."""
    monkeypatch.setenv(SANDBOX_VARIABLE, sandbox)
    src = tmp_path / "src"
    _asking_task(src)
    with ScriptedServer(default=lambda _: Reply(text="from the model"), api_key=KEY) as server:
        ref = datasets.push_dataset(ctx, src, "ds").ref
        document = profiles.read_profile_file(write_profile(tmp_path / "p.json", _agent_params(server)))
        profiles.create_profile(ctx, "asker", "1", document)
        job = job_submission.submit_job(
            ctx, job_submission.JobRequest(dataset=ref, profiles=["asker@1"], attempts=32)
        ).job
        run_trials(ctx, 32, capacity=32)
        calls = len(server.received)
    with ctx.store.read() as session:
        rows = session.execute(
            select(Trial.status, Trial.reward, Trial.error_message).where(Trial.job_id == job.id)
        ).all()
    assert len(rows) == 32
    lost = [row.error_message for row in rows if (row.status, row.reward) != ("completed", 1.0)]
    assert lost == [], json.dumps(lost[:3])
    assert calls == 32


def test_one_start_serves_every_caller_and_a_failed_one_is_tried_again_by_the_next(tmp_path: Path) -> None:
    """The shared start: callers that ask while it runs wait for it and get its result; a failure
    reaches every one of them, then the next caller starts anew; a cancelled caller leaves it
    running for the others."""
    starts: list[int] = []

    async def start() -> int:
        starts.append(len(starts) + 1)
        await asyncio.sleep(0.05)
        if len(starts) == 1:
            raise OSError("the first start fails")
        return len(starts)

    flight = SingleFlight(start, "test start")

    async def scenario() -> None:
        failed = await asyncio.gather(*(flight() for _ in range(8)), return_exceptions=True)
        assert [type(found) for found in failed] == [OSError] * 8
        assert starts == [1]
        cancelled = asyncio.ensure_future(flight())
        others = [asyncio.ensure_future(flight()) for _ in range(7)]
        await asyncio.sleep(0.01)
        cancelled.cancel()
        assert await asyncio.gather(*others) == [2] * 7
        assert starts == [1, 2]
        assert await flight() == 3  # a start that ended is not remembered: each is its caller's own

    asyncio.run(scenario())
