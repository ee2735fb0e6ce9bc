"""Finding the Harbor task directories a user points at: one task, or a folder of tasks.

A folder of tasks is read strictly: every visible subfolder must be a task directory. Skipping a
subfolder whose task.toml is misspelled would silently shrink a dataset, and a smaller dataset would
report a different score without anyone noticing.
"""

from pathlib import Path

from envloop.tasks.digest import IGNORED_DIRS
from envloop.tasks.harbor import load_harbor_task
from envloop.tasks.model import HarborTask, TaskFormatError

TASK_FILE = "task.toml"


def is_task_dir(path: Path) -> bool:
    return path.is_dir() and (path / TASK_FILE).is_file()


def discover_tasks(path: Path) -> list[Path]:
    """`path` itself when it is a task directory, else its immediate task subfolders sorted by name.

    Hidden subfolders (`.git`, `.github`, …) and cache folders are skipped; any other subfolder
    without a task.toml is an error. Files next to the tasks (a README, a dataset manifest) are allowed.
    """
    if not path.is_dir():
        raise TaskFormatError(path, "no such directory" if not path.exists() else "not a directory")
    if is_task_dir(path):
        return [path]
    found: list[Path] = []
    for child in sorted(path.iterdir(), key=lambda p: p.name):
        if not child.is_dir() or child.name.startswith(".") or child.name in IGNORED_DIRS:
            continue
        if not is_task_dir(child):
            raise TaskFormatError(child, f"not a task directory (no {TASK_FILE})")
        found.append(child)
    if not found:
        raise TaskFormatError(path, f"no task directories found (a task directory holds a {TASK_FILE})")
    return found


def load_tasks(path: Path) -> list[HarborTask]:
    """Load every task under `path` (see `discover_tasks`), in order.

    Names are compared case-insensitively: `Hello` and `hello` would collide in artifact stores on
    case-insensitive file systems and confuse anyone reading a results table.
    """
    tasks: list[HarborTask] = []
    seen: dict[str, Path] = {}
    for task_dir in discover_tasks(path):
        task = load_harbor_task(task_dir)
        key = task.name.casefold()
        if key in seen:
            raise TaskFormatError(
                task_dir, f"duplicate task name {task.name!r} (also used by {seen[key]})", field="name"
            )
        seen[key] = task_dir
        tasks.append(task)
    return tasks
