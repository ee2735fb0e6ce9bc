"""One claimed trial as a worker runs it: its spec prepared (unless the claim's trip prepared it),
its task fetched, the executor's outcome settled, and every failure of its own made the trial's
outcome, never the worker's.

A trial whose task archive the artifact store cannot give, or whose run was lost with the machine
running it, goes back to the queue (`HandedBack`) until it has been claimed `HAND_BACK_RUNS` times;
then it fails with an infrastructure error that says so.
"""

import asyncio
import logging
from pathlib import Path

from sqlalchemy import select

from envloop.core.trial import TrialOutcome, TrialSpec, crashed, infrastructure_failure
from envloop.runners.verdict import settle_outcome
from envloop.scheduling.executor import Executor, RunLost
from envloop.scheduling.store_calls import off_loop
from envloop.scheduling.trial_specs import TrialSpecs
from envloop.store.artifacts import STRUCTURED_RESULT, ArtifactStoreUnavailableError
from envloop.store.context import Context
from envloop.store.queue import ClaimedTrial
from envloop.store.tables import Trial

log = logging.getLogger("envloop.worker")
FETCH_DELAYS_SEC = (0.5, 2.0)
"""Pauses between the tries of one run to fetch a task archive from the artifact store."""
HAND_BACK_RUNS = 3
"""A trial whose archive this worker cannot fetch, or whose run was lost with the machine running it,
goes back to the queue for a new run until it has been claimed this many times; then it fails with
an infrastructure error that says so."""


class HandedBack(Exception):
    """The trial goes back to the queue for a new run (its archive was out of reach, or its run lost)."""


def run_id_of(claimed: ClaimedTrial) -> str:
    """The same name TrialSpec.run_id gives this run (one lease of the trial)."""
    return f"{claimed.trial_id}.r{claimed.lease_token}"


def _preparation_problem(exc: Exception) -> str:
    """What a user is told when a trial could not be prepared: the kind of failure and the OS's
    reason, never the worker's own paths (the whole exception goes to the worker's log)."""
    if isinstance(exc, OSError):
        return f"could not prepare trial: {exc.strerror or type(exc).__name__} (details in the worker's log)"
    return f"could not prepare trial: {type(exc).__name__} (details in the worker's log)"


class TrialExecution:
    """How a worker runs the trials it claimed: with its context, executor and spec builder."""

    def __init__(self, ctx: Context, executor: Executor, specs: TrialSpecs) -> None:
        self.ctx = ctx
        self.executor = executor
        self.specs = specs

    async def run(self, claimed: ClaimedTrial, prepared: TrialSpec | None = None) -> TrialOutcome:
        """The trial's outcome; raises `HandedBack` when it goes back to the queue instead."""
        spec = prepared
        if spec is None:
            try:
                spec = await off_loop("prepare", self.specs.build, claimed, run_id_of(claimed))
            except Exception as exc:  # a broken task archive must not take the worker down
                log.exception("could not prepare trial %s", claimed.trial_id)
                return infrastructure_failure(_preparation_problem(exc))
        if spec.task_dir is None and spec.row is None:
            try:
                task_dir = await self._task_dir(claimed)
                spec = spec.model_copy(update={"task_dir": task_dir, "task_digest": claimed.task_digest})
            except ArtifactStoreUnavailableError as exc:
                reason = "could not fetch the task archive on {runs} runs: {exc} (retryable: run it again "
                return await self._hand_back(claimed, exc, reason + "once the artifact store is reachable)")
            except Exception as exc:  # a broken task archive must not take the worker down
                log.exception("could not prepare trial %s", claimed.trial_id)
                return infrastructure_failure(_preparation_problem(exc))
        try:
            outcome = await self.executor.execute(spec)
            # Noted once here so reading a job's results never has to look for the file per trial.
            outcome.structured_result = (spec.artifacts_dir / STRUCTURED_RESULT).is_file()
            return settle_outcome(outcome, spec)
        except asyncio.CancelledError:
            raise
        except RunLost as exc:
            return await self._hand_back(claimed, exc, "lost its run on {runs} runs: {exc}")
        except Exception as exc:
            log.exception("trial %s crashed in the runner", spec.trial_id)
            return crashed(exc)

    async def _hand_back(self, claimed: ClaimedTrial, exc: Exception, failure: str) -> TrialOutcome:
        """Hand the trial back to the queue for a new run, or, once it has had its share of runs,
        fail it with `failure` (formatted with `runs` and `exc`)."""
        runs = await off_loop("count runs", self._runs_of, claimed.trial_id)
        if runs < HAND_BACK_RUNS:
            log.warning("trial %s: %s; handed back to the queue", claimed.trial_id, exc)
            raise HandedBack from exc
        return infrastructure_failure(failure.format(runs=runs, exc=exc))

    async def _task_dir(self, claimed: ClaimedTrial) -> Path:
        """The unpacked task, fetched through the artifact store (off the event loop) unless this
        machine already has it or its archive is a small one in a local store: then no thread is
        asked. On a busy worker the hop cost twenty times the unpacking (9 ms against 0.4), and the
        thread's file calls, each passing the interpreter lock back and forth, slowed the event
        loop's own. A few tries before the store is taken to be unavailable."""
        unpacked = self.ctx.artifacts.small_task_dir(claimed.task_digest)
        if unpacked is not None:
            return unpacked
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
