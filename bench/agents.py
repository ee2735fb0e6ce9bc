"""Agent CLIs at concurrency: N trials of each agent started at once in one event loop (as a worker
starts its first claim), through one model gateway, against a scripted endpoint that answers at
once, first with an empty agent cache (one install, the other trials waiting for it), then with the
cache warm.

Each trial is the whole trial in the local sandbox, no network, with one model call for the task
(MAX_STEPS=1). The CLI agents are answered "hello" and end on it; OpenCode and Qwen Code each make a
second call of their own, without tools (OpenCode's for the session's title), so their rows count
two calls a trial. `gemini-cli` speaks the Gemini API to the gateway, which carries it to the
endpoint's Chat Completions. `terminus-2` calls its model from the worker through the same gateway
and is answered in its own format: one command typed into its tmux session and the task said
complete; a completion is only taken once confirmed by a second call, so its one call ends on the
step budget (`max_steps`), the verifier then judging the trial as for the others. It installs
nothing when the environment has a tmux of its own (the machine's, in the local sandbox), so its
cold and warm rows differ only by chance. Printed per agent and cache state:

- trials scored (none may be lost) and the batch's wall time;
- per trial (median): the whole trial, the agent's own run (its agent phase, less an install step
  made inside it: Terminus's tmux bundle when the environment has no tmux) and the overhead (the
  whole trial less the agent's own run: sandbox, the agent's setup phase with its install or
  lookup, verifier);
- the install step (the longest: the trial that installed);
- the model calls: time in the gateway and the endpoint per call (median and p99; the endpoint
  answers at once, so this bounds what the gateway adds), and calls per second over the batch. A
  row whose trials made other than one call each says how many they made.

    .venv/bin/python bench/agents.py [--agents codex,aider] [--trials 8] [--cache-root DIR]

`--cache-root` is where the temporary cache is made: under /usr (e.g. /usr/local/lib) the
bubblewrap sandbox shows it and trials use entries in place; elsewhere each trial copies its entry in.
"""

import argparse
import asyncio
import json
import math
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from envloop.agents.cache import CACHE_VARIABLE
from envloop.core.ids import new_id
from envloop.core.status import Phase
from envloop.core.trajectory import ModelStep, ToolStep
from envloop.core.trial import PhaseRecord, TrialOutcome, TrialSpec
from envloop.runners import ShellRunner
from envloop.testing import Received, Reply, ScriptedServer
from envloop.trajectories import read_trajectory

AGENTS = (
    "claude-code",
    "codex",
    "opencode",
    "qwen-code",
    "mini-swe-agent",
    "aider",
    "gemini-cli",
    "terminus-2",
)
TERMINUS_ANSWER = json.dumps(
    {
        "analysis": "The shell is ready.",
        "plan": "Say hello.",
        "commands": [{"keystrokes": "echo hello\n", "duration": 0.1}],
        "task_complete": True,
    }
)
"""Terminus's one turn in its own format (agents/terminus_reply.py)."""


@dataclass
class Trial:
    wall: float
    own: float
    install: float
    calls: list[float]
    """Each model call's time in the gateway and the endpoint, in ms."""
    error: str | None


def _answer(agent: str) -> Callable[[Received], Reply]:
    """What the endpoint answers each of `agent`'s calls with: a turn in its own format for
    Terminus, a plain "hello" that ends every CLI's run."""
    text = TERMINUS_ANSWER if agent == "terminus-2" else "hello"

    def answer(received: Received) -> Reply:
        return Reply(text=text)

    return answer


def hello_task(root: Path) -> Path:
    """A task of one instruction whose verifier writes 0 (the benches time the trial, not the score)."""
    task = root / "bench-task"
    (task / "tests").mkdir(parents=True)
    (task / "environment").mkdir()
    (task / "task.toml").write_text('version = "1.0"\n')
    (task / "instruction.md").write_text("Say hello.\n")
    (task / "tests" / "test.sh").write_text('echo 0 > "${ENVLOOP_LOGS_DIR:-/logs}/verifier/reward.txt"\n')
    (task / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\n")
    return task


def _spec(agent: str, url: str, task: Path, root: Path) -> TrialSpec:
    protocol = "anthropic" if agent == "claude-code" else "openai"
    trial_id = new_id("trl")
    return TrialSpec(
        job_id="job_bench",
        trial_id=trial_id,
        task_name=task.name,
        attempt=1,
        profile_ref="bench/agent@1",
        runner="envloop/shell@1",
        params={
            "AGENT_NAME": agent,
            "MODEL_BASE_URL": url,
            "MODEL_NAME": "bench",
            "MODEL_PROTOCOL": protocol,
            "MAX_STEPS": "1",
        },
        task_dir=task,
        instance_root=root / "instances",
        artifacts_dir=root / "trials" / trial_id,
        agent_timeout_sec=900,
    )


async def _timed(spec: TrialSpec) -> tuple[float, TrialOutcome]:
    started = time.monotonic()
    outcome = await ShellRunner().run(spec)
    return time.monotonic() - started, outcome


def _seconds(phase: PhaseRecord | None) -> float:
    return (phase.ended_at - phase.started_at).total_seconds() if phase and phase.ended_at else 0.0


def _trial(spec: TrialSpec, wall: float, outcome: TrialOutcome) -> Trial:
    phases = {p.name: p for p in outcome.phases}
    steps = read_trajectory(spec.artifacts_dir / "trajectory.json").steps
    installs = [s for s in steps if isinstance(s, ToolStep) and s.tool == "install"]
    install = (installs[0].duration_ms or 0.0) / 1000 if installs else 0.0
    # An agent with a setup phase installs in it; one without installs inside its own phase.
    in_agent_phase = 0.0 if Phase.AGENT_SETUP in phases else install
    own = max(0.0, _seconds(phases.get(Phase.AGENT)) - in_agent_phase)
    calls = [s.duration_ms or 0.0 for s in steps if isinstance(s, ModelStep)]
    error = outcome.error.message if outcome.error else None
    return Trial(wall, own, install, calls, error)


def _batch(agent: str, url: str, task: Path, root: Path, trials: int) -> tuple[float, list[Trial]]:
    """`trials` trials of `agent` started together on a fresh event loop (a fresh gateway)."""
    specs = [_spec(agent, url, task, root) for _ in range(trials)]

    async def together() -> list[tuple[float, TrialOutcome]]:
        return await asyncio.gather(*(_timed(spec) for spec in specs))

    started = time.monotonic()
    results = asyncio.run(together())
    wall = time.monotonic() - started
    return wall, [_trial(spec, sec, outcome) for spec, (sec, outcome) in zip(specs, results, strict=True)]


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]


def _row(agent: str, cache: str, wall: float, trials: list[Trial]) -> str:
    scored = sum(1 for t in trials if t.error is None)
    calls = [ms for t in trials for ms in t.calls]
    gateway = (
        f"{statistics.median(calls):>7.1f} {_p99(calls):>7.1f} {len(calls) / wall:>7.2f}"
        if calls
        else f"{'-':>7} {'-':>7} {'-':>7}"
    )
    row = (
        f"{agent:<15} {cache:<5} {scored:>3}/{len(trials):<3} {wall:>7.1f} "
        f"{statistics.median(t.wall for t in trials):>7.2f} {statistics.median(t.own for t in trials):>7.2f} "
        f"{statistics.median(t.wall - t.own for t in trials):>8.2f} {max(t.install for t in trials):>8.2f} "
        f"{gateway}"
    )
    if len(calls) != len(trials):
        row += f"  CALLS: {len(calls)} for {len(trials)} trials"
    errors = sorted({t.error for t in trials if t.error is not None})
    return row + (f"  LOST: {'; '.join(errors)[:120]}" if errors else "")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--agents", default=",".join(AGENTS))
    parser.add_argument("--trials", type=int, default=8, help="trials of each agent started at once")
    parser.add_argument("--cache-root", type=Path, help="where the temporary agent cache is made")
    args = parser.parse_args()
    agents = [a.strip() for a in args.agents.split(",") if a.strip()]
    unknown = sorted(set(agents) - set(AGENTS))
    if unknown:
        parser.error(f"unknown agents: {', '.join(unknown)} (known: {', '.join(AGENTS)})")
    print(
        f"{'agent':<15} {'cache':<5} {'scored':>7} {'batch s':>7} {'trial s':>7} {'own s':>7} "
        f"{'overhead':>8} {'install':>8} {'call ms':>7} {'p99 ms':>7} {'calls/s':>7}"
    )
    with tempfile.TemporaryDirectory(prefix="bench-agents-") as scratch:
        root = Path(scratch)
        task = hello_task(root)
        for agent in agents:
            cache = Path(tempfile.mkdtemp(prefix="bench-agent-cache-", dir=args.cache_root or root))
            os.environ[CACHE_VARIABLE] = str(cache)
            try:
                with ScriptedServer(default=_answer(agent)) as server:
                    url = server.anthropic_url if agent == "claude-code" else server.openai_url
                    for state in ("cold", "warm"):
                        wall, trials = _batch(agent, url, task, root, args.trials)
                        print(_row(agent, state, wall, trials), flush=True)
            finally:
                shutil.rmtree(cache, ignore_errors=True)
    print(
        "own = the agent phase (less an install step made in it); overhead = trial less own, the agent's "
        "setup phase included; call ms = a model call's time in the gateway and the endpoint (which "
        "answers at once)"
    )


if __name__ == "__main__":
    main()
