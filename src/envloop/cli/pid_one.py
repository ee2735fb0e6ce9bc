"""`el` as the first process of its PID namespace: a container started without an init.

Every orphan in a PID namespace goes to its first process, and bwrap leaves one per sandboxed
command (its child inside the sandbox, which outlives the bwrap that reported the command's exit).
A worker, or an `el job submit --wait` whose background worker runs the trials, in that place would
hold them all as zombies, never collected: two per trivial trial, until the container's pid limit
refuses every new command. So `el` started there splits in two before anything else: a child runs
the command, and the first process stays as its init, as `docker run --init` would give it: it
collects every process that ends below it, passes on the signals sent to it (not those a terminal
sends its whole foreground group, which the child gets itself), and exits as the command did.
"""

import contextlib
import os
import signal
from collections.abc import Set
from typing import NoReturn

FORWARDED = frozenset(
    {signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2}
)
_FROM_A_TERMINAL = 0x80
"""`si_code` SI_KERNEL: a signal the kernel sent, as a terminal's Ctrl-C to its foreground group."""


def split_off_init() -> None:
    """Return in the process that runs the command: this one, unless it is PID 1; then a child, and
    this process stays as the child's init and never returns."""
    if os.getpid() != 1:
        return
    watched = FORWARDED | {signal.SIGCHLD}
    # Blocked before the fork, so no signal meant for the command can slip by in between.
    before = signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    command = os.fork()
    if command == 0:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
        return
    _serve_as_init(command, watched)


def _serve_as_init(command: int, watched: Set[signal.Signals]) -> NoReturn:
    while True:
        info = signal.sigwaitinfo(watched)
        if info.si_signo == signal.SIGCHLD:
            status = _collect(command)
            if status is not None:
                code = os.waitstatus_to_exitcode(status)
                os._exit(code if code >= 0 else 128 - code)
        elif info.si_code != _FROM_A_TERMINAL:
            with contextlib.suppress(ProcessLookupError):
                os.kill(command, info.si_signo)


def _collect(command: int) -> int | None:
    """Collect every process that has ended; the command's wait status if it is among them."""
    ended = None
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return ended
        if pid == 0:
            return ended
        if pid == command:
            ended = status
