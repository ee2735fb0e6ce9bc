"""Loading Harbor task directories: valid tasks load unmodified, malformed ones fail with one line."""

import shutil
from pathlib import Path

import pytest

from envloop.tasks.digest import task_digest
from envloop.tasks.harbor import load_harbor_task
from envloop.tasks.model import TaskFormatError
from envloop.tasks.phases import phase_networks

FIXTURE = Path(__file__).parent / "fixtures" / "tasks" / "harbor-hello-world"


@pytest.fixture
def task(tmp_path: Path) -> Path:
    root = tmp_path / "tasks" / "hello"
    shutil.copytree(FIXTURE, root)
    return root


def _error(root: Path, name: str | None = None) -> str:
    with pytest.raises(TaskFormatError) as caught:
        load_harbor_task(root, name=name)
    message = str(caught.value)
    assert "\n" not in message
    assert "Traceback" not in message
    return message


def test_fixture_from_another_project_loads_unmodified() -> None:
    task = load_harbor_task(FIXTURE)

    assert task.name == "harbor-hello-world"
    assert task.kind == "harbor"
    assert task.instruction.startswith("Create a file called `hello.txt`")
    assert task.config.version == "1.0"
    assert task.config.agent.timeout_sec == 120.0
    assert task.config.verifier.timeout_sec == 60.0
    assert task.config.environment.cpus == 1
    assert task.config.environment.memory_mb == 2048
    assert task.config.environment.storage_mb == 10240
    assert task.config.metadata["difficulty"] == "easy"
    assert task.config.metadata["tags"] == ["trivial", "bash"]
    assert task.digest == task_digest(FIXTURE)
    assert (task.tests_dir / "test.sh").is_file()
    assert (task.solution_dir / "solve.sh").is_file()
    assert (task.environment_dir / "Dockerfile").is_file()


def test_harbor_fields_are_typed_and_unknown_fields_are_kept(task: Path) -> None:
    toml = task / "task.toml"
    toml.write_text(
        'schema_version = "1.1"\nfuture_field = 3\n'
        + toml.read_text()
        + '\n[solution]\nenv = { SEED = "7" }\n\n[task]\nname = "org/hello"\n'
    )

    config = load_harbor_task(task).config

    assert config.schema_version == "1.1"
    assert config.solution.env == {"SEED": "7"}
    assert config.task is not None and config.task.name == "org/hello"
    assert config.environment.build_timeout_sec == 600.0
    assert config.environment.docker_image == "example/hello-world:20250101"
    assert (config.model_extra or {})["future_field"] == 3


def test_minimal_task_needs_only_toml_instruction_and_test_script(tmp_path: Path) -> None:
    root = tmp_path / "minimal"
    (root / "tests").mkdir(parents=True)
    (root / "task.toml").write_text("")
    (root / "instruction.md").write_text("Do the thing.\n")
    (root / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")

    task = load_harbor_task(root)

    assert task.config.agent.timeout_sec is None
    # A task that names no network gets the environment's default: closed in the local sandbox,
    # Harbor's public in a container; the older `allow_internet = false` closes it everywhere.
    assert phase_networks(task.config).agent.mode == "no-network"
    networks = phase_networks(task.config, default="public")
    assert (networks.baseline.mode, networks.agent.mode, networks.verifier.mode) == ("public",) * 3
    closed = task.config.model_copy(
        update={"environment": task.config.environment.model_copy(update={"allow_internet": False})}
    )
    assert phase_networks(closed, default="public").agent.mode == "no-network"


def test_name_defaults_to_directory_name_and_can_be_overridden(task: Path) -> None:
    assert load_harbor_task(task).name == "hello"
    assert load_harbor_task(task, name="hello-v2").name == "hello-v2"


@pytest.mark.parametrize("bad_name", ["-starts-with-dash", "has space", "slash/inside", "x" * 129, ""])
def test_invalid_task_name_is_refused(task: Path, bad_name: str) -> None:
    message = _error(task, name=bad_name)
    assert message.startswith(f"{task}: name: ")


def test_bad_toml_names_file_and_line(task: Path) -> None:
    (task / "task.toml").write_text('version = "1.0"\n\n[agent]\ntimeout_sec = = 5\n')

    message = _error(task)

    assert message.startswith(f"{task / 'task.toml'}: line 4: invalid TOML (")


def test_toml_cut_short_is_reported_at_end_of_file(task: Path) -> None:
    (task / "task.toml").write_text("[agent]\ntimeout_sec =")

    assert _error(task).startswith(f"{task / 'task.toml'}: end of file: invalid TOML (")


def test_negative_timeout_names_the_field(task: Path) -> None:
    (task / "task.toml").write_text("[agent]\ntimeout_sec = -5\n")

    assert _error(task) == f"{task / 'task.toml'}: agent.timeout_sec: must be greater than 0"


@pytest.mark.parametrize(
    ("toml", "field", "expected"),
    [
        ('[agent]\ntimeout_sec = "120"\n', "agent.timeout_sec", "must be a number, not string '120'"),
        ("[environment]\nmemory_mb = 2048.5\n", "environment.memory_mb", "must be an integer"),
        ("[environment]\nenv = { PORT = 8080 }\n", "environment.env.PORT", "must be a string, not number"),
        ("[environment]\nallow_internet = 1\n", "environment.allow_internet", "must be true or false"),
        ('verifier = "fast"\n', "verifier", "must be a table, not string 'fast'"),
        ("metadata = [1, 2]\n", "metadata", "must be a table, not array"),
    ],
)
def test_wrong_types_name_the_field(task: Path, toml: str, field: str, expected: str) -> None:
    (task / "task.toml").write_text(toml)

    message = _error(task)

    assert message.startswith(f"{task / 'task.toml'}: {field}: {expected}")


def test_several_type_errors_are_all_reported_on_one_line(task: Path) -> None:
    (task / "task.toml").write_text("[agent]\ntimeout_sec = 0\n[verifier]\ntimeout_sec = -1\n")

    assert _error(task) == (
        f"{task / 'task.toml'}: agent.timeout_sec: must be greater than 0; "
        "verifier.timeout_sec: must be greater than 0"
    )


def test_missing_task_toml_is_refused(task: Path) -> None:
    (task / "task.toml").unlink()

    assert _error(task).startswith(f"{task / 'task.toml'}: missing")


def test_missing_instruction_is_refused(task: Path) -> None:
    (task / "instruction.md").unlink()

    assert _error(task).startswith(f"{task / 'instruction.md'}: missing")


def test_blank_instruction_is_refused(task: Path) -> None:
    (task / "instruction.md").write_text("  \n\n")

    assert _error(task).startswith(f"{task / 'instruction.md'}: is empty")


def test_instruction_that_is_not_utf8_is_refused(task: Path) -> None:
    (task / "instruction.md").write_bytes(b"caf\xe9\n")

    assert _error(task) == f"{task / 'instruction.md'}: not valid UTF-8 (byte 3)"


def test_missing_test_script_is_refused(task: Path) -> None:
    (task / "tests" / "test.sh").unlink()

    assert _error(task).startswith(f"{task / 'tests' / 'test.sh'}: missing")


def test_test_script_that_is_a_directory_is_refused(task: Path) -> None:
    (task / "tests" / "test.sh").unlink()
    (task / "tests" / "test.sh").mkdir()

    assert _error(task) == f"{task / 'tests' / 'test.sh'}: not a regular file"


def test_solution_is_optional(task: Path) -> None:
    shutil.rmtree(task / "solution")

    assert load_harbor_task(task).name == "hello"


def test_environment_that_is_a_file_is_refused(task: Path) -> None:
    shutil.rmtree(task / "environment")
    (task / "environment").write_text("FROM ubuntu\n")

    assert _error(task) == f"{task / 'environment'}: not a directory"


def test_task_with_symlink_escaping_the_directory_is_refused(task: Path) -> None:
    (task / "tests" / "secret").symlink_to("../../../../etc/passwd")

    assert "points outside the task" in _error(task)


def test_missing_directory_is_refused(tmp_path: Path) -> None:
    assert _error(tmp_path / "nope").startswith(f"{tmp_path / 'nope'}: not a task directory")
