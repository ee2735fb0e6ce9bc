"""The `envloop` tool agent's own overhead per step: the time a step takes that is spent neither
waiting for the model nor running the tool.

Each trial is a real `envloop/shell@1` attempt (a real sandbox, the default mode) whose model is the
scripted endpoint, answering every request at once with one `bash` call of `true` until the last
step, then `finish`. A trial's agent phase is split into the model calls (as the agent waits for
them: SDK, HTTP on loopback and the endpoint), the command executions (the sandboxed `bash -c`)
and the rest: the agent's own work (conversation, request, tool-call handling, the working-directory
snapshot after each command, recording the steps). The task's working directory holds `--files`
files, so the snapshot's cost is part of the figure.

    .venv/bin/python bench/agent.py [--steps 50] [--trials 5] [--files 200]
"""

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from envloop.core.ids import new_id
from envloop.core.trajectory import ModelStep, ToolStep
from envloop.core.trial import TrialOutcome, TrialSpec
from envloop.models import close_clients
from envloop.runners import ShellRunner
from envloop.testing import Received, Reply, ScriptedServer, ScriptedToolCall
from envloop.trajectories import read_trajectory, snapshot


def _task(root: Path, files: int) -> Path:
    task = root / "bench-task"
    (task / "tests").mkdir(parents=True)
    (task / "environment" / "src").mkdir(parents=True)
    (task / "task.toml").write_text('version = "1.0"\n')
    (task / "instruction.md").write_text("Run `true` until told to stop.\n")
    (task / "tests" / "test.sh").write_text('echo 1 > "${ENVLOOP_LOGS_DIR:-/logs}/verifier/reward.txt"\n')
    for number in range(files):
        (task / "environment" / "src" / f"module_{number}.py").write_text(f"VALUE = {number}\n" * 40)
    (task / "environment" / "Dockerfile").write_text(
        "FROM debian:bookworm-slim\nWORKDIR /app\nCOPY src /app/src\n"
    )
    return task


def _responder(steps: int) -> Callable[[Received], Reply]:
    def respond(received: Received) -> Reply:
        calls = sum(1 for m in received.messages if m.get("role") in ("assistant",))
        if calls + 1 >= steps:
            return Reply(tool_calls=[ScriptedToolCall(name="finish", arguments={"summary": "done"})])
        return Reply(tool_calls=[ScriptedToolCall(name="bash", arguments={"command": "true"})])

    return respond


async def _trial(server: ScriptedServer, task: Path, root: Path, steps: int) -> tuple[TrialOutcome, Path]:
    trial_id = new_id("trl")
    spec = TrialSpec(
        job_id="job_bench",
        trial_id=trial_id,
        task_name=task.name,
        attempt=1,
        profile_ref="bench/agent@1",
        runner="envloop/shell@1",
        params={
            "AGENT_NAME": "envloop",
            "MODEL_PROTOCOL": "openai",
            "MODEL_BASE_URL": server.openai_url,
            "MODEL_NAME": "bench-model",
            "MAX_STEPS": str(steps),
        },
        task_dir=task,
        instance_root=root / "instances",
        artifacts_dir=root / "artifacts" / trial_id,
    )
    return await ShellRunner().run(spec), spec.artifacts_dir


def _split(outcome: TrialOutcome, artifacts: Path) -> tuple[int, float, float, float]:
    """(steps, agent phase ms, model-wait ms, tool ms) of one trial."""
    [agent] = [p for p in outcome.phases if p.name == "agent"]
    total = (agent.ended_at - agent.started_at).total_seconds() * 1000
    trajectory = read_trajectory(artifacts / "trajectory.json")
    model = sum(s.duration_ms or 0 for s in trajectory.steps if isinstance(s, ModelStep))
    tools = sum(s.duration_ms or 0 for s in trajectory.steps if isinstance(s, ToolStep) and s.command)
    steps = sum(1 for s in trajectory.steps if isinstance(s, ModelStep))
    return steps, total, model, tools


async def _run(args: argparse.Namespace, root: Path, task: Path) -> list[tuple[int, float, float, float]]:
    splits = []
    with ScriptedServer(default=_responder(args.steps)) as server:
        try:
            await _trial(server, task, root, 3)  # warm-up: imports, SDK client, sandbox probe
            for _ in range(args.trials):
                outcome, artifacts = await _trial(server, task, root, args.steps)
                assert outcome.status == "completed" and outcome.stop_reason == "done", outcome.error
                splits.append(_split(outcome, artifacts))
        finally:
            await close_clients()
    return splits


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--files", type=int, default=200)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="envloop-bench-agent-"))
    task = _task(root, args.files)
    splits = asyncio.run(_run(args, root, task))
    per_step = [(total - model - tools) / steps for steps, total, model, tools in splits]
    model_ms = [model / steps for steps, _, model, _ in splits]
    tool_ms = [tools / max(1, steps - 1) for steps, _, _, tools in splits]
    started = time.perf_counter()
    rounds = 20
    for _ in range(rounds):
        snapshot(task / "environment")
    snapshot_ms = (time.perf_counter() - started) / rounds * 1000
    steps = splits[0][0]
    print(
        f"envloop agent, {args.trials} trials × {steps} steps (bash `true`, then finish), {args.files} files"
    )
    print(
        f"  own overhead per step    median {statistics.median(per_step):6.2f} ms   "
        f"max {max(per_step):6.2f} ms"
    )
    print(f"  model wait per step      median {statistics.median(model_ms):6.2f} ms   (scripted endpoint)")
    print(f"  sandboxed command        median {statistics.median(tool_ms):6.2f} ms")
    print(
        f"  for reference: a cold snapshot of the {args.files} files (all read) costs {snapshot_ms:.2f} ms; "
        "after a command only files whose size or mtime changed are read again"
    )
    print("each trial, own overhead ms/step: " + ", ".join(f"{v:.2f}" for v in per_step))


if __name__ == "__main__":
    main()
