"""Finding the Harbor task directories a user points at: one task, or a tree of tasks.

A folder holding `task.toml` is a task; any other folder is searched at any depth (Harbor's own
examples nest theirs: `verifier-mode-matrix/separate-explicit`). A task below the top level is
named by its path, with `.` for `/` (`verifier-mode-matrix.separate-explicit`), so names stay unique.

A tree is read strictly: a visible folder with no task anywhere below it is an error. Skipping a
folder whose task.toml is misspelled would silently shrink a dataset, and a smaller dataset would
report a different score without anyone noticing.
"""

from pathlib import Path

from envloop.tasks.digest import IGNORED_DIRS
from envloop.tasks.harbor import load_harbor_task
from envloop.tasks.model import HarborTask, TaskFormatError

TASK_FILE = "task.toml"


def is_task_dir(path: Path) -> bool:
    return path.is_dir() and (path / TASK_FILE).is_file()


MAX_TREE_DEPTH = 8
_TASK_PARTS = ("instruction.md", "tests", "environment", "solution", "steps")
"""What a task directory holds besides task.toml: a folder with any of them is a task missing its
task.toml, not a folder of tasks."""


def discover_tasks(path: Path) -> list[Path]:
    """`path` itself when it is a task directory, else every task directory below it, depth first
    in name order.

    Hidden folders (`.git`, `.github`, …) and cache folders are skipped, and links are never
    followed; a folder with no task below it is an error. Files next to the tasks (a README, a
    dataset manifest) are allowed.
    """
    if not path.is_dir():
        raise TaskFormatError(path, "no such directory" if not path.exists() else "not a directory")
    if is_task_dir(path):
        return [path]
    found = _tasks_below(path, depth=1)
    if not found:
        raise TaskFormatError(path, f"no task directories found (a task directory holds a {TASK_FILE})")
    return found


def _tasks_below(folder: Path, depth: int) -> list[Path]:
    found: list[Path] = []
    for child in sorted(folder.iterdir(), key=lambda p: p.name):
        hidden = child.name.startswith(".") or child.name in IGNORED_DIRS
        if hidden or child.is_symlink() or not child.is_dir():
            continue
        if is_task_dir(child):
            found.append(child)
            continue
        looks_like_task = any((child / name).exists() for name in _TASK_PARTS)
        below = [] if looks_like_task or depth >= MAX_TREE_DEPTH else _tasks_below(child, depth + 1)
        if not below:
            why = "" if looks_like_task else " and no task below it"
            raise TaskFormatError(child, f"not a task directory (no {TASK_FILE}){why}")
        found += below
    return found


def task_name(root: Path, task_dir: Path) -> str:
    """A task's name in the dataset: its folder's name, or its path below `root` joined by `.`."""
    if task_dir == root:
        return task_dir.resolve().name
    return ".".join(task_dir.relative_to(root).parts)


def load_tasks(path: Path) -> list[HarborTask]:
    """Load every task under `path` (see `discover_tasks`), in order.

    Names are compared case-insensitively: `Hello` and `hello` would collide in artifact stores on
    case-insensitive file systems and confuse anyone reading a results table.
    """
    tasks: list[HarborTask] = []
    seen: dict[str, Path] = {}
    for task_dir in discover_tasks(path):
        task = load_harbor_task(task_dir, name=task_name(path, task_dir))
        key = task.name.casefold()
        if key in seen:
            raise TaskFormatError(
                task_dir, f"duplicate task name {task.name!r} (also used by {seen[key]})", field="name"
            )
        seen[key] = task_dir
        tasks.append(task)
    return tasks
