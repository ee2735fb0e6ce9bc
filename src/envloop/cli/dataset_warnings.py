"""A dataset's warnings as a person reads them: each distinct one once, with the tasks it concerns.

A push keeps one line a task and warning (`task NAME: MESSAGE`, what `--json` gives); a folder of a
thousand tasks built alike would print the same message a thousand times, and the one message that
differs would be lost among them."""

SHOWN_NAMES = 3
"""How many of a warning's tasks are named before the rest are counted."""

_PREFIX = "task "
_SEPARATOR = ": "


def grouped_warnings(warnings: list[str]) -> list[str]:
    """`warnings` with the lines that say the same of several tasks said once, naming how many and
    the first few, in the order each message first came; a line about no task stays as it is."""
    tasks_by_message: dict[tuple[bool, str], list[str]] = {}
    for line in warnings:
        name, separator, message = line.removeprefix(_PREFIX).partition(_SEPARATOR)
        if not line.startswith(_PREFIX) or not separator:
            tasks_by_message.setdefault((False, line), [])
            continue
        tasks = tasks_by_message.setdefault((True, message), [])
        if name not in tasks:
            tasks.append(name)
    return [
        _line(message, tasks) if of_tasks else message
        for (of_tasks, message), tasks in tasks_by_message.items()
    ]


def _line(message: str, tasks: list[str]) -> str:
    if len(tasks) == 1:
        return f"{_PREFIX}{tasks[0]}{_SEPARATOR}{message}"
    named = ", ".join(tasks[:SHOWN_NAMES])
    rest = len(tasks) - SHOWN_NAMES
    which = f"{named} and {rest} more" if rest > 0 else named
    return f"{len(tasks)} tasks ({which}){_SEPARATOR}{message}"
