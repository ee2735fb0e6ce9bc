"""Terminal-Bench 1 tasks, taken as they are and written as their Harbor-format equivalent.

A TB1 task is a folder with `task.yaml` (the instruction, `max_agent_timeout_sec`,
`max_test_timeout_sec`, `parser_name`, …), a `Dockerfile` at its root, a `docker-compose.yaml`
whose `client` service is the trial's container (its `T_BENCH_*` variables are the harness's),
`run-tests.sh`, `solution.sh` or `solution.yaml`, and `tests/`. The Harbor equivalent:

- `instruction.md` from the instruction; `[agent]` and `[verifier]` timeouts from the two maxima;
- `environment/`: every other file of the task's root (the Dockerfile's build context, as TB1's
  compose file makes it; `solution.sh`, `run-tests.sh`, `tests/` and `task.yaml` too when the
  Dockerfile copies them by name), the client's `environment` as `[environment].env`, and the other compose
  services as sidecars in `environment/docker-compose.yaml`;
- `tests/`: the task's tests, `run-tests.sh` beside them (TB1 copies both to `$TEST_DIR`, /tests,
  the root `run-tests.sh` first and the folder's files after it, so a `tests/run-tests.sh` is the
  one that runs), and a `test.sh` that runs it and reads its output with TB1's parser
  (`tb1_verifiers.py`);
- `solution/solve.sh`: `solution.sh`, or `solution.yaml`'s commands one per line.

What TB1 means that the equivalent cannot keep, or a choice the user may not expect, is returned as
a note per task (`el dataset push` and `el dataset convert` print them). The mapping is documented
in docs/reference/task-format.md.
"""

import fnmatch
import json
import posixpath
import shlex
import shutil
from pathlib import Path
from typing import Any

import yaml

from envloop.tasks.bounded import ParseLimitError, load_yaml
from envloop.tasks.digest import IGNORED_DIRS
from envloop.tasks.dockerfile_images import instructions
from envloop.tasks.model import TaskFormatError
from envloop.tasks.tb1_verifiers import has_parser, unknown_parser_reason, verifier_script

TASK_YAML = "task.yaml"
COMPOSE_FILE = "docker-compose.yaml"
CLIENT_SERVICE = "client"
TEST_DIR = "/tests"
MAX_YAML_BYTES = 1 << 20
_CONTROL_FILES = {TASK_YAML, COMPOSE_FILE, "run-tests.sh", "solution.sh", "solution.yaml", "tests"}
_OWN_FILES = _CONTROL_FILES | {"Dockerfile", "tests/run-tests.sh"}
"""The files a push reads or writes over: a link among them could make it read a file outside the
task, or write through the link."""

T_BENCH_VALUES = {
    "T_BENCH_TEST_DIR": TEST_DIR,
    "T_BENCH_CONTAINER_LOGS_PATH": "/logs",
    "T_BENCH_CONTAINER_AGENT_LOGS_PATH": "/agent-logs",
}
"""What TB1's harness sets for the variables a task may use in a value (the client's `environment`,
a sidecar's); the image and container names it sets are its own and dropped with their keys."""
TB1_DEFAULT_TIMEOUTS = {"max_agent_timeout_sec": 360.0, "max_test_timeout_sec": 60.0}
"""What TB1's task model gives a task.yaml that names no timeout (its `Task` defaults), not
envloop's own defaults: a task runs with the limits it had in TB1."""
_DROPPED_KEYS = {"image", "container_name", "volumes"}
"""A service's keys that only TB1's harness gives meaning to: the names it picks, and the log
folders it mounts from the host."""


def is_tb1_task(path: Path) -> bool:
    return path.is_dir() and (path / TASK_YAML).is_file() and not (path / "task.toml").exists()


def holds_tb1_tasks(path: Path, depth: int = 0) -> bool:
    """Whether `path` is a TB1 task or has one below it (links and hidden folders are not followed)."""
    if is_tb1_task(path):
        return True
    if depth >= 8 or not path.is_dir() or (path / "task.toml").exists():
        return False
    return any(
        holds_tb1_tasks(child, depth + 1)
        for child in sorted(path.iterdir())
        if child.is_dir()
        and not child.is_symlink()
        and not child.name.startswith(".")
        and child.name not in IGNORED_DIRS
    )


def convert_tree(source: Path, dest: Path) -> list[tuple[Path, str]]:
    """Write `source` (a task or a folder of them, TB1 or Harbor) to `dest` with every TB1 task in
    Harbor's format and every Harbor task copied as it is; `dest` must not exist. Returns the notes
    on the TB1 tasks, each with the folder it wrote the task to."""
    if is_tb1_task(source):
        return [(dest, note) for note in convert_task(source, dest)]
    if (source / "task.toml").is_file():
        shutil.copytree(source, dest, symlinks=True)
        return []
    dest.mkdir(parents=True)
    notes: list[tuple[Path, str]] = []
    for child in sorted(source.iterdir()):
        if (
            child.is_dir()
            and not child.is_symlink()
            and not child.name.startswith(".")
            and child.name not in IGNORED_DIRS
        ):
            notes += convert_tree(child, dest / child.name)
    return notes


def _load_yaml(path: Path) -> Any:
    """A YAML file read as data: bounded in size, nodes and depth, and without aliases (a few lines
    of them can stand for billions of nodes), parsed by libyaml (PyYAML's own scanner takes hours
    over a few hundred kilobytes of `[`)."""
    try:
        if path.stat().st_size > MAX_YAML_BYTES:
            raise TaskFormatError(path, f"larger than {MAX_YAML_BYTES >> 20} MiB")
        return load_yaml(path.read_text(), str(path), aliases=False)
    except ParseLimitError as exc:
        raise TaskFormatError(path, str(exc).removeprefix(f"{path}: ")) from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise TaskFormatError(path, f"not valid YAML ({str(exc).splitlines()[0][:120]})") from None


def _instruction(config: dict[str, Any], path: Path) -> str:
    text = config.get("instruction")
    if text is None:
        # Earlier TB1 tasks keep it as `descriptions`, the `base` one being the instruction.
        descriptions = config.get("descriptions") or []
        base = [d for d in descriptions if isinstance(d, dict) and d.get("key", "base") == "base"]
        text = base[0].get("description") if base else None
    if not isinstance(text, str) or not text.strip():
        raise TaskFormatError(path, "no instruction", field="instruction")
    return text


def _seconds(config: dict[str, Any], key: str, path: Path) -> float:
    value = config.get(key)
    if value is None:
        return TB1_DEFAULT_TIMEOUTS[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise TaskFormatError(path, "must be a positive number of seconds", field=key)
    return float(value)


def _substitute(value: str) -> str:
    for name, replacement in T_BENCH_VALUES.items():
        value = value.replace(f"${{{name}}}", replacement).replace(f"${name}", replacement)
    return value


def _environment(service: dict[str, Any], path: Path) -> dict[str, str]:
    raw = service.get("environment") or {}
    pairs: dict[str, str] = {}
    if isinstance(raw, list):
        for entry in raw:
            name, _, value = str(entry).partition("=")
            pairs[name] = value
    elif isinstance(raw, dict):
        pairs = {str(k): "" if v is None else str(v) for k, v in raw.items()}
    else:
        raise TaskFormatError(
            path, "must be a list or a mapping", field=f"services.{CLIENT_SERVICE}.environment"
        )
    return {name: _substitute(value) for name, value in pairs.items()}


def _services(root: Path) -> tuple[dict[str, str], dict[str, Any]]:
    """The client's environment and the sidecars, from the task's compose file (absent: none)."""
    path = root / COMPOSE_FILE
    if not path.is_file():
        return {}, {}
    compose = _load_yaml(path)
    services = compose.get("services") if isinstance(compose, dict) else None
    if not isinstance(services, dict) or not isinstance(services.get(CLIENT_SERVICE), dict):
        raise TaskFormatError(
            path, f"no '{CLIENT_SERVICE}' service (the trial's container)", field="services"
        )
    client = services[CLIENT_SERVICE]
    build = client.get("build")
    dockerfile = build.get("dockerfile", "Dockerfile") if isinstance(build, dict) else "Dockerfile"
    context = build.get("context", ".") if isinstance(build, dict) else (build or ".")
    if dockerfile != "Dockerfile" or context not in (".", "./"):
        raise TaskFormatError(
            path, "the client must build the task's own Dockerfile", field="services.client.build"
        )
    sidecars: dict[str, Any] = {}
    for name, service in services.items():
        if name == CLIENT_SERVICE or not isinstance(service, dict):
            continue
        kept = {
            k: v
            for k, v in service.items()
            if k not in _DROPPED_KEYS or (k == "image" and "build" not in service)
        }
        if "environment" in kept:
            kept["environment"] = _environment(kept, path)
        sidecars[name] = kept
    main: dict[str, Any] = {}
    if sidecars and client.get("depends_on"):
        main["depends_on"] = client["depends_on"]
    return _environment(client, path), ({"services": {"main": main, **sidecars}} if sidecars else {})


def _solution(root: Path) -> str | None:
    if (root / "solution.sh").is_file():
        return (root / "solution.sh").read_text(errors="surrogateescape")
    if not (root / "solution.yaml").is_file():
        return None
    steps = _load_yaml(root / "solution.yaml")
    if not isinstance(steps, list):
        raise TaskFormatError(root / "solution.yaml", "must be a list of commands")
    commands = []
    for number, step in enumerate(steps, start=1):
        command = step.get("command") if isinstance(step, dict) else None
        if not isinstance(command, str):
            raise TaskFormatError(root / "solution.yaml", f"entry {number} has no command")
        commands.append(command)
    return "#!/bin/bash\n" + "\n".join(commands) + "\n"


def _toml_string(value: str) -> str:
    return json.dumps(value)


def _task_toml(config: dict[str, Any], env: dict[str, str], path: Path) -> str:
    lines = ['version = "1.0"', ""]
    agent = _seconds(config, "max_agent_timeout_sec", path)
    verifier = _seconds(config, "max_test_timeout_sec", path)
    lines += ["[agent]", f"timeout_sec = {agent}", "", "[verifier]", f"timeout_sec = {verifier}", ""]
    if env:
        lines += (
            ["[environment.env]"] + [f"{_toml_string(k)} = {_toml_string(v)}" for k, v in env.items()] + [""]
        )
    return "\n".join(lines)


def _copy_sources(args: str) -> list[str]:
    """The sources of a COPY or ADD from the build context (none for one from a stage or image)."""
    try:
        words = json.loads(args) if args.lstrip().startswith("[") else shlex.split(args)
    except (json.JSONDecodeError, ValueError):
        return []
    words = [str(word) for word in words]
    if any(word.startswith("--from") for word in words):
        return []
    return [word for word in words if not word.startswith("--")][:-1]


def _copied_by_name(dockerfile: Path) -> set[str]:
    """The control files the Dockerfile copies by name (`COPY solution.sh /oracle/`, `COPY tests/
    /app/tests/`, `COPY *.sh /app/`). TB1 builds in the whole task folder, so such a build needs
    them in its context; a `COPY . /app` names none, so it does not put the solution or the
    tests in the image."""
    named: set[str] = set()
    lines = dockerfile.read_text(errors="replace").splitlines()
    for step in instructions(lines):
        if step.keyword not in ("COPY", "ADD"):
            continue
        for source in _copy_sources(step.args):
            first = posixpath.normpath(source.lstrip("/")).split("/")[0]
            named.update(name for name in _CONTROL_FILES - {COMPOSE_FILE} if fnmatch.fnmatchcase(name, first))
    return named


def _notes(root: Path, config: dict[str, Any], parser: str, has_solution: bool) -> list[str]:
    """What the Harbor equivalent of TB1 task `root` does otherwise than TB1 would, or may surprise."""
    notes = []
    own = root / "tests" / "run-tests.sh"
    if own.is_file() and own.read_bytes() != (root / "run-tests.sh").read_bytes():
        notes.append(
            "tests/run-tests.sh is the one that runs, not the root run-tests.sh: Terminal-Bench 1 "
            "copies the tests folder over it in /tests"
        )
    if config.get("run_tests_in_same_shell") is True:
        notes.append(
            "task.yaml's run_tests_in_same_shell is not honoured: the tests run in a fresh shell "
            "of the agent's container, not in the agent's own"
        )
    if not has_solution:
        notes.append("no solution.sh or solution.yaml: the oracle has no solution to run")
    if not has_parser(parser):
        notes.append(f"{unknown_parser_reason(parser)}: every trial of it ends unscored")
    return notes


def convert_task(root: Path, dest: Path) -> list[str]:
    """Write TB1 task `root` as a Harbor task at `dest` (which must not exist); returns its notes."""
    task_yaml = root / TASK_YAML
    linked = next((root / name for name in sorted(_OWN_FILES) if (root / name).is_symlink()), None)
    if linked is not None:
        # Read through a link, a task could make the push read (and quote) a file outside it.
        raise TaskFormatError(linked, "is a link: a Terminal-Bench 1 task's own files must be in it")
    config = _load_yaml(task_yaml)
    if not isinstance(config, dict):
        raise TaskFormatError(task_yaml, "must be a mapping")
    if not (root / "Dockerfile").is_file():
        raise TaskFormatError(root, "no Dockerfile (a Terminal-Bench 1 task builds its own)")
    if not (root / "run-tests.sh").is_file():
        # TB1 copies it before every test run and fails the trial without it, even when the tests
        # folder has one of its own (which it would then copy over it).
        raise TaskFormatError(root, "no run-tests.sh at its root (Terminal-Bench 1 runs no task without one)")
    own_script, harbor_name = root / "tests" / "run-tests.sh", root / "tests" / "test.sh"
    if own_script.exists() and not own_script.is_file():
        raise TaskFormatError(own_script, "must be a file (the script the tests run)")
    if harbor_name.exists() or harbor_name.is_symlink():
        raise TaskFormatError(harbor_name, "is the name the Harbor verifier takes")
    env, compose = _services(root)
    parser = str(config.get("parser_name", "pytest"))
    dest.mkdir(parents=True)
    (dest / "instruction.md").write_text(_instruction(config, task_yaml))
    (dest / "task.toml").write_text(_task_toml(config, env, task_yaml))
    environment = dest / "environment"
    environment.mkdir()
    kept = _copied_by_name(root / "Dockerfile")
    for child in sorted(root.iterdir()):
        if (child.name in _CONTROL_FILES and child.name not in kept) or child.name in IGNORED_DIRS:
            continue
        target = environment / child.name
        if child.is_dir() and not child.is_symlink():
            shutil.copytree(child, target, symlinks=True)
        else:
            shutil.copy2(child, target, follow_symlinks=False)
    if compose:
        (environment / COMPOSE_FILE).write_text(yaml.safe_dump(compose, sort_keys=False))
    tests = dest / "tests"
    if (root / "tests").is_dir():
        shutil.copytree(root / "tests", tests, symlinks=True)
    else:
        tests.mkdir()
    if not (tests / "run-tests.sh").is_file():
        # TB1 copies the root run-tests.sh to /tests first and the tests folder after it, so the
        # folder's own run-tests.sh, when it has one, is written over the root's and runs.
        shutil.copy2(root / "run-tests.sh", tests / "run-tests.sh")
    (tests / "test.sh").write_text(verifier_script(parser))
    solution = _solution(root)
    if solution is not None:
        (dest / "solution").mkdir()
        (dest / "solution" / "solve.sh").write_text(solution, errors="surrogateescape")
    return _notes(root, config, parser, solution is not None)
