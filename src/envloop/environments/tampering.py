"""What an agent changed that a verifier sharing its environment may execute or read.

In a container an agent may be root, and a file it plants where the verifier's own runtime looks (a
`.pth` in site-packages, a shell start-up file, a binary early on PATH, a git or pip configuration,
the tests' or the verifier logs' directory) runs as part of the verifier. envloop cannot tell such a
change from a legitimate one (an agent asked to install a package writes site-packages), so it never
changes a reward by itself: the trial is flagged with the kind and the paths, and a job that must
not trust its agents runs every verifier in a fresh environment (`--verifier-environment
separate`). Pure: the paths come from the environment (in docker, the container's writable layer).
"""

import fnmatch
from collections.abc import Iterable

from pydantic import BaseModel

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
        ("/usr/local/bin/*", "/usr/local/sbin/*", "/usr/bin/*", "/usr/sbin/*", "/bin/*", "/sbin/*"),
    ),
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
    ("/tests", ("/tests", "/tests/*")),
    ("/logs/verifier", ("/logs/verifier/*",)),
)
MAX_PATHS = 50
"""Paths named per kind (the count is always whole)."""


class Tampering(BaseModel):
    """One kind of change a verifier may run or read, with the paths (first MAX_PATHS) and count."""

    kind: str
    paths: list[str]
    count: int

    def flag(self) -> TrialFlag:
        """`tamper` with the kind and count (`3 python import path changes`) and the paths named."""
        changes = "change" if self.count == 1 else "changes"
        return TrialFlag(kind=TAMPER_FLAG, detail=f"{self.count} {self.kind} {changes}", paths=self.paths)


def tampering(changed: Iterable[str], ignored: Iterable[str] = ()) -> list[Tampering]:
    """The changed paths grouped by the kind a verifier may run, in a fixed order; a path under one
    of `ignored` (the environment's own, such as the agent's working directory) never counts."""
    skip = tuple(prefix.rstrip("/") + "/" for prefix in ignored)
    found: dict[str, list[str]] = {}
    for path in sorted(set(changed)):
        if path.startswith(skip):
            continue
        kind = next(
            (kind for kind, patterns in _KINDS if any(fnmatch.fnmatchcase(path, p) for p in patterns)), None
        )
        if kind is not None:
            found.setdefault(kind, []).append(path)
    order = [kind for kind, _ in _KINDS]
    return [
        Tampering(kind=kind, paths=paths[:MAX_PATHS], count=len(paths))
        for kind, paths in sorted(found.items(), key=lambda item: order.index(item[0]))
    ]
