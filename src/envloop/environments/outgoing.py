"""What leaves one instance for its trial: a command's captured output and the files copied out,
bounded, charged to what the trial may keep, masked, and the warnings that say what was cut.

`Environment` (environments/contract.py) routes everything that leaves an instance through its
`Outgoing`, so no provider can forget a step; this module is apart from the contract so the contract
stays the page a provider reads (what it must implement), and these rules, which a provider never
calls, are read in one place. The mechanics are beside it: bounded writing in capture.py, copying
and masking files in keeping.py.
"""

import asyncio
import functools
import os
import secrets
import shutil
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path, PurePosixPath

from envloop.core.masking import mask_text
from envloop.environments.base import CommandRun, ExecResult, RunOutcome
from envloop.environments.capture import BoundedWriter, capture_file
from envloop.environments.keeping import KeepBudget, keep_file, keep_tree, small_plain_tree

_DROPPED_WARNINGS = 5
"""Commands whose dropped output the trial's warnings name, at most (the captures say the rest)."""

StartRun = Callable[[BoundedWriter, BoundedWriter], Awaitable[RunOutcome]]
"""A provider's run of one command, its stdout and stderr written to the two writers."""
CopyOut = Callable[[Path], Awaitable[list[str]]]
"""A provider's raw copy of a directory inside to a new worker directory: a note per entry left out."""


class Outgoing:
    """The trial's `kept` budget, its `warnings` and its secrets, shared with the instance that
    owns them, and what a command's output and a copied directory go through on their way out."""

    def __init__(self, kept: KeepBudget, warnings: list[str], secret_values: Sequence[str]) -> None:
        self._kept = kept
        self._warnings = warnings
        self._secrets = secret_values

    def mask(self, text: str) -> str:
        """`text` (a note, a path, a program's name) with the trial's secrets masked."""
        return mask_text(text, self._secrets)

    def warn_once(self, warning: str) -> None:
        """Add `warning` to the trial's warnings unless it is there already (a cut or a refusal
        that recurs with every command is said once)."""
        if warning not in self._warnings:
            self._warnings.append(warning)

    async def run(self, run: CommandRun, start: StartRun) -> ExecResult:
        """Run one command through `start`, its output captured bounded to `run`'s files (or
        nameless ones) and charged to the trial's budget; the result keeps each stream's tail,
        masked."""
        with capture_file(run.stdout_path) as out, capture_file(run.stderr_path) as err:
            writers = BoundedWriter(out), BoundedWriter(err)
            try:
                ran = await start(*writers)
            finally:
                for writer in writers:
                    writer.finish()
            self._note_dropped(run.command, writers)
            for capture in (out, err):
                kept = capture.file
                if capture.path is not None and kept is not None and not self._kept.charge_capture(kept):
                    self.warn_once("captured output beyond the trial's disk quota was cut off")
            (stdout, stdout_whole), (stderr, stderr_whole) = out.tail(), err.tail()
        return ExecResult(
            exit_code=ran.exit_code,
            stdout=self.mask(stdout),
            stderr=self.mask(stderr),
            timed_out=ran.timed_out,
            duration_sec=time.perf_counter() - run.clock,
            stdout_whole=stdout_whole,
            stderr_whole=stderr_whole,
        )

    async def copy_dir(self, copy_out: CopyOut, path: str, target: Path) -> list[str]:
        """Have `copy_out` copy the directory `path` inside, then keep that copy at `target`
        (environments/keeping.py); one masked note per file that was cut or left out."""
        target.parent.mkdir(parents=True, exist_ok=True)
        # The raw copy lands beside the target under a name no one else picks (the worker's own
        # directory, which no trial reaches); keeping it moves it into place or empties it.
        raw = target.parent / f".copy-out-{secrets.token_hex(8)}"
        try:
            notes = [f"{path}: {note}" for note in await copy_out(raw)]
            if raw.is_dir():
                keep = functools.partial(keep_tree, raw, target, self._secrets)
                notes += keep() if small_plain_tree(raw) else await asyncio.to_thread(keep)
        finally:
            _remove_leftover(raw)
        refused = self._kept.note()
        if refused is not None:
            notes.append(refused)
            if not any("were not kept" in warning for warning in self._warnings):
                self._warnings.append(f"{refused} (the collection log lists what was cut)")
        return [self.mask(note) for note in notes]

    def keep_file(self, data: bytes, path: str, target: Path) -> list[str]:
        """Keep the file `path` inside, read as `data`, at `target`; one masked note per cut."""
        return [self.mask(f"{path}: {note}") for note in keep_file(data, target, self._kept, self._secrets)]

    def _note_dropped(self, command: Sequence[str], writers: tuple[BoundedWriter, BoundedWriter]) -> None:
        """Say once per command how much of its output was dropped from the middle."""
        for name, writer in zip(("stdout", "stderr"), writers, strict=True):
            said = sum("dropped from the middle" in warning for warning in self._warnings)
            if writer.dropped and said < _DROPPED_WARNINGS:
                program = self.mask(PurePosixPath(command[0]).name if command else "?")[:80]
                self._warnings.append(
                    f"{program}: {writer.dropped:,} of {writer.written:,} bytes of its {name} were dropped "
                    "from the middle as they were written (its first and last bytes are kept)"
                )


def _remove_leftover(raw: Path) -> None:
    """What keeping a raw copy left of it (nothing, when its tree was moved or merged into place)."""
    if os.path.lexists(raw):
        shutil.rmtree(raw, ignore_errors=True)
