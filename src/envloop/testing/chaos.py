"""Fault injection: SIGKILL workers and the server at random moments while a job runs, then check
that nothing was lost and nothing was counted twice.

The job's tasks have rewards fixed by their names (1, 0 or 0.5), so the exact metrics a correct run
must end with are known beforehand; every trial must end `completed` with its task's reward, and the
job's score and coverage must equal those figures exactly. A seeded random number generator picks the
victims and the moments, so a failing run can be replayed. Used by the CI test (bounded) and by
`bench/faults.py` (longer).
"""

import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from sqlalchemy import select

from envloop.core.status import TERMINAL, TrialStatus
from envloop.services import datasets, job_submission, jobs, keys, profiles, results
from envloop.services.context import Context, open_context
from envloop.store.tables import Trial

REWARDS = (1.0, 0.0, 0.5)
VERIFIER = 'echo {reward} > "${{ENVLOOP_LOGS_DIR:-/logs}}/verifier/reward.txt"\n'


@dataclass
class ChaosReport:
    kills: int = 0
    worker_kills: int = 0
    server_kills: int = 0
    trials: int = 0
    reruns: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _write_tasks(root: Path, count: int) -> dict[str, float]:
    """`count` tasks whose verifier writes a reward fixed by the task's name."""
    expected: dict[str, float] = {}
    for number in range(count):
        name = f"t{number:03d}"
        reward = REWARDS[number % len(REWARDS)]
        task = root / name
        (task / "tests").mkdir(parents=True)
        (task / "task.toml").write_text('version = "1.0"\n')
        (task / "instruction.md").write_text("Wait a moment.\n")
        (task / "tests" / "test.sh").write_text("#!/usr/bin/env bash\n" + VERIFIER.format(reward=reward))
        expected[name] = reward
    return expected


class _Fleet:
    """The server and the workers, as separate processes that can be killed and started again."""

    def __init__(self, home: Path, env: dict[str, str], workers: int) -> None:
        self.home = home
        self.env = env
        self.logs = home / "chaos-logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.server: subprocess.Popen[bytes] | None = None
        self.workers: list[subprocess.Popen[bytes]] = []
        self.port = 0
        for _ in range(workers):
            self.workers.append(self._worker())

    def _spawn(self, args: list[str], log: str) -> subprocess.Popen[bytes]:
        with (self.logs / log).open("ab") as sink:
            return subprocess.Popen(
                [sys.executable, "-m", "envloop", *args], env=self.env, stdout=sink, stderr=sink
            )

    def _worker(self) -> subprocess.Popen[bytes]:
        return self._spawn(["worker", "--capacity", "2", "--lease-ttl", "2"], "workers.log")

    def start_server(self) -> None:
        self.port = _free_port()
        self.server = self._spawn(
            ["serve", "--host", "127.0.0.1", "--port", str(self.port), "--workers", "0"], "serve.log"
        )

    def server_answers(self, key: str) -> bool:
        try:
            reply = httpx.get(
                f"http://127.0.0.1:{self.port}/v1/jobs",
                headers={"Authorization": f"Bearer {key}"},
                timeout=5,
            )
        except httpx.TransportError:
            return False
        return reply.status_code == 200

    def kill_worker(self, index: int) -> None:
        victim = self.workers[index]
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        self.workers[index] = self._worker()

    def kill_server(self) -> None:
        assert self.server is not None
        self.server.send_signal(signal.SIGKILL)
        self.server.wait()
        self.start_server()

    def stop(self) -> None:
        for proc in [*self.workers, *([self.server] if self.server else [])]:
            if proc.poll() is None:
                proc.terminate()
        for proc in [*self.workers, *([self.server] if self.server else [])]:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def run_chaos(
    home: Path,
    *,
    kills: int,
    tasks: int = 24,
    attempts: int = 2,
    workers: int = 3,
    seed: int = 0,
    timeout: float = 600.0,
    log: Callable[[str], None] = lambda _: None,
) -> ChaosReport:
    """Run one job (`tasks` tasks, `attempts` attempts each) while killing `kills` times; report
    what held."""
    rng = random.Random(seed)
    env = dict(os.environ, ENVLOOP_HOME=str(home))
    report = ChaosReport()
    started = time.monotonic()
    ctx = open_context(home)
    try:
        expected = _write_tasks(home / "chaos-tasks", tasks)
        dataset = datasets.push_dataset(ctx, home / "chaos-tasks", "chaos").ref
        # Trials last long enough that kills land in every phase of their lives.
        params = {"AGENT_NAME": "command", "AGENT_COMMAND": "sleep 1"}
        document = profiles.ProfileDocument.model_validate(
            {"schema_version": "envplatform.profile/v2", "spec": {"params": params}}
        )
        profiles.create_profile(ctx, "chaos", "1", document)
        key = keys.create_key(ctx).key
        job_id = job_submission.submit_job(
            ctx, job_submission.JobRequest(dataset=dataset, profiles=["chaos@1"], attempts=attempts)
        ).job.id
        fleet = _Fleet(home, env, workers)
        fleet.start_server()
        try:
            while report.kills < kills and time.monotonic() - started < timeout:
                time.sleep(rng.uniform(0.2, 1.2))
                if rng.random() < 0.3:
                    fleet.kill_server()
                    report.server_kills += 1
                else:
                    fleet.kill_worker(rng.randrange(workers))
                    report.worker_kills += 1
                report.kills += 1
                log(f"kill {report.kills}: {report.server_kills} server, {report.worker_kills} workers")
            deadline = time.monotonic() + timeout
            while jobs.get_job(ctx, job_id).status not in TERMINAL:
                if time.monotonic() > deadline:
                    report.problems.append("the job did not finish in time")
                    break
                time.sleep(0.2)
            if not fleet.server_answers(key):
                report.problems.append("the server restarted last does not answer")
        finally:
            fleet.stop()
        _check(ctx, job_id, expected, attempts, report)
    finally:
        ctx.close()
    report.seconds = time.monotonic() - started
    return report


def _check(ctx: Context, job_id: str, expected: dict[str, float], attempts: int, report: ChaosReport) -> None:
    with ctx.store.read() as session:
        trials = list(session.scalars(select(Trial).where(Trial.job_id == job_id)))
    report.trials = len(trials)
    report.reruns = sum(max(0, t.runs - 1) for t in trials)
    if len(trials) != len(expected) * attempts:
        report.problems.append(f"{len(trials)} trials, expected {len(expected) * attempts}")
    for trial in trials:
        if trial.status != TrialStatus.COMPLETED or trial.reward != expected.get(trial.task_name):
            report.problems.append(
                f"{trial.task_name}#{trial.attempt}: {trial.status} reward {trial.reward} "
                f"({trial.error_type}: {trial.error_message})"
            )
    metrics = results.job_result(ctx, job_id).profiles["chaos@1"]
    exact = sum(expected.values()) * attempts / (len(expected) * attempts)
    counts = metrics.score_counts
    if (counts.total, counts.scored, counts.missing) != (len(trials), len(trials), 0):
        report.problems.append(f"coverage {counts.scored}/{counts.total}, {counts.missing} missing")
    if metrics.score is None or abs(metrics.score - exact) > 1e-12:
        report.problems.append(f"score {metrics.score}, expected exactly {exact}")
