"""Who a trial runs as on the host: a uid of its own, never the worker's.

A worker that runs as root hands each live instance an unused host uid from a high range that no
real account uses. Everything the trial starts runs as that uid (dropped with `setpriv` before the
sandbox starts, with no way back: no capabilities), so even a command that breaks
out of its mount namespace finds the host's files, the store and other trials' files owned by
someone else. Inside the sandbox a user namespace maps that one uid to the uid the task asks for
(root by name only: it holds no capability). A worker that is not root cannot switch uids; its
trials run as its own user, and the instance says so.
"""

import os
import pwd
import threading

from envloop.environments.base import EnvironmentSetupError
from envloop.tasks.task_toml import TaskUser

_RANGE_START = 0x7000_0000
_SLOTS_PER_PROCESS = 1000
_PROCESS_BLOCKS = 100_000
TRIAL_UID_RANGE = (_RANGE_START, _RANGE_START + _PROCESS_BLOCKS * _SLOTS_PER_PROCESS - 1)
"""Every host uid a trial may run as (first, last): what the host's rules for trials match."""


DEFAULT_AGENT_UID = 1000
"""Who the agent is inside the sandbox unless its task names a user: not root."""


def sandbox_uid(user: TaskUser | None, default: int, where: str) -> int:
    """The uid inside the sandbox for a task's `user` field: a number, `root`, or a name the
    sandbox's /etc/passwd knows. A user that only the task's image would create cannot be honoured
    here, and the instance refuses it rather than run as someone else."""
    if user is None:
        return default
    if isinstance(user, int) or user.isdigit():
        uid = int(user)
        if not 0 <= uid < 65534:
            raise EnvironmentSetupError(f"{where} = {user!r}: not a usable uid")
        return uid
    if user == "root":  # every verifier's user by default: no need to read /etc/passwd for it
        return 0
    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        raise EnvironmentSetupError(
            f"{where} = {user!r}: no such user in the local environment (users made by the task's "
            "Dockerfile exist only in its image)"
        ) from None


def can_switch_user() -> bool:
    return os.geteuid() == 0


class HostUidPool:
    """Host uids for live instances; a uid is handed out again only after its instance is gone.

    Each process draws from its own block (by pid), so two workers on one host do not share uids."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._free: list[int] = []
        self._next = 0

    def take(self) -> int:
        with self._lock:
            if self._free:
                return self._free.pop()
            if self._next >= _SLOTS_PER_PROCESS:
                raise RuntimeError(f"more than {_SLOTS_PER_PROCESS} live instances in one worker")
            slot = self._next
            self._next += 1
        block = os.getpid() % _PROCESS_BLOCKS
        return _RANGE_START + block * _SLOTS_PER_PROCESS + slot

    def give_back(self, uid: int) -> None:
        with self._lock:
            self._free.append(uid)


HOST_UIDS = HostUidPool()


def setpriv_prefix(uid: int) -> list[str]:
    """Drop to `uid` (its own group, no supplementary groups, no capability left in any set) and
    exec the rest. No-new-privileges is left to bwrap, which sets it for the sandboxed command: set
    here, it would keep bwrap from mapping its uid inside pasta's namespace."""
    return [
        "/usr/bin/setpriv",
        f"--reuid={uid}",
        f"--regid={uid}",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
    ]
