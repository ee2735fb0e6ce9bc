"""The on-disk part of an instance: its directories, initial `/app` content, and removal.

Files are copied, never hardlinked, from the frozen task: a command may write to anything it is
given, and a hardlink would let it change the stored task for every later trial.
"""

import contextlib
import functools
import hashlib
import os
import posixpath
import shutil
import stat
from pathlib import Path

from pydantic import BaseModel

from envloop.environments.base import EnvironmentSetupError
from envloop.environments.keeping import walk_tree
from envloop.environments.local import quota
from envloop.environments.local.bwrap import SYSTEM_DIRS
from envloop.tasks.dockerfile import DEFAULT_WORKDIR, DockerfilePlan
from envloop.tasks.model import HarborTask

_RESERVED = (*SYSTEM_DIRS, "/proc", "/dev", "/tmp", "/logs", "/tests", "/solution")


RUNTIME_DIR = Path("/run/envloop")
_MAKE_TRIES = 5
"""Tries to make an instance's root while sweeps of empty parents keep removing its parent."""
_COPY_CHUNK = 1 << 20
"""The most `copy_file` reads at once: a task's file of any size is copied in bounded steps."""


class InstancePaths(BaseModel):
    """Host-side directories of one local instance; all of them live under `root` and go at
    teardown. Only the local provider knows them: callers reach files through the Environment.

    `root` itself belongs to the worker: a trial can write below `app`, `tmp` and `logs` but can
    create nothing next to them, so `tests`, `solution` and `verifier_logs` are made only by the
    worker, fresh for the phase that needs them."""

    root: Path
    app: Path
    logs: Path
    tests: Path
    solution: Path
    tmp: Path
    home: Path
    verifier_logs: Path
    verifier_home: Path
    verifier_tmp: Path
    """The verifier's own `/tmp` in the sandbox: nothing an agent left in its `/tmp` reaches it."""

    @property
    def agent_logs(self) -> Path:
        return self.logs / "agent"


def instance_parent(requested: Path, *, for_other_uid: bool) -> Path:
    """Where instances are made. An instance that runs as a uid of its own must be reachable by that
    uid, so it cannot live below a private home (`/root/.envloop` is 0700): such instances live in
    `/run/envloop/<key>`, a root-owned directory anyone may pass through but not list, with one key per
    requested directory so two stores' workers never meet. Each instance root is a tmpfs there. The
    directory is made with the instance (`make_root`), and goes once no instance is left in it
    (`sweep_empty_parents`)."""
    return RUNTIME_DIR / _key(requested) if for_other_uid else requested


@functools.lru_cache(maxsize=16)
def _key(requested: Path) -> str:
    """One key per store, computed once per process: resolving the path walks each of its parts
    (a `stat` apiece), and every instance asked again."""
    return hashlib.sha256(str(requested.resolve()).encode()).hexdigest()[:16]


def make_root(root: Path, *, private_parent: bool) -> None:
    """Make the instance's root directory, and its parent. A private parent (below `/run/envloop`)
    is made with its own mode, never by `mkdir -p` (which would let anyone list the runs in it),
    and made again if a sweep removed it, empty, between the two steps."""
    if not private_parent:
        root.mkdir(parents=True)
        return
    for _ in range(_MAKE_TRIES):
        try:
            for directory in (RUNTIME_DIR, root.parent):
                _private_directory(directory)
            root.mkdir()
            return
        except FileNotFoundError:
            continue
    raise EnvironmentSetupError("the instance's directory could not be made: its parent kept vanishing")


def _private_directory(directory: Path) -> None:
    with contextlib.suppress(FileExistsError):
        directory.mkdir(mode=0o711)
    info = directory.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise EnvironmentSetupError(f"{directory} is not a directory owned by the worker")
    directory.chmod(0o711)


def sweep_empty_parents() -> list[str]:
    """Remove each directory below `/run/envloop` that holds no instance: there is one per store
    ever served on this host, and a deleted store's would otherwise stay for good (thousands on a
    machine that runs test suites). A worker of a live store makes its own again for its next
    instance (`make_root`); one that holds an instance is not empty, and stays."""
    try:
        parents = list(RUNTIME_DIR.iterdir())
    except OSError:
        return []
    removed = []
    for path in parents:
        try:
            path.rmdir()
        except OSError:  # not empty, or not a directory: not this sweep's to remove
            continue
        removed.append(f"empty instance directory {path.name}")
    return removed


def instances_under(requested: Path) -> list[Path]:
    """Every instance directory there is for `requested`, wherever it was made."""
    found: list[Path] = []
    for parent in (requested, RUNTIME_DIR / _key(requested)):
        if parent.is_dir():
            found += sorted(parent.iterdir())
    return found


def instance_paths(root: Path) -> InstancePaths:
    return InstancePaths(
        root=root,
        app=root / "app",
        logs=root / "logs",
        tests=root / "tests",
        solution=root / "solution",
        tmp=root / "tmp",
        home=root / "tmp" / "home",
        verifier_logs=root / "verifier",
        verifier_home=root / "verifier-home",
        verifier_tmp=root / "verifier-tmp",
    )


def resolve_workdir(task: HarborTask, plan: DockerfilePlan) -> str:
    """task.toml `[environment] workdir`, else the Dockerfile's WORKDIR, else /app."""
    chosen = task.config.environment.workdir or plan.workdir or DEFAULT_WORKDIR
    workdir = posixpath.normpath(chosen)
    if not workdir.startswith("/") or any(
        workdir == r or workdir.startswith(r + "/") or r.startswith(workdir + "/") for r in ("/", *_RESERVED)
    ):
        raise EnvironmentSetupError(
            f"workdir {chosen!r} cannot be used: it must be an absolute, private path"
        )
    return workdir


def create_instance(paths: InstancePaths, plan: DockerfilePlan, workdir: str, owner: int | None) -> None:
    """Fresh directories, then the Dockerfile's copies into the app directory; everything the
    trial may write is handed to its host uid (`owner`), the root stays the worker's.

    The root is private: the worker's, entered by the trial's own group alone (its uid's group), so
    no other local user can read the task's hidden tests below it while the trial runs."""
    if owner is not None:
        os.chown(paths.root, -1, owner)
        paths.root.chmod(0o710)
    else:
        paths.root.chmod(0o700)
    for directory in (paths.app, paths.agent_logs, paths.logs / "verifier", paths.home):
        directory.mkdir(parents=True)
    for step in plan.copies:
        relative = posixpath.relpath(step.target, workdir)
        target = paths.app if relative == "." else paths.app / relative
        if step.source.is_dir():
            shutil.copytree(step.source, target, symlinks=True, dirs_exist_ok=True)
            continue
        if step.into_directory:
            target = target / step.source.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(step.source, target)
    if owner is not None:
        for directory in (paths.app, paths.tmp, paths.logs):
            give_tree(directory, owner)


def give_tree(root: Path, owner: int) -> None:
    """chown a tree the worker just made to the trial's host uid, never through a link."""
    os.chown(root, owner, owner, follow_symlinks=False)
    for entry in walk_tree(root):
        os.chown(entry.path, owner, owner, follow_symlinks=False)


def fresh_layers(sources: list[Path], target: Path) -> None:
    """A new private copy at `target` of each source directory laid over the previous ones (a
    multi-step task's tests: the task's, then the step's); an empty directory when there is none."""
    remove_tree(target)
    target.mkdir()
    for source in sources:
        shutil.copytree(source, target, symlinks=True, copy_function=copy_file, dirs_exist_ok=True)


def copy_file(source: str, target: str) -> None:
    """`shutil.copy` (the content and the mode, through a link already at `target`, into a
    directory already there) with a third of its system calls: it runs for every file of every
    trial's tests, and `shutil.copy` stats both paths four times over before it copies."""
    fd_in = os.open(source, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd_in)
        if stat.S_ISFIFO(info.st_mode):
            raise shutil.SpecialFileError(f"`{source}` is a named pipe")
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
        try:
            fd_out = os.open(target, flags, 0o600)
        except IsADirectoryError:
            fd_out = os.open(Path(target, Path(source).name), flags, 0o600)
        try:
            while chunk := os.read(fd_in, max(min(info.st_size, _COPY_CHUNK), 1)):
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd_out, view) :]
            os.fchmod(fd_out, stat.S_IMODE(info.st_mode))
        finally:
            os.close(fd_out)
    finally:
        os.close(fd_in)


def empty_directory(path: Path) -> None:
    """Make `path` an empty directory the owner can write to, reusing it when it already is one.

    What a command left there is never trusted: a symlink, a file, contents or a directory it made
    unwritable are all replaced."""
    owner_rwx = stat.S_IRWXU
    try:
        info = path.lstat()
        if stat.S_ISDIR(info.st_mode) and info.st_mode & owner_rwx == owner_rwx:
            with os.scandir(path) as entries:
                if next(entries, None) is None:
                    return
    except OSError:
        pass
    remove_tree(path)
    path.mkdir()


def _grant_owner_access(root: Path) -> None:
    # A command may leave read-only directories behind; removal must not stop at them.
    owner_rwx = stat.S_IRUSR | stat.S_IWUSR | stat.S_IXUSR
    with contextlib.suppress(OSError):
        root.chmod(root.stat().st_mode | owner_rwx)
    for dirpath, dirnames, _ in os.walk(root):
        for name in dirnames:
            child = Path(dirpath, name)
            with contextlib.suppress(OSError):
                if not child.is_symlink():
                    child.chmod(child.stat().st_mode | owner_rwx)


def remove_instance(root: Path) -> None:
    """Remove an instance left behind (its worker died): its quota file system, else its files."""
    if quota.unmount_quota(root):
        root.rmdir()
    else:
        remove_tree(root)


def remove_tree(root: Path) -> None:
    if root.is_symlink() or root.is_file():
        root.unlink()
        return
    if not root.exists():
        return
    try:
        shutil.rmtree(root)
    except OSError:
        _grant_owner_access(root)
        shutil.rmtree(root)
