"""A worker: claims trials from the store's queue, runs them, and records each outcome once.

Leases are renewed while trials run; a lost lease or a cancelled job stops the local run (its
environment is torn down by the runner). Expired leases of dead workers are reaped by any worker.
"""

import asyncio
import contextlib
import logging
import os
import shutil
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import delete, select, update

from envloop.core.ids import new_id
from envloop.core.status import TERMINAL
from envloop.core.trial import EnvironmentChoice, TrialError, TrialOutcome, TrialSpec
from envloop.environments.docker import DockerError, sweep_orphans
from envloop.environments.instance import instances_under, remove_instance
from envloop.models import close_clients
from envloop.scheduling.background import default_capacity
from envloop.scheduling.executor import Executor, LocalExecutor, RunLost
from envloop.services.context import Context
from envloop.services.profiles import resolved_params
from envloop.store import queue
from envloop.store.artifacts import STRUCTURED_RESULT, ArtifactStoreUnavailableError
from envloop.store.queue import ClaimedTrial
from envloop.store.tables import Dataset, DatasetMember, Job, Profile, Trial
from envloop.store.tables import Worker as WorkerRow

log = logging.getLogger("envloop.worker")
_COALESCE_SEC = 0.003
FETCH_DELAYS_SEC = (0.5, 2.0)
"""Pauses between the tries of one run to fetch a task archive from the artifact store."""
HAND_BACK_RUNS = 3
"""A trial whose archive this worker cannot fetch, or whose run was lost with the machine running it,
goes back to the queue for a new run until it has been claimed this many times; then it fails with
an infrastructure error that says so."""


class _HandedBack(Exception):
    """The trial goes back to the queue for a new run (its archive was out of reach, or its run lost)."""


@dataclass
class WorkerConfig:
    capacity: int = field(default_factory=default_capacity)
    lease_ttl: float = 30.0
    idle_poll: float = 0.1
    idle_exit: float | None = None
    """Exit after the queue has stayed empty this long (background workers); None: run until stopped."""
    background: bool = False
    environment: EnvironmentChoice = "local"
    """Where trials of jobs that chose no environment run (`el worker --environment`)."""


def _preparation_problem(exc: Exception) -> str:
    """What a user is told when a trial could not be prepared: the kind of failure and the OS's
    reason, never the worker's own paths (the whole exception goes to the worker's log)."""
    if isinstance(exc, OSError):
        return f"could not prepare trial: {exc.strerror or type(exc).__name__} (details in the worker's log)"
    return f"could not prepare trial: {type(exc).__name__} (details in the worker's log)"


def _run_id(claimed: ClaimedTrial) -> str:
    """The same name TrialSpec.run_id gives this run (one lease of the trial)."""
    return f"{claimed.trial_id}.r{claimed.lease_token}"


def _infrastructure_error(message: str) -> TrialOutcome:
    return TrialOutcome(status="failed", error=TrialError(type="infrastructure_error", message=message))


def _watch_children_with_pidfds() -> None:
    """Python 3.11 waits for each subprocess on a thread of its own; a pidfd in the event loop is
    cheaper per trial. From 3.12 on asyncio picks pidfds by itself."""
    if sys.version_info >= (3, 12) or not hasattr(os, "pidfd_open"):
        return
    watcher = asyncio.PidfdChildWatcher()
    watcher.attach_loop(asyncio.get_running_loop())
    asyncio.set_child_watcher(watcher)


@dataclass
class _JobInfo:
    runner: str
    agent_timeout_sec: float | None
    verifier_timeout_sec: float | None
    max_steps: int | None
    dataset_id: str
    scorer: str | None
    """Set for JSONL datasets, whose trials carry their row instead of a task directory."""
    environment: EnvironmentChoice | None = None


@dataclass
class _ProfileInfo:
    ref: str
    params: dict[str, str]
    secrets: tuple[str, ...]


class Worker:
    def __init__(
        self, ctx: Context, config: WorkerConfig | None = None, executor: Executor | None = None
    ) -> None:
        self.ctx = ctx
        self.config = config or WorkerConfig()
        self.executor = executor or LocalExecutor()
        self.id = new_id("wrk")
        self._running: dict[str, tuple[ClaimedTrial, asyncio.Task[TrialOutcome]]] = {}
        self._jobs: dict[str, _JobInfo] = {}
        self._profiles: dict[str, _ProfileInfo] = {}
        self._rows: dict[str, dict[str, dict[str, Any]]] = {}
        self._stopping = False
        self._unpublished: dict[str, str] = {}
        """Recorded runs whose files the artifact store could not take yet: run id → trial id."""
        self.completed = 0

    def stop(self) -> None:
        self._stopping = True

    async def run(self, until: Callable[[], bool] | None = None) -> None:
        """Run until stopped, until `until()` holds, or (with idle_exit) until the queue stays empty."""
        _watch_children_with_pidfds()
        self._register()
        self._settle_dead_runs()
        await self._sweep_containers()
        idle_since = time.monotonic()
        next_upkeep = 0.0
        finished: list[tuple[ClaimedTrial, TrialOutcome]] = []
        try:
            while not self._stopping and not (until and until()):
                now = time.monotonic()
                if now >= next_upkeep:
                    await self._upkeep()
                    next_upkeep = now + min(1.0, self.config.lease_ttl / 3)
                free = self.config.capacity - len(self._running)
                # Results of the last wake-up and the next claims share one write transaction.
                recorded, claimed = queue.settle(
                    self.ctx.store, self.id, finished, free, self.config.lease_ttl
                )
                if self.ctx.artifacts.remote is not None:  # uploads stay off the event loop
                    await asyncio.to_thread(self._count, finished, recorded)
                else:
                    self._count(finished, recorded)
                finished = []
                for trial in claimed:
                    self._start(trial)
                if self._running:
                    idle_since = time.monotonic()
                    done = await self._wait_for_finished()
                    finished = [item for task in done if (item := self._collect(task)) is not None]
                    continue
                if queue.has_open_trials(self.ctx.store):
                    idle_since = time.monotonic()
                elif (
                    self.config.idle_exit is not None
                    and time.monotonic() - idle_since > self.config.idle_exit
                ):
                    break
                await asyncio.sleep(self.config.idle_poll)
        finally:
            if finished:
                self._count(finished, queue.settle(self.ctx.store, self.id, finished, 0, 0.0)[0])
            await self._shutdown()

    async def _wait_for_finished(self) -> set[asyncio.Task[TrialOutcome]]:
        """The trials that finished, waiting a moment for another when only one did: recording
        results and claiming trials costs one write transaction per wake-up, whatever its size."""
        running = [task for _, task in self._running.values()]
        done, pending = await asyncio.wait(
            running, timeout=self.config.idle_poll, return_when=asyncio.FIRST_COMPLETED
        )
        if len(done) == 1 and pending:
            more, _ = await asyncio.wait(pending, timeout=_COALESCE_SEC, return_when=asyncio.FIRST_COMPLETED)
            done |= more
        return done

    def _start(self, claimed: ClaimedTrial) -> None:
        try:
            spec = self._spec(claimed)
        except Exception as exc:  # a broken task archive must not take the worker down
            log.exception("could not prepare trial %s", claimed.trial_id)
            outcome = TrialOutcome(
                status="failed",
                error=TrialError(type="infrastructure_error", message=_preparation_problem(exc)),
            )
            queue.finish(self.ctx.store, claimed, outcome)
            return
        task = asyncio.create_task(self._execute(claimed, spec), name=claimed.trial_id)
        self._running[claimed.trial_id] = (claimed, task)

    async def _execute(self, claimed: ClaimedTrial, spec: TrialSpec) -> TrialOutcome:
        if spec.task_dir is None and spec.row is None:
            try:
                spec = spec.model_copy(update={"task_dir": await self._task_dir(claimed)})
            except ArtifactStoreUnavailableError as exc:
                reason = "could not fetch the task archive on {runs} runs: {exc} (retryable: run it again "
                return await self._hand_back(claimed, exc, reason + "once the artifact store is reachable)")
            except Exception as exc:  # a broken task archive must not take the worker down
                log.exception("could not prepare trial %s", claimed.trial_id)
                return _infrastructure_error(_preparation_problem(exc))
        try:
            outcome = await self.executor.execute(spec)
            # Noted once here so reading a job's results never has to look for the file per trial.
            outcome.structured_result = (spec.artifacts_dir / STRUCTURED_RESULT).is_file()
            return outcome
        except asyncio.CancelledError:
            raise
        except RunLost as exc:
            return await self._hand_back(claimed, exc, "lost its run on {runs} runs: {exc}")
        except Exception as exc:
            log.exception("trial %s crashed in the runner", spec.trial_id)
            return _infrastructure_error(f"{type(exc).__name__}: {exc}")

    async def _hand_back(self, claimed: ClaimedTrial, exc: Exception, failure: str) -> TrialOutcome:
        """Hand the trial back to the queue for a new run, or, once it has had its share of runs,
        fail it with `failure` (formatted with `runs` and `exc`)."""
        runs = await asyncio.to_thread(self._runs_of, claimed.trial_id)
        if runs < HAND_BACK_RUNS:
            log.warning("trial %s: %s; handed back to the queue", claimed.trial_id, exc)
            raise _HandedBack from exc
        return _infrastructure_error(failure.format(runs=runs, exc=exc))

    async def _task_dir(self, claimed: ClaimedTrial) -> Path:
        """The unpacked task, fetched through the artifact store (off the event loop) unless this
        machine already has it; a few tries before the store is taken to be unavailable."""
        cached = self.ctx.artifacts.cached_task_dir(claimed.task_digest)
        if cached is not None:
            return cached
        for delay in (*FETCH_DELAYS_SEC, None):
            try:
                return await asyncio.to_thread(self.ctx.artifacts.task_dir, claimed.task_digest)
            except ArtifactStoreUnavailableError:
                if delay is None:
                    raise
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    def _runs_of(self, trial_id: str) -> int:
        with self.ctx.store.read() as session:
            return session.scalar(select(Trial.runs).where(Trial.id == trial_id)) or 0

    def _collect(self, task: asyncio.Task[TrialOutcome]) -> tuple[ClaimedTrial, TrialOutcome] | None:
        """The finished trial and its outcome; None for one handed back to the queue."""
        claimed, _ = self._running.pop(task.get_name())
        if task.cancelled():
            return claimed, TrialOutcome(status="cancelled")
        if isinstance(task.exception(), _HandedBack):
            queue.release(self.ctx.store, [claimed])
            self.ctx.artifacts.discard(_run_id(claimed))
            return None
        return claimed, task.result()

    def _publish(self, run_id: str, trial_id: str) -> None:
        """Publish a recorded run's files; when the artifact store cannot take them now, they stay
        staged here and upkeep tries again."""
        try:
            self.ctx.artifacts.publish(run_id, trial_id)
            self._unpublished.pop(run_id, None)
        except ArtifactStoreUnavailableError as exc:
            log.error("trial %s: files kept here until the artifact store takes them: %s", trial_id, exc)
            self._unpublished[run_id] = trial_id

    def _count(self, finished: list[tuple[ClaimedTrial, TrialOutcome]], recorded: list[bool]) -> None:
        """Publish the artifacts of each run whose result was recorded; discard the others."""
        for (claimed, _), ok in zip(finished, recorded, strict=True):
            if ok:
                self._publish(_run_id(claimed), claimed.trial_id)
                self.completed += 1
            else:
                self.ctx.artifacts.discard(_run_id(claimed))
                log.warning(
                    "trial %s: lease lost before its result was recorded; discarded", claimed.trial_id
                )

    async def _upkeep(self) -> None:
        """Renew leases, stop cancelled or lost trials, reap dead workers' trials, heartbeat."""
        held = [claimed for claimed, _ in self._running.values()]
        lost = queue.renew(self.ctx.store, self.id, held, self.config.lease_ttl)
        cancelled = queue.cancel_requested(self.ctx.store, self._running)
        for trial_id in lost | cancelled:
            self._running[trial_id][1].cancel()
        if lost:
            for trial_id in lost:
                claimed, task = self._running.pop(trial_id)
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                self.ctx.artifacts.discard(_run_id(claimed))
        queue.reap_expired(self.ctx.store)
        for run_id, trial_id in list(self._unpublished.items()):
            await asyncio.to_thread(self._publish, run_id, trial_id)
        with self.ctx.store.write() as session:
            session.execute(update(WorkerRow).where(WorkerRow.id == self.id).values(heartbeat_at=time.time()))

    def _spec(self, claimed: ClaimedTrial) -> TrialSpec:
        job = self._job(claimed.job_id)
        profile = self._profile(claimed.profile_id)
        artifacts_dir = self.ctx.artifacts.staging_dir(_run_id(claimed))
        if artifacts_dir.exists():  # left over from a worker that died before this run started
            shutil.rmtree(artifacts_dir)
        artifacts_dir.mkdir(parents=True)
        self.ctx.instances_dir.mkdir(parents=True, exist_ok=True)
        chat = job.scorer is not None
        return TrialSpec(
            job_id=claimed.job_id,
            trial_id=claimed.trial_id,
            task_name=claimed.task_name,
            attempt=claimed.attempt,
            profile_ref=profile.ref,
            runner=job.runner,
            params=profile.params,
            secret_values=profile.secrets,
            task_dir=None,  # fetched by the trial's task, off the event loop
            row=self._dataset_rows(job.dataset_id)[claimed.task_name] if chat else None,
            scorer=job.scorer,
            instance_root=self.ctx.instances_dir,
            artifacts_dir=artifacts_dir,
            agent_timeout_sec=job.agent_timeout_sec,
            verifier_timeout_sec=job.verifier_timeout_sec,
            max_steps=job.max_steps,
            run=claimed.lease_token,
            environment=job.environment or self.config.environment,
            builds_dir=self.ctx.artifacts.root / "builds",
        )

    def _job(self, job_id: str) -> _JobInfo:
        if job_id not in self._jobs:
            with self.ctx.store.read() as session:
                job = session.get(Job, job_id)
                assert job is not None
                dataset = session.get(Dataset, job.dataset_id)
                assert dataset is not None
                self._jobs[job_id] = _JobInfo(
                    job.runner,
                    job.agent_timeout_sec,
                    job.verifier_timeout_sec,
                    job.max_steps,
                    dataset.id,
                    dataset.scorer if dataset.kind == "jsonl" else None,
                    job.environment,  # type: ignore[arg-type]
                )
        return self._jobs[job_id]

    def _dataset_rows(self, dataset_id: str) -> dict[str, dict[str, Any]]:
        """A JSONL revision's rows by member name, read once per worker (revisions never change)."""
        if dataset_id not in self._rows:
            with self.ctx.store.read() as session:
                query = select(DatasetMember.name, DatasetMember.row)
                members = session.execute(query.where(DatasetMember.dataset_id == dataset_id)).all()
            self._rows[dataset_id] = {name: row for name, row in members if row is not None}
        return self._rows[dataset_id]

    def _profile(self, profile_id: str) -> _ProfileInfo:
        if profile_id not in self._profiles:
            with self.ctx.store.read() as session:
                profile = session.scalar(select(Profile).where(Profile.id == profile_id))
                assert profile is not None
                params = resolved_params(session, profile, self.ctx.home)
                secrets = tuple(params[name] for name in profile.secret_names if params.get(name))
                self._profiles[profile_id] = _ProfileInfo(
                    f"{profile.name}@{profile.version}", params, secrets
                )
        return self._profiles[profile_id]

    async def _sweep_containers(self) -> None:
        """Remove the trial containers of workers on this host that died (they could not remove
        their own); without a Docker daemon there are none."""
        try:
            removed = await sweep_orphans()
        except (DockerError, OSError):
            return
        if removed:
            log.info("removed %d container(s) of workers that are gone", len(removed))

    def _settle_dead_runs(self) -> None:
        """Files of runs whose workers died. A staged run whose result was recorded is published (its
        worker died between recording and publishing); one that no longer holds its trial is
        discarded, and so is a leftover instance (its quota file system included)."""
        staged = set(self.ctx.artifacts.staged_runs())
        instances = {path.name: path for path in instances_under(self.ctx.instances_dir)}
        for run_id in staged | instances.keys():
            trial_id, _, token = run_id.rpartition(".r")
            if not token.isdigit():
                continue
            with self.ctx.store.read() as session:
                row = session.execute(
                    select(Trial.status, Trial.lease_token).where(Trial.id == trial_id)
                ).first()
            stale = row is None or row.lease_token != int(token)
            if run_id in staged and stale:
                self.ctx.artifacts.discard(run_id)
            elif run_id in staged and row is not None and row.status in TERMINAL:
                self._publish(run_id, trial_id)
            if run_id in instances and (stale or (row is not None and row.status in TERMINAL)):
                with contextlib.suppress(OSError):
                    remove_instance(instances[run_id])

    def _register(self) -> None:
        with self.ctx.store.write() as session:
            session.add(
                WorkerRow(
                    id=self.id,
                    host=socket.gethostname(),
                    pid=os.getpid(),
                    capacity=self.config.capacity,
                    background=self.config.background,
                    started_at=datetime.now(UTC),
                    heartbeat_at=time.time(),
                )
            )

    async def _shutdown(self) -> None:
        """Stop what still runs and hand it back to the queue (or record it cancelled), then deregister."""
        held = [claimed for claimed, _ in self._running.values()]
        cancelled = queue.cancel_requested(self.ctx.store, self._running)
        for _, task in self._running.values():
            task.cancel()
        for _, task in list(self._running.values()):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._running.clear()
        for claimed in held:
            if claimed.trial_id in cancelled:
                recorded = queue.finish(self.ctx.store, claimed, TrialOutcome(status="cancelled"))
                self._count([(claimed, TrialOutcome(status="cancelled"))], [recorded])
            else:
                self.ctx.artifacts.discard(_run_id(claimed))
        queue.release(self.ctx.store, [c for c in held if c.trial_id not in cancelled])
        with self.ctx.store.write() as session:
            session.execute(delete(WorkerRow).where(WorkerRow.id == self.id))
        await close_clients()  # model connections belong to this event loop, which ends with the worker
