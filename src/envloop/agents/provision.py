"""An installed agent CLI made available inside one trial's environment, from the worker's cache:
the agent's setup phase (`SetsUp.setup`), under its own timeout, never the agent's.

The install happens on the worker (agents/cache.py), once per version and platform; a trial then
only makes the cached tree visible inside its environment:

- read-only at `AGENTS_PATH/KEY`, when the environment can mount a worker directory
  (`mount_readonly(source, path)`: a bind mount in the bubblewrap sandbox, a volume of the
  container): nothing is copied and the trial's disk quota is not charged;
- where it is, when the environment already shows that worker directory (the bubblewrap sandbox
  shows the host's /usr read-only, so a cache under /usr/local costs nothing; a plain process
  group sees the host), found by the entry's mark holding its key;
- otherwise copied in with `put_dir` under the environment's `/tmp` (what every provider can do),
  which the trial's disk and, on a tmpfs, memory limits pay for.

Either way the trajectory gets one `install` tool step saying whether the install was made now,
waited for (another trial of the worker was making it) or found in the cache, and how long making
it visible took; the install's log is kept with the agent's logs (`agent/install.log`). The step
and the log so far are kept too when the setup's timeout cuts it short. A failed install ends the
trial as an `agent_setup_error` with the package manager's own last words (no registry, no network,
a version that does not exist, a missing native binary), unscored; an environment without the
`python3` a PyPI agent needs, as an `environment_error`.
"""

import asyncio
import contextlib
import dataclasses
import functools
import shutil
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from envloop.agents.base import AgentContext, AgentResult, AgentSetup
from envloop.agents.cache import (
    ENTRY_MARK,
    INSTALL_LOG,
    AgentCache,
    InstallCommand,
    Installed,
    InstallError,
    entry_key,
)
from envloop.agents.recipes import PYTHON_PROBE, NpmRecipe, PipRecipe, PythonTarget
from envloop.core.cancellable_thread import to_thread_cancellable
from envloop.core.status import ErrorType
from envloop.core.trajectory import ToolStep
from envloop.environments.contract import Environment

AGENTS_PATH = "/opt/envloop-agents"
"""Where a mounted cache entry appears inside an environment."""
_PROBE_TIMEOUT_SEC = 60.0
_INSTALLING: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]]" = (
    weakref.WeakKeyDictionary()
)
"""Per event loop, a lock per cache entry (`ensure_shared`)."""


@runtime_checkable
class MountsReadOnly(Protocol):
    """The environment hook this module asks of providers (see the module's docstring)."""

    async def mount_readonly(self, source: Path, path: str) -> None: ...


async def python_target(environment: Environment) -> PythonTarget | None:
    """The environment's `python3` (version, machine, C library), or None when it has none."""
    probe = await environment.exec(["python3", "-c", PYTHON_PROBE], timeout=_PROBE_TIMEOUT_SEC)
    fields = probe.stdout.split()
    if probe.exit_code != 0 or len(fields) != 5 or not (fields[0] + fields[1]).isdigit():
        return None
    major, minor, machine, libc, version = fields
    parts = [int(p) for p in version.split(".")[:2] if p.isdigit()] + [0, 0]
    return PythonTarget(int(major), int(minor), machine, libc, (parts[0], parts[1]))


async def provision(
    ctx: AgentContext, recipe: NpmRecipe | PipRecipe, version: str
) -> AgentSetup | AgentResult:
    """The recipe's tree at `version` inside the environment, or the failed trial's result."""
    if isinstance(recipe, PipRecipe):
        target = await python_target(ctx.environment)
        problem = recipe.problem(target)
        if problem is not None or target is None:
            # The task's image lacks what the agent needs: the environment's doing, not the install's.
            return _failure(problem or "no python3", ErrorType.ENVIRONMENT_ERROR)
        name, commands, checks = (
            recipe.name(version, target),
            recipe.commands(version, target),
            recipe.checks(),
        )
    else:
        name, commands, checks = recipe.name(version), recipe.commands(version), recipe.checks(version)
    step = ToolStep(call_id="install", tool="install", command=recipe.describe(version))
    started = time.monotonic()
    cache = AgentCache()
    try:
        try:
            installed = await ensure_shared(cache, name, commands, checks)
        except InstallError as exc:
            step.exit_code, step.error = 1, str(exc)
            step.duration_ms = (time.monotonic() - started) * 1000
            ctx.recorder.add(step)
            if exc.log is not None:
                await asyncio.to_thread(_keep_log, exc.log, ctx.log_path(INSTALL_LOG))
            return _failure(f"could not install {recipe.label} {version}: {exc}")
        await asyncio.to_thread(_keep_log, installed.path / INSTALL_LOG, ctx.log_path(INSTALL_LOG))
        shown = time.monotonic()
        inside = await make_visible(ctx.environment, installed)
    except asyncio.CancelledError:
        _cut_short(ctx, step, started, cache, name, commands)
        raise
    visible_sec = time.monotonic() - shown
    how = _how(ctx.environment, installed, inside)
    step.exit_code = 0
    step.stdout = f"{installed.key}: {_made(installed)}; {how} at {inside} in {visible_sec:.2f} s\n"
    step.duration_ms = (time.monotonic() - started) * 1000
    ctx.recorder.add(step)
    return AgentSetup(inside)


async def ensure_shared(
    cache: AgentCache, name: str, commands: Sequence[InstallCommand], checks: Sequence[str]
) -> Installed:
    """`cache.ensure` on a thread, one per entry and event loop at a time: the trials of a worker
    that start together wait for one install on the loop, not each on a thread of the loop's few
    (an executor full of waiters would stall every other trial's file work). Another worker
    process waits on the cache's lock as before."""
    locks = _INSTALLING.setdefault(asyncio.get_running_loop(), {})
    lock = locks.setdefault(entry_key(name, commands), asyncio.Lock())
    asked = time.monotonic()
    async with lock:
        waited = time.monotonic() - asked
        # A cancelled installer ends its install (nothing outlives its trial); the next trial
        # waiting for this lock starts it anew.
        installed = await to_thread_cancellable(functools.partial(cache.ensure, name, commands, checks))
    if installed.install_sec:
        return installed
    return dataclasses.replace(installed, waited_sec=installed.waited_sec + waited)


def _made(installed: Installed) -> str:
    if installed.install_sec:
        return f"installed in {installed.install_sec:.1f} s"
    if installed.waited_sec >= 0.1:
        return f"installed by another trial, waited for {installed.waited_sec:.1f} s"
    return "found in the cache"


def _cut_short(
    ctx: AgentContext,
    step: ToolStep,
    started: float,
    cache: AgentCache,
    name: str,
    commands: Sequence[InstallCommand],
) -> None:
    """The setup was cancelled (its timeout, a cancelled trial) while installing or copying: the
    step says so, and the install's log so far is kept. The install was ended with it; a trial
    still waiting for the same entry installs it anew."""
    step.duration_ms = (time.monotonic() - started) * 1000
    step.error = "cut short while installing or copying it in (the setup's timeout, or a cancelled trial)"
    ctx.recorder.add(step)
    with contextlib.suppress(OSError):  # the install may end, and its directory move, meanwhile
        log = cache.log_so_far(name, commands)
        if log is not None:
            _keep_log(log, ctx.log_path(INSTALL_LOG))


async def make_visible(
    environment: Environment, installed: Installed, *, probe_timeout: float = _PROBE_TIMEOUT_SEC
) -> str:
    """Where a cache entry is inside the environment: mounted read-only, already shown (the
    environment sees the worker's cache in place), or copied under its /tmp."""
    if isinstance(environment, MountsReadOnly):
        inside = f"{AGENTS_PATH}/{installed.key}"
        await environment.mount_readonly(installed.path, inside)
        return inside
    mark = await environment.exec(["cat", f"{installed.path}/{ENTRY_MARK}"], timeout=probe_timeout)
    if mark.exit_code == 0 and mark.stdout.strip() == installed.key:
        return str(installed.path)
    inside = f"{environment.visible.tmp}/envloop-agents/{installed.key}"
    await environment.put_dir(installed.path, inside)
    return inside


def _how(environment: Environment, installed: Installed, inside: str) -> str:
    if isinstance(environment, MountsReadOnly):
        return "mounted read-only"
    return "used where it is" if inside == str(installed.path) else "copied in"


def _keep_log(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)


def _failure(
    message: str,
    kind: Literal[ErrorType.AGENT_SETUP_ERROR, ErrorType.ENVIRONMENT_ERROR] = ErrorType.AGENT_SETUP_ERROR,
) -> AgentResult:
    """The agent never got to work: no verifier runs, and the trial has no reward."""
    return AgentResult(exit_code=None, error=message, error_type=kind, attempted=False)
