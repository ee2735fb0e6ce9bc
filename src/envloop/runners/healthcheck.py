"""Harbor's healthchecks: a task's `[environment.healthcheck]` is probed before the agent starts,
a step's `[steps.healthcheck]` before that step's agent, in whichever environment the trial runs.

The rules are Docker's HEALTHCHECK, in seconds (Harbor's defaults in tasks/task_toml.py): the command
runs (as root, through `sh -c`) until it exits 0, each probe cut at `timeout_sec`. While the start
period lasts, a failure does not count and the next probe comes after `start_interval_sec`; after
it, probes come every `interval_sec` and `retries` consecutive failures mean the environment never
became healthy. Such a trial is an `environment_error` naming the healthcheck, never a score: the
agent never started in the environment its task describes. The whole wait stays under the
operator's timeout ceiling.
"""

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path

from envloop.core.status import ErrorType
from envloop.core.trial import TrialError
from envloop.environments import Environment, EnvironmentSetupError
from envloop.environments.policy import operator_policy
from envloop.tasks.task_toml import HealthcheckSection

_TAIL_CHARS = 300


@dataclass
class HealthReport:
    """How a healthcheck went: None `error` when it passed. `lines` go into the setup log."""

    error: TrialError | None
    lines: list[str] = field(default_factory=list)


def _tail(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _TAIL_CHARS else "…" + text[-_TAIL_CHARS:]


async def wait_healthy(
    environment: Environment, check: HealthcheckSection, where: str, captures: Path
) -> HealthReport:
    """Probe `check` in `environment` until it passes or fails for good. `where` names it in
    messages (`[environment.healthcheck]`); each probe's output streams under `captures`."""
    ceiling = operator_policy().max_timeout_sec
    started = time.monotonic()
    counted_failures = 0
    probes = 0
    lines = [f"{where}: {check.command}"]
    last = ""
    while True:
        probes += 1
        elapsed = time.monotonic() - started
        in_start_period = elapsed < check.start_period_sec
        timeout = min(check.timeout_sec, max(ceiling - elapsed, 0.001))
        try:
            result = await environment.exec(
                ["sh", "-c", check.command],
                user="root",
                timeout=timeout,
                stdout_path=captures / f"probe-{probes}.stdout.txt",
                stderr_path=captures / f"probe-{probes}.stderr.txt",
            )
        except EnvironmentSetupError as exc:
            message = f"{where} could not run: {exc}"
            return HealthReport(
                TrialError(type=ErrorType.ENVIRONMENT_ERROR, message=message), [*lines, message]
            )
        spent = time.monotonic() - started
        if result.exit_code == 0:
            lines.append(f"probe {probes} passed after {spent:.1f} s")
            return HealthReport(None, lines)
        if result.timed_out:
            last = f"timed out after {check.timeout_sec:g} s"
        else:
            output = _tail(result.stderr or result.stdout)
            last = f"exit {result.exit_code}" + (f": {output}" if output else "")
        if not in_start_period:
            counted_failures += 1
        lines.append(f"probe {probes} failed ({last})" + (" in the start period" if in_start_period else ""))
        if counted_failures >= check.retries:
            message = (
                f"{where} never passed: `{_tail(check.command)}` failed {counted_failures} "
                f"consecutive probe(s) after the start period (last: {last}); the agent did not start"
            )
            return HealthReport(TrialError(type=ErrorType.ENVIRONMENT_ERROR, message=message), lines)
        pause = check.start_interval_sec if in_start_period else check.interval_sec
        if spent + pause >= ceiling:
            message = (
                f"{where} did not pass within the operator's {ceiling:g} s ceiling "
                f"({probes} probe(s), last: {last}); the agent did not start"
            )
            return HealthReport(TrialError(type=ErrorType.ENVIRONMENT_ERROR, message=message), lines)
        await asyncio.sleep(pause)
