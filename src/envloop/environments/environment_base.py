"""What every environment must do, done once: the base class of every provider's instances, an
explicit subclass of the `Environment` Protocol (environments/contract.py, where each public method's
promise is written).

A provider says how to run one command, move bytes in and out, give a directory fresh contents,
apply a network policy and stop (the abstract methods below and the contract's, all named as a command
inside sees paths). Everything a provider must not get wrong is here, so a plugin cannot forget it:

- the variables: the provider's defaults, the task's `[environment] env`, then envloop's trial
  variables, each name and value checked (environments/variables.py);
- what leaves is masked: the output tails every caller sees, and every file copied out (through
  environments/keeping.py, which also cuts runaway logs and never follows a link);
- captured output is bounded while it is written (environments/capture.py): a provider's `_run`
  writes into a `BoundedWriter`, never into a file directly, so no command's output can fill the
  host's disk before it ends;
- the tests and the solution are shown only to the commands that need them: a fresh copy for that
  command, removed before any later command runs, and a verifier's log directory the agent never had;
- network policies: the operator's ceiling applies to every phase, and each switch is recorded.

Paths are always those of the inside; no caller learns a host path of the instance.
"""

import asyncio
import contextlib
import os
import tempfile
import time
from abc import abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Literal, final

from pydantic import BaseModel

from envloop.core.clock import utc_now
from envloop.core.masking import mask_text
from envloop.core.trial import SandboxMode, TrialFlag, TrialSpec
from envloop.environments.base import (
    NO_MOUNTS,
    EnvironmentSetupError,
    ExecResult,
    Mount,
    Mounts,
    VisiblePaths,
)
from envloop.environments.capture import BoundedWriter
from envloop.environments.contract import CommandObserver, CommandRun, Environment
from envloop.environments.keeping import (
    MAX_KEPT_FILE_BYTES,
    MAX_KEPT_FILES,
    KeepBudget,
    keep_tree,
    mask_bytes,
)
from envloop.environments.policy import NETWORK_VARIABLE, EffectiveLimits
from envloop.environments.procs import read_tail
from envloop.environments.variables import checked_env, trial_variables
from envloop.tasks.model import HarborTask, NetworkMode, TaskUser
from envloop.tasks.phases import NO_NETWORK, NetworkPolicy
from envloop.tasks.variables import resolve_env

PathKind = Literal["file", "directory", "other"]
_DROPPED_WARNINGS = 5
"""Commands whose dropped output the trial's warnings name, at most (the captures say the rest)."""


class RunOutcome(BaseModel):
    """How one command ended, as a provider reports it: None exit code when killed on timeout."""

    exit_code: int | None
    timed_out: bool


class EnvironmentBase(Environment):
    """One instance of a trial's environment. Providers subclass it, implementing its private hooks
    and the contract's abstract methods (`stop`, `snapshot`, the gateway, `resource_problem`)."""

    default_network: NetworkMode = "no-network"

    mode: SandboxMode

    def __init__(
        self,
        *,
        task: HarborTask,
        spec: TrialSpec,
        visible: VisiblePaths,
        limits: EffectiveLimits,
        note: str,
        warnings: list[str],
        defaults: Mapping[str, str],
        network: NetworkPolicy = NO_NETWORK,
        fresh_home: str = "/verifier-home",
        fresh_tmp: str | None = None,
    ) -> None:
        self.visible = visible
        self.limits = limits
        self._note = note
        self.warnings = warnings
        self.flags: list[TrialFlag] = []
        self._network = network
        self._task = task
        self._secrets = spec.secret_values
        self._variables = checked_env(
            {
                **defaults,
                **resolve_env(task.config.environment.env, spec.params),
                **trial_variables(spec, visible),
            }
        )
        self._shown: set[Mount] = set()
        self.kept = KeepBudget(files=MAX_KEPT_FILES, bytes=limits.disk_mb << 20)
        """What the trial may still keep: captured output and copied files count against its disk
        quota, and against a cap on the number of files."""
        self.fresh_home = fresh_home
        """Where a command shown `fresh_home` finds its empty HOME."""
        self.fresh_tmp = fresh_tmp
        """The provider's own name for a command's empty `/tmp` (None: it cannot give one)."""
        self._observer: CommandObserver | None = None
        self._network_log: list[str] = []
        """Each phase's policy, in order (`agent public`), for the note."""

    @property
    @final
    def network(self) -> NetworkPolicy:
        """The policy in force now (the provider started the instance with it); only
        `set_network` and `enter_network` change it, after the provider applied it."""
        return self._network

    @property
    @final
    def note(self) -> str:
        """What isolates the instance and how its limits hold, then each phase's network."""
        if not self._network_log:
            return self._note
        return f"{self._note}; network: {', '.join(self._network_log)}"

    # ---- what a provider implements -------------------------------------------------------------

    @abstractmethod
    async def _run(
        self,
        command: Sequence[str],
        *,
        user: TaskUser | None,
        cwd: str,
        env: dict[str, str],
        timeout: float | None,
        stdout: BoundedWriter,
        stderr: BoundedWriter,
    ) -> RunOutcome:
        """Run `command` to its end (or `timeout`), writing its output as it comes to the two
        writers (the worker's files, bounded), killing every process it started on timeout or
        cancellation. `user` None means the task's agent user."""

    @abstractmethod
    async def _write(self, path: str, data: bytes) -> None:
        """Create or replace the file `path`, readable by every user; never through a link."""

    @abstractmethod
    async def _read(self, path: str, max_bytes: int) -> bytes | None:
        """The first `max_bytes` of the regular file `path`; None when there is none; OSError when
        it cannot be read. Never through a link."""

    @abstractmethod
    async def _copy_out(self, path: str, target: Path, budget: KeepBudget) -> list[str]:
        """Copy the directory `path` to the new worker directory `target`: directories and regular
        files only, never through a link, no more than `budget` allows (charging it). A missing
        `path` copies nothing. One note per entry left out. The base class masks what arrives."""

    @abstractmethod
    async def _kind(self, path: str) -> PathKind | None:
        """What `path` is (never following a link at its end); None when nothing is there."""

    @abstractmethod
    async def _copy_in(self, source: Path, path: str) -> None:
        """Make `path` a copy of the worker's file or directory `source` (replacing what was there,
        parents created), owned by root and readable by every user."""

    @abstractmethod
    async def _place(self, path: str, layers: Sequence[Path] | None) -> None:
        """Make `path` a fresh directory: the `layers` laid over each other, owned by root and
        read-only for everyone else, or (None) empty and writable by every user. Whatever a
        command left at `path` goes first."""

    @abstractmethod
    async def _clear(self, path: str) -> None:
        """Remove `path` and everything below it."""

    @abstractmethod
    async def _apply_network(self, policy: NetworkPolicy) -> None:
        """Switch the instance to `policy` (already checked and capped by the base class)."""

    # ---- what every caller uses -----------------------------------------------------------------

    @final
    async def exec(
        self,
        command: Sequence[str],
        *,
        user: TaskUser | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        stdout_path: Path | None = None,
        stderr_path: Path | None = None,
        mounts: Mounts = NO_MOUNTS,
    ) -> ExecResult:
        observer = self._observer
        run = CommandRun(command, utc_now(), time.perf_counter(), stdout_path, stderr_path)
        try:
            await self._show(mounts)
            variables = checked_env({**self._variables, **self.network_variables(), **(env or {})})
            if "fresh_home" in mounts:
                variables["HOME"] = self.fresh_home
            with _capture(stdout_path) as out, _capture(stderr_path) as err:
                writers = BoundedWriter(out), BoundedWriter(err)
                try:
                    ran = await self._run(
                        command,
                        user=user,
                        cwd=cwd or self.visible.app,
                        env=variables,
                        timeout=timeout,
                        stdout=writers[0],
                        stderr=writers[1],
                    )
                finally:
                    for writer in writers:
                        writer.finish()
                self._note_dropped(command, writers)
                named = ((out, stdout_path), (err, stderr_path))
                self._charge(*(capture for capture, path in named if path is not None))
                (stdout, stdout_whole), (stderr, stderr_whole) = read_tail(out), read_tail(err)
        except BaseException:
            if observer is not None:
                await observer.ran(run, None)
            raise
        result = ExecResult(
            exit_code=ran.exit_code,
            stdout=mask_text(stdout, self._secrets),
            stderr=mask_text(stderr, self._secrets),
            timed_out=ran.timed_out,
            duration_sec=time.perf_counter() - run.clock,
            stdout_whole=stdout_whole,
            stderr_whole=stderr_whole,
        )
        if observer is not None:
            await observer.ran(run, result)
        return result

    @final
    def observe(self, observer: CommandObserver | None) -> None:
        self._observer = observer

    def _note_dropped(self, command: Sequence[str], writers: tuple[BoundedWriter, BoundedWriter]) -> None:
        """Say once per command how much of its output was dropped from the middle."""
        for name, writer in zip(("stdout", "stderr"), writers, strict=True):
            said = sum("dropped from the middle" in warning for warning in self.warnings)
            if writer.dropped and said < _DROPPED_WARNINGS:
                program = mask_text(PurePosixPath(command[0]).name if command else "?", self._secrets)[:80]
                self.warnings.append(
                    f"{program}: {writer.dropped:,} of {writer.written:,} bytes of its {name} were dropped "
                    "from the middle as they were written (its first and last bytes are kept)"
                )

    def _charge(self, *captures: BinaryIO) -> None:
        """Charge a command's captured output (files the caller keeps) to what the trial may keep;
        output beyond it is cut off (and the trial says so once)."""
        for capture in captures:
            capture.flush()
            size = os.fstat(capture.fileno()).st_size
            allowed = min(size, self.kept.bytes)
            self.kept.bytes -= allowed
            self.kept.files = max(0, self.kept.files - 1)
            if allowed < size:
                capture.truncate(allowed)
                self.kept.refused_bytes += size - allowed
                note = "captured output beyond the trial's disk quota was cut off"
                if note not in self.warnings:
                    self.warnings.append(note)

    async def _show(self, mounts: Mounts) -> None:
        """Fresh tests, solution or verifier logs for this command; tests and solution a previous
        command was shown go first (a later step's agent never sees an earlier step's tests)."""
        gone = [path for mount in sorted(self._shown - set(mounts)) if (path := self._mount_path(mount))]
        fresh: list[tuple[str, Sequence[Path] | None]] = []
        if "tests" in mounts:
            fresh.append((self.visible.tests, self._task.tests_sources or [self._task.tests_dir]))
        if "solution" in mounts:
            fresh.append((self.visible.solution, [self._task.solution_dir]))
        if "verifier_logs" in mounts:
            fresh.append((self.visible.verifier_logs, None))
        if "fresh_home" in mounts:
            fresh.append((self.fresh_home, None))
        if "fresh_tmp" in mounts and self.fresh_tmp is not None:
            fresh.append((self.fresh_tmp, None))
        if not gone and not fresh:
            return
        try:
            await self._prepare(gone, fresh)
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise EnvironmentSetupError(f"could not prepare {', '.join(sorted(mounts))}: {reason}") from None
        self._shown = {mount for mount in mounts if mount != "verifier_logs"}

    async def _prepare(self, gone: list[str], fresh: list[tuple[str, Sequence[Path] | None]]) -> None:
        """Clear each of `gone`, then place each of `fresh`; a provider may do it all at once."""
        for path in gone:
            await self._clear(path)
        for path, layers in fresh:
            await self._place(path, layers)

    def _mount_path(self, mount: Mount) -> str | None:
        paths = {
            "tests": self.visible.tests,
            "solution": self.visible.solution,
            "fresh_home": self.fresh_home,
            "fresh_tmp": self.fresh_tmp,
        }
        return paths.get(mount, self.visible.verifier_logs)

    @final
    async def write_file(self, path: str, data: bytes) -> None:
        await self._write(_checked_path(path), data)

    @final
    async def read_file(self, path: str, max_bytes: int) -> bytes | None:
        return await self._read(_checked_path(path), max_bytes)

    @final
    async def put_dir(self, source: Path, path: str) -> None:
        await self._copy_in(source, _checked_path(path))

    @final
    async def get_dir(self, path: str, target: Path) -> list[str]:
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".copy-out-") as scratch:
            raw = Path(scratch) / "tree"
            notes = [f"{path}: {note}" for note in await self._copy_out(_checked_path(path), raw, self.kept)]
            if raw.is_dir():
                notes += await asyncio.to_thread(keep_tree, raw, target, self._secrets)
        refused = self.kept.note()
        if refused is not None:
            notes.append(refused)
            if not any("were not kept" in warning for warning in self.warnings):
                self.warnings.append(f"{refused} (the collection log lists what was cut)")
        return [mask_text(note, self._secrets) for note in notes]

    @final
    async def get_path(self, path: str, target: Path) -> list[str]:
        kind = await self._kind(_checked_path(path))
        if kind == "directory":
            return await self.get_dir(path, target)
        if kind is None:
            return []
        if kind == "other":
            return [mask_text(f"{path}: not a regular file or directory: not kept", self._secrets)]
        data = await self._read(path, MAX_KEPT_FILE_BYTES + 1)
        if data is None:
            return []
        if not self.kept.take(min(len(data), MAX_KEPT_FILE_BYTES)):
            return [
                mask_text(f"{path}: not kept, the trial's cap on what it keeps was used up", self._secrets)
            ]
        notes = []
        if len(data) > MAX_KEPT_FILE_BYTES:
            data = data[:MAX_KEPT_FILE_BYTES]
            notes.append(
                mask_text(f"{path}: only its first {MAX_KEPT_FILE_BYTES:,} bytes were kept", self._secrets)
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(mask_bytes(data, self._secrets))
        return notes

    @final
    async def set_network(self, policy: NetworkPolicy, phase: str = "") -> None:
        if policy.mode != "no-network" and not self.limits.network:
            asked = policy.describe()
            note = f"{NETWORK_VARIABLE}=none: the trial ran without the network it asked for ({asked})"
            if note not in self.warnings:
                self.warnings.append(note)
            policy = NO_NETWORK
        if phase:
            self._network_log.append(f"{phase} {policy.describe()}")
        if policy == self._network:
            return
        await self._apply_network(policy)
        self._network = policy

    @final
    async def enter_network(self, policy: NetworkPolicy) -> None:
        """Apply `policy` whatever the instance believes is in force (a provider that started it on
        a network of its own calls this once, to reach the baseline)."""
        await self._apply_network(policy)
        self._network = policy

    def network_variables(self) -> dict[str, str]:
        """Variables the network in force needs (an allowlist's proxy); none by default."""
        return {}


def _checked_path(path: str) -> str:
    if not path.startswith("/") or "\0" in path:
        raise EnvironmentSetupError(f"{path[:200]!r} is not an absolute path inside the environment")
    return path


@contextlib.contextmanager
def _capture(path: Path | None) -> Iterator[BinaryIO]:
    """A capture file of the worker's (never inside the instance), or a nameless temporary one."""
    if path is None:
        with tempfile.TemporaryFile() as handle:
            yield handle
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w+b", buffering=0) as handle:
        yield handle
