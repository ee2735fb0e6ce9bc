"""Loading a Harbor task directory unmodified, with one-line errors that name the file and the field.

A Harbor task is plain files: `task.toml`, `instruction.md`, `environment/` (Dockerfile and build
context), `tests/test.sh` and optionally `solution/solve.sh`. Tasks written for other harnesses must
load as they are, so unknown task.toml keys are kept rather than rejected; but a value envloop honours
(a timeout, a resource limit) must have the right type, because a silently coerced or ignored limit
would change what a run measures.
"""

import re
import tomllib
from pathlib import Path

import yaml
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from envloop.tasks.bounded import MAX_CONFIG_BYTES, ParseLimitError, load_toml, load_yaml, read_bounded
from envloop.tasks.digest import task_digest
from envloop.tasks.model import COMPOSE_FILE, HarborTask, TaskFormatError, TaskStep, instruction_problem
from envloop.tasks.task_toml import TaskConfig

TASK_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

_TOML_POSITION = re.compile(r"\s*\(at (?:line (\d+), column (\d+)|end of document)\)$")


def check_task_name(name: str, where: Path | str) -> str:
    """Task names end up in paths, URLs and environment variables, so they are kept to a safe alphabet."""
    if not TASK_NAME_PATTERN.fullmatch(name):
        raise TaskFormatError(
            where,
            f"{name!r} is not a valid task name (letters, digits, '.', '_', '-'; starting with a letter "
            "or digit; at most 128 characters)",
            field="name",
        )
    return name


def load_harbor_task(root: Path, *, name: str | None = None, digest: str | None = None) -> HarborTask:
    """Load and validate the task directory at `root`; its name defaults to the directory name, its
    digest is computed from its files unless given (a copy the store keeps under its digest).

    Errors name `root` as given (what the user typed); the returned task's `root` is absolute so that
    it stays valid wherever the caller runs it from.
    """
    if not root.is_dir():
        raise TaskFormatError(root, "not a task directory (no such directory)")
    task_name = check_task_name(name if name is not None else root.resolve().name, root)
    digest = digest or task_digest(root)
    config = load_task_config(root / "task.toml")
    _optional_file(root / "solution" / "solve.sh")
    _optional_dir(root / "environment")
    _check_compose_limits(root)
    _check_dockerfile_size(root)
    if config.steps:
        steps = _load_steps(root, config)
        instruction = ""
        if (root / "instruction.md").is_file():
            _check_instruction_size(root / "instruction.md")
            instruction = (root / "instruction.md").read_text(encoding="utf-8", errors="replace")
    else:
        steps = []
        instruction = _read_instruction(root / "instruction.md")
        _require_verifier(root / "tests", config, "the verifier entry point is required")
    return HarborTask(
        name=task_name,
        root=root.resolve(),
        config=config,
        instruction=instruction,
        digest=digest,
        steps=steps,
    )


def _load_steps(root: Path, config: TaskConfig) -> list[TaskStep]:
    """Each `[[steps]]` entry needs `steps/<name>/instruction.md` and a verifier: its own
    `tests/test.sh` or the task's."""
    names = [step.name for step in config.steps]
    duplicate = next((name for name in names if names.count(name) > 1), None)
    if duplicate is not None:
        raise TaskFormatError(root / "task.toml", f"step {duplicate!r} is declared twice", field="steps")
    shared_test = any((root / "tests" / name).is_file() for name in verifier_scripts(config))
    steps = []
    for step in config.steps:
        directory = root / "steps" / step.name
        instruction = _read_instruction(directory / "instruction.md")
        if not shared_test:
            _require_verifier(
                directory / "tests", config, "each step needs a verifier: its own or the task's tests/test.sh"
            )
        _optional_file(directory / "solution" / "solve.sh")
        steps.append(TaskStep(config=step, instruction=instruction, root=directory.resolve()))
    return steps


def verifier_scripts(config: TaskConfig) -> tuple[str, ...]:
    """The verifier entry points a task may have: `test.sh`, and for a Windows task `test.bat` too
    (such a task loads, and is refused by every environment of envloop when a job would run it)."""
    return ("test.sh", "test.bat") if config.environment.os == "windows" else ("test.sh",)


def _require_verifier(tests: Path, config: TaskConfig, why: str) -> None:
    names = verifier_scripts(config)
    found = next((tests / name for name in names if (tests / name).exists()), tests / names[0])
    _require_file(found, why)


def _check_compose_limits(root: Path) -> None:
    """The compose file over the parsing limits is refused when the task loads, before anything
    walks what it expands to; what it says is checked where it runs (tasks/compose.py).
    Other compose-like names are data of the build context, never parsed."""
    path = root / "environment" / COMPOSE_FILE
    if not path.is_file():
        return
    where = f"environment/{COMPOSE_FILE}"
    try:
        load_yaml(read_bounded(path, where).decode("utf-8", errors="replace"), where)
    except ParseLimitError as exc:
        raise TaskFormatError(root.name, str(exc)) from None
    except yaml.YAMLError:
        return  # said where the file is read for what it runs


def _check_dockerfile_size(root: Path) -> None:
    """Every surface reads the Dockerfile whole (the local plan, the build checks): one of megabytes
    is refused when the task loads, as a task.toml is."""
    path = root / "environment" / "Dockerfile"
    if path.is_file() and path.stat().st_size > MAX_CONFIG_BYTES:
        raise TaskFormatError(
            root.name,
            f"environment/Dockerfile: larger than the {MAX_CONFIG_BYTES:,} bytes a Dockerfile may have",
        )


def load_task_config(path: Path) -> TaskConfig:
    """Parse and validate task.toml; numbers are not coerced from strings (strict types)."""
    if path.is_file() and path.stat().st_size > MAX_CONFIG_BYTES:
        where = f"{path.parent.name}/{path.name}"  # never a host path: the server says it too
        raise TaskFormatError(where, f"larger than the {MAX_CONFIG_BYTES:,} bytes a task.toml may have")
    text = _read_text(path, "task.toml is required")
    try:
        data = load_toml(text, path.name)
    except ParseLimitError as exc:
        raise TaskFormatError(path.parent.name, str(exc)) from None
    except tomllib.TOMLDecodeError as exc:
        raise TaskFormatError(path, _toml_error_message(str(exc))) from None
    try:
        return TaskConfig.model_validate(data, strict=True)
    except ValidationError as exc:
        raise _config_error(path, exc) from None


def _toml_error_message(message: str) -> str:
    match = _TOML_POSITION.search(message)
    if match is None:
        return f"invalid TOML ({message})"
    line, column = match.groups()
    reason = message[: match.start()]
    if line is None:
        return f"end of file: invalid TOML ({reason})"
    return f"line {line}: invalid TOML ({reason}, column {column})"


def _config_error(path: Path, exc: ValidationError) -> TaskFormatError:
    problems = [(_loc(error["loc"]), _describe(error)) for error in exc.errors()]
    field, first = problems[0]
    rest = "".join(f"; {loc}: {message}" for loc, message in problems[1:])
    return TaskFormatError(path, first + rest, field=field)


def _loc(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc) or "(document)"


_TYPE_NAMES = {
    "float_type": "a number",
    "int_type": "an integer",
    "string_type": "a string",
    "bool_type": "true or false",
    "dict_type": "a table",
    "model_type": "a table",
    "model_attributes_type": "a table",
}


def _describe(error: ErrorDetails) -> str:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    given = error.get("input")
    if kind in _TYPE_NAMES:
        return f"must be {_TYPE_NAMES[kind]}, not {_toml_type(given)} {given!r}"
    if kind == "greater_than":
        return f"must be greater than {_bound(ctx.get('gt'))}"
    if kind == "greater_than_equal":
        return f"must be at least {_bound(ctx.get('ge'))}"
    if kind == "finite_number":
        return "must be a finite number"
    if kind == "value_error":
        return str(ctx.get("error", error["msg"]))
    message = str(error["msg"])
    return message[:1].lower() + message[1:]


def _bound(value: object) -> str:
    return format(value, "g") if isinstance(value, int | float) else str(value)


def _toml_type(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "table"
    return type(value).__name__


def _read_text(path: Path, missing: str) -> str:
    if not path.is_file():
        raise TaskFormatError(path, f"missing ({missing})" if not path.exists() else "not a regular file")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TaskFormatError(path, f"not valid UTF-8 (byte {exc.start})") from None


def _check_instruction_size(path: Path) -> None:
    problem = instruction_problem(path.stat().st_size)
    if problem is not None:
        raise TaskFormatError(path, problem)


def _read_instruction(path: Path) -> str:
    if path.is_file():
        _check_instruction_size(path)
    text = _read_text(path, "the instruction given to the agent is required")
    if not text.strip():
        raise TaskFormatError(path, "is empty (the instruction given to the agent is required)")
    return text


def _require_file(path: Path, why: str) -> None:
    if not path.exists():
        raise TaskFormatError(path, f"missing ({why})")
    if not path.is_file():
        raise TaskFormatError(path, "not a regular file")


def _optional_file(path: Path) -> None:
    if path.exists() and not path.is_file():
        raise TaskFormatError(path, "not a regular file")


def _optional_dir(path: Path) -> None:
    if path.exists() and not path.is_dir():
        raise TaskFormatError(path, "not a directory")
