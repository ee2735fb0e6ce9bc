"""A worker: claims trials from the store's queue, runs them, and records each outcome once.

Leases are renewed while trials run; a lost lease or a cancelled job stops the local run (its
environment is torn down by the runner). Expired leases of dead workers are reaped by any worker.
"""

import asyncio
import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy import delete, select, update

from envloop.core.capacity import LEASE_TTL_SEC, default_capacity
from envloop.core.ids import new_id
from envloop.core.status import TERMINAL, TrialStatus
from envloop.core.trial import EnvironmentChoice, TrialOutcome, TrialSpec
from envloop.environments.leftovers import close_shared, sweep_leftovers
from envloop.environments.local.instance import instances_under, remove_instance
from envloop.environments.shielded import finish_even_if_cancelled
from envloop.liveness import gone, start_time, this_host
from envloop.models import close_clients
from envloop.scheduling.background import BackgroundLock
from envloop.scheduling.executor import Executor, LocalExecutor
from envloop.scheduling.store_calls import off_loop
from envloop.scheduling.trial_execution import HandedBack, TrialExecution, run_id_of
from envloop.scheduling.trial_specs import TrialSpecs
from envloop.store import leases, queue
from envloop.store.artifacts import ArtifactStoreUnavailableError
from envloop.store.context import Context
from envloop.store.queue import ClaimedTrial
from envloop.store.tables import Trial
from envloop.store.tables import Worker as WorkerRow

log = logging.getLogger("envloop.worker")


@dataclass
class WorkerConfig:
    capacity: int = field(default_factory=default_capacity)
    lease_ttl: float = LEASE_TTL_SEC
    idle_poll: float = 0.1
    idle_exit: float | None = None
    """Exit after the queue has stayed empty this long (background workers); None: run until stopped."""
    background: bool = False
    environment: EnvironmentChoice = "local"
    """Where trials of jobs that chose no environment run (`el worker --environment`)."""


@contextlib.contextmanager
def _children_watched_with_pidfds() -> Iterator[None]:
    """Python 3.11 waits for each subprocess on a thread of its own; a pidfd in the event loop is
    cheaper per trial. From 3.12 on asyncio picks pidfds by itself. The watcher is process-wide and
    tied to this loop: the one before is put back at the end, so a program that runs a worker and
    later starts subprocesses from another event loop still can. Only a worker on the main thread
    installs it: workers run on other threads (a program running several, one after another) could
    overlap, and one ending would close the watcher that the next one's subprocesses were handed to,
    whose exits would then never be seen."""
    in_main_thread = threading.current_thread() is threading.main_thread()
    if sys.version_info >= (3, 12) or not hasattr(os, "pidfd_open") or not in_main_thread:
        yield
        return
    previous = asyncio.get_child_watcher()
    watcher = asyncio.PidfdChildWatcher()
    watcher.attach_loop(asyncio.get_running_loop())
    asyncio.set_child_watcher(watcher)
    try:
        yield
    finally:
        asyncio.set_child_watcher(previous)
        watcher.close()


class Worker:
    def __init__(
        self,
        ctx: Context,
        config: WorkerConfig | None = None,
        executor: Executor | None = None,
        lock: BackgroundLock | None = None,
    ) -> None:
        self.ctx = ctx
        self.lock = lock
        """The background-worker lock this worker holds (`el worker --background`), else None."""
        self.config = config or WorkerConfig()
        self.executor = executor or LocalExecutor()
        self.id = new_id("wrk")
        self._running: dict[str, tuple[ClaimedTrial, asyncio.Task[TrialOutcome]]] = {}
        self._specs = TrialSpecs(ctx, self.config.environment)
        self._trials = TrialExecution(ctx, self.executor, self._specs)
        self._stopping = False
        self._unpublished: dict[str, str] = {}
        """Recorded runs whose files the artifact store could not take yet: run id → trial id."""
        self.completed = 0

    def stop(self) -> None:
        self._stopping = True

    async def run(self, until: Callable[[], bool] | None = None) -> None:
        """Run until stopped, until `until()` holds, or (with idle_exit) until the queue stays empty.

        Nothing here touches the store or the disk on the event loop: every call runs in a thread,
        so a write lock held elsewhere delays only the call waiting for it, never the running
        trials or the renewal of their leases (its own task, beside this loop)."""
        with _children_watched_with_pidfds():
            try:
                await self._serve(until)
            finally:
                await finish_even_if_cancelled(self._close_shared())

    async def _serve(self, until: Callable[[], bool] | None) -> None:
        await off_loop("register", self._register)
        await off_loop("settle dead runs", self._settle_dead_runs)
        await self._sweep_leftovers()
        upkeep = asyncio.create_task(self._keep_up(), name="upkeep")
        idle_since = time.monotonic()
        finished: list[tuple[ClaimedTrial, TrialOutcome]] = []
        try:
            while not self._stopping and not (until and until()):
                if upkeep.done():
                    upkeep.result()  # upkeep never ends by itself: raise what ended it
                free = self.config.capacity - len(self._running)
                claimed = await off_loop("record and claim", self._settle, finished, free)
                finished = []
                for trial, spec in claimed:
                    self._start(trial, spec)
                if self._running:
                    idle_since = time.monotonic()
                    done = await self._wait_for_finished()
                    finished, handed_back = self._collect(done)
                    if handed_back:
                        await off_loop("hand back", self._hand_back_runs, handed_back)
                    continue
                if await off_loop("look for work", queue.has_open_trials, self.ctx.store):
                    idle_since = time.monotonic()
                elif (
                    self.config.idle_exit is not None
                    and time.monotonic() - idle_since > self.config.idle_exit
                ):
                    if await self._may_exit():
                        break
                    idle_since = time.monotonic()
                await asyncio.sleep(self.config.idle_poll)
        finally:
            upkeep.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await upkeep
            if finished:
                recorded, _ = await off_loop(
                    "record", queue.settle, self.ctx.store, self.id, finished, 0, 0.0
                )
                await off_loop("publish", self._count, finished, recorded)
            await self._shutdown()

    async def _may_exit(self) -> bool:
        """Whether this idle worker may exit now. A background worker lets go of its lock first, so
        a submission from then on starts a worker of its own, and looks at the queue once more: a
        submission that came while it still held the lock started no worker, and its trials are
        this one's to run, unless another worker has taken the lock since."""
        if self.lock is None:
            return True
        self.lock.release()
        if not await off_loop("look for work", queue.has_open_trials, self.ctx.store):
            return True
        return not self.lock.take()

    async def _keep_up(self) -> None:
        """Upkeep at a steady pace for the worker's whole life, whatever the main loop waits for."""
        interval = min(1.0, self.config.lease_ttl / 3)
        while True:
            await self._upkeep()
            await asyncio.sleep(interval)

    async def _wait_for_finished(self) -> set[asyncio.Task[TrialOutcome]]:
        """Every trial that has finished by the time one does. Trials that end together share one
        write transaction; one that ends alone is recorded, and its slot refilled, at once: holding
        it a few milliseconds for a second one to share with left a slot empty for that long after
        nearly every trial (at two trials per process a second one rarely ends that soon)."""
        running = [task for _, task in self._running.values()]
        done, _ = await asyncio.wait(
            running, timeout=self.config.idle_poll, return_when=asyncio.FIRST_COMPLETED
        )
        return done

    def _settle(
        self, finished: list[tuple[ClaimedTrial, TrialOutcome]], free: int
    ) -> list[tuple[ClaimedTrial, TrialSpec | None]]:
        """One trip off the event loop per wake-up: record the finished trials and claim new ones
        in one write transaction, publish what was recorded, and prepare the claimed trials' specs.
        Each trip waits for a thread and for the interpreter lock behind the running trials'
        Python, milliseconds on a busy worker; one trip instead of one per step and per trial keeps
        that out of the time between a trial's end and the next one's start."""
        recorded, claimed = queue.settle(self.ctx.store, self.id, finished, free, self.config.lease_ttl)
        self._count(finished, recorded)
        return [(trial, self._prepared(trial)) for trial in claimed]

    def _prepared(self, claimed: ClaimedTrial) -> TrialSpec | None:
        """The trial's spec, or None to prepare it on its own trip (a store that was locked is waited
        out there; a trial that cannot be prepared fails there with the reason)."""
        try:
            return self._specs.build(claimed, run_id_of(claimed))
        except Exception:  # prepared again alone, where every failure is handled and logged
            return None

    def _start(self, claimed: ClaimedTrial, spec: TrialSpec | None = None) -> None:
        task = asyncio.create_task(self._trials.run(claimed, spec), name=claimed.trial_id)
        self._running[claimed.trial_id] = (claimed, task)

    def _collect(
        self, done: set[asyncio.Task[TrialOutcome]]
    ) -> tuple[list[tuple[ClaimedTrial, TrialOutcome]], list[ClaimedTrial]]:
        """The finished trials with their outcomes, and the trials to hand back to the queue. A task
        upkeep already took away (its lease was lost) is no longer this worker's to report."""
        finished: list[tuple[ClaimedTrial, TrialOutcome]] = []
        handed_back: list[ClaimedTrial] = []
        for task in done:
            entry = self._running.get(task.get_name())
            if entry is None or entry[1] is not task:
                continue
            claimed, _ = self._running.pop(task.get_name())
            if task.cancelled():
                finished.append((claimed, TrialOutcome(status=TrialStatus.CANCELLED)))
            elif isinstance(task.exception(), HandedBack):
                handed_back.append(claimed)
            else:
                finished.append((claimed, task.result()))
        return finished, handed_back

    def _hand_back_runs(self, claimed: list[ClaimedTrial]) -> None:
        leases.release(self.ctx.store, claimed)
        for trial in claimed:
            self.ctx.artifacts.discard(run_id_of(trial))

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
                self._publish(run_id_of(claimed), claimed.trial_id)
                self.completed += 1
            else:
                self.ctx.artifacts.discard(run_id_of(claimed))
                log.warning(
                    "trial %s: lease lost before its result was recorded; discarded", claimed.trial_id
                )

    async def _upkeep(self) -> None:
        """Renew leases, stop cancelled or lost trials, reap dead workers' trials (those whose leases
        expired, and at once those of workers on this host whose process is gone), heartbeat."""
        held = {claimed.trial_id: claimed for claimed, _ in self._running.values()}
        lost = await off_loop(
            "renew leases", leases.renew, self.ctx.store, self.id, held.values(), self.config.lease_ttl
        )
        cancelled = await off_loop("read cancellations", queue.cancel_requested, self.ctx.store, held)
        # Trials that finished meanwhile are the main loop's now (their results may be recorded).
        still = {tid for tid, (claimed, _) in self._running.items() if held.get(tid) is claimed}
        lost &= still
        for trial_id in lost | (cancelled & still):
            self._running[trial_id][1].cancel()
        for trial_id in lost:
            log.warning("trial %s: lease lost (taken over after it expired); its run is stopped", trial_id)
            claimed, task = self._running.pop(trial_id)
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await off_loop("discard", self.ctx.artifacts.discard, run_id_of(claimed))
        await off_loop("reap expired leases", leases.reap_expired, self.ctx.store)
        await off_loop("reap dead workers' trials", leases.reap_abandoned, self.ctx.store, gone)
        for run_id, trial_id in list(self._unpublished.items()):
            await asyncio.to_thread(self._publish, run_id, trial_id)
        await off_loop("heartbeat", self._heartbeat)

    def _heartbeat(self) -> None:
        with self.ctx.store.write() as session:
            session.execute(update(WorkerRow).where(WorkerRow.id == self.id).values(heartbeat_at=time.time()))

    async def _sweep_leftovers(self) -> None:
        """Remove what the instances of workers on this host that died left behind (they could not
        remove it themselves): each environment provider sweeps its own."""
        removed = await sweep_leftovers()
        if removed:
            log.info("removed %d leftover(s) of workers that are gone", len(removed))

    async def _close_shared(self) -> None:
        """What this worker's trials shared (Docker's bridges and proxies) goes with the worker;
        each provider closes its own."""
        for problem in await close_shared():
            log.warning("%s", problem)

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
                    host=this_host(),
                    pid=os.getpid(),
                    capacity=self.config.capacity,
                    background=self.config.background,
                    # The process's own start: with the pid, what tells it from one that reuses the pid.
                    started_at=datetime.fromtimestamp(start_time(), UTC),
                    heartbeat_at=time.time(),
                )
            )

    async def _shutdown(self) -> None:
        """Stop what still runs and hand it back to the queue (or record it cancelled), then deregister."""
        held = [claimed for claimed, _ in self._running.values()]
        cancelled = await off_loop(
            "read cancellations", queue.cancel_requested, self.ctx.store, list(self._running)
        )
        for _, task in self._running.values():
            task.cancel()
        for _, task in list(self._running.values()):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._running.clear()
        await off_loop("hand back", self._settle_held, held, cancelled)
        await close_clients()  # model connections belong to this event loop, which ends with the worker

    def _settle_held(self, held: list[ClaimedTrial], cancelled: set[str]) -> None:
        for claimed in held:
            if claimed.trial_id in cancelled:
                recorded = queue.finish(self.ctx.store, claimed, TrialOutcome(status=TrialStatus.CANCELLED))
                self._count([(claimed, TrialOutcome(status=TrialStatus.CANCELLED))], [recorded])
            else:
                self.ctx.artifacts.discard(run_id_of(claimed))
        leases.release(self.ctx.store, [c for c in held if c.trial_id not in cancelled])
        with self.ctx.store.write() as session:
            session.execute(delete(WorkerRow).where(WorkerRow.id == self.id))
