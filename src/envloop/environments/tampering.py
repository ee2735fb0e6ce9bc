"""What an agent changed that a verifier sharing its environment ran or read, as trial flags.

In a container an agent may be root, and a file it changes where the verifier's own runtime looks
(a `.pth` or a `.pyc`, a shell start-up file, a binary or an `/etc/alternatives` link on PATH, a
shared library, `ld.so.cache`) runs as part of the verifier. envloop cannot tell such a change from
a legitimate one (an agent asked to install a package writes site-packages), so it never changes a
reward by itself: the trial is flagged with the files, and a job that must not trust its agents
runs every verifier in a fresh environment (`--verifier-environment separate`).

Where the environment records what the verifier opened (docker: access_record.py), every changed
file the verifier read, executed or followed is flagged, whatever its path (`verifier_reads`); the
kinds below only name them. Where it cannot, the changes are flagged by kind of path alone
(`tampering`), whether or not the verifier used them. Where the changes were too many to list
(millions of files, whether to hide one among them or not), the flood itself is flagged
(`unchecked`): nothing the verifier read could be vouched for. Pure: the paths come from the
environment.
"""

import fnmatch
from collections.abc import Iterable

from pydantic import BaseModel

from envloop.core.posix_paths import within
from envloop.core.trial import TAMPER_FLAG, TrialFlag

_KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "python import path",
        (
            "*/site-packages/*",
            "*/dist-packages/*",
            "*.pth",
            "*/sitecustomize.py",
            "*/usercustomize.py",
            "*.pyc",
            "/usr/lib/python3*/*.py",
            "/usr/local/lib/python3*/*.py",
        ),
    ),
    (
        "shell start-up file",
        (
            "/etc/profile",
            "/etc/profile.d/*",
            "/etc/bash.bashrc",
            "/etc/environment",
            "/etc/zsh/*",
            "*/.bashrc",
            "*/.bash_profile",
            "*/.bash_login",
            "*/.profile",
            "*/.zshrc",
            "*/.zshenv",
        ),
    ),
    (
        "binary on PATH",
        (
            "/usr/local/bin/*",
            "/usr/local/sbin/*",
            "/usr/bin/*",
            "/usr/sbin/*",
            "/bin/*",
            "/sbin/*",
            "/etc/alternatives/*",
        ),
    ),
    ("shared library", ("*.so", "*.so.*", "/etc/ld.so.cache")),
    (
        "tool configuration",
        (
            "/etc/gitconfig",
            "*/.gitconfig",
            "*/.config/git/*",
            "/etc/pip.conf",
            "*/.config/pip/*",
            "*/.pip/*",
            "/etc/npmrc",
            "*/.npmrc",
            "*/.cargo/config*",
            "/etc/ld.so.preload",
            "/etc/ld.so.conf",
            "/etc/ld.so.conf.d/*",
        ),
    ),
)
OTHER = "other file"
"""The kind of a file the verifier read that no pattern above names."""
UNCHECKED = "unchecked changes"
"""The kind of a flood of changes too large to read."""
MAX_PATHS = 50
"""Paths named per kind (the count is always whole)."""


class Tampering(BaseModel):
    """One kind of change, with the paths (first MAX_PATHS) and count; `read` when the verifier is
    known to have used them, rather than merely able to."""

    kind: str
    paths: list[str]
    count: int
    read: bool = False
    reason: str | None = None
    """Why nothing could be checked, which the flag then says instead (`unchecked`)."""

    def flag(self) -> TrialFlag:
        """`tamper` with the kind and count (`3 python import path changes read by the verifier`)
        and the paths named."""
        if self.reason is not None:
            return TrialFlag(kind=TAMPER_FLAG, detail=self.reason, paths=self.paths)
        changes = "change" if self.count == 1 else "changes"
        how = "read by the verifier" if self.read else "where a verifier looks"
        return TrialFlag(
            kind=TAMPER_FLAG, detail=f"{self.count} {self.kind} {changes} {how}", paths=self.paths
        )


def outside(changed: Iterable[str], ignored: Iterable[str]) -> list[str]:
    """The changed paths, sorted and once each, but those at or under one of `ignored`."""
    prefixes = list(ignored)
    return [path for path in sorted(set(changed)) if not any(within(path, prefix) for prefix in prefixes)]


def tampering(changed: Iterable[str], ignored: Iterable[str] = ()) -> list[Tampering]:
    """The changed paths of a kind a verifier may run, grouped in a fixed order; a path under one of
    `ignored` (the agent's working directory, what envloop itself writes) never counts."""
    return _grouped(outside(changed, ignored), read=False)


def verifier_reads(touched: Iterable[str]) -> list[Tampering]:
    """Every changed path the verifier read, executed or followed, grouped by kind (`other file`
    for a path of no kind above)."""
    return _grouped(sorted(set(touched)), read=True)


def unchecked(limit: int) -> Tampering:
    """More than `limit` files changed in the environment the verifier shared: they were not read,
    so which of them the verifier used is unknown."""
    reason = (
        f"more than {limit:,} files changed in the agent's environment; what the verifier read "
        "could not be checked (a verifier environment of its own, `--verifier-environment "
        "separate`, needs no check)"
    )
    return Tampering(kind=UNCHECKED, paths=[], count=limit, reason=reason)


def _kind(path: str) -> str | None:
    matching = (kind for kind, patterns in _KINDS if any(fnmatch.fnmatchcase(path, p) for p in patterns))
    return next(matching, None)


def _grouped(paths: list[str], *, read: bool) -> list[Tampering]:
    found: dict[str, list[str]] = {}
    for path in paths:
        kind = _kind(path) or (OTHER if read else None)
        if kind is not None:
            found.setdefault(kind, []).append(path)
    order = [kind for kind, _ in _KINDS] + [OTHER]
    return [
        Tampering(kind=kind, paths=paths[:MAX_PATHS], count=len(paths), read=read)
        for kind, paths in sorted(found.items(), key=lambda item: order.index(item[0]))
    ]
