"""Terminal-Bench 1 tasks pushed as they are (`task.yaml`, a root Dockerfile, `docker-compose.yaml`
with `T_BENCH_*` variables, `run-tests.sh`, `solution.sh` or `solution.yaml`, `tests/`) and written
in Harbor's format by `el dataset convert`."""

import json
import subprocess
import tomllib
from pathlib import Path

import yaml

from envloop.cli.dataset_warnings import grouped_warnings
from envloop.tasks.tb1_verifiers import PYTEST_VERIFIER, SWEBENCH_VERIFIER
from tests.conftest import El

TB1_COMPOSE = """services:
  client:
    build:
      dockerfile: Dockerfile
    image: ${T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME}
    container_name: ${T_BENCH_TASK_DOCKER_CLIENT_CONTAINER_NAME}
    command: [ "sh", "-c", "sleep infinity" ]
    environment:
      - TEST_DIR=${T_BENCH_TEST_DIR}
    volumes:
      - ${T_BENCH_TASK_LOGS_PATH}:${T_BENCH_CONTAINER_LOGS_PATH}
      - ${T_BENCH_TASK_AGENT_LOGS_PATH}:${T_BENCH_CONTAINER_AGENT_LOGS_PATH}
"""

RUN_TESTS = """#!/bin/bash
cd "$TEST_DIR"
python3 -m pytest -rA test_outputs.py
"""

TEST_OUTPUTS = """from pathlib import Path


def test_answer_file_exists():
    assert Path("/app/answer.txt").exists()


def test_answer_is_42():
    assert Path("/app/answer.txt").read_text().strip() == "42"
"""


def write_tb1_task(
    root: Path, name: str, *, dockerfile: str = "FROM debian:12\nWORKDIR /app\n", **files: str
) -> Path:
    task = root / name
    (task / "tests").mkdir(parents=True)
    config = {
        "instruction": "Write 42 to /app/answer.txt.",
        "author_email": "someone@example.org",
        "difficulty": "easy",
        "parser_name": "pytest",
        "max_agent_timeout_sec": 240,
        "max_test_timeout_sec": 45,
        "run_tests_in_same_shell": False,
    }
    (task / "task.yaml").write_text(yaml.safe_dump(config))
    (task / "Dockerfile").write_text(dockerfile)
    (task / "docker-compose.yaml").write_text(TB1_COMPOSE)
    (task / "run-tests.sh").write_text(RUN_TESTS)
    (task / "solution.sh").write_text("#!/bin/bash\necho 42 > /app/answer.txt\n")
    (task / "tests" / "test_outputs.py").write_text(TEST_OUTPUTS)
    for relative, text in files.items():
        path = task / relative.replace("__", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return task


def test_convert_writes_the_harbor_equivalent_with_tb1s_meaning(el: El, tmp_path: Path) -> None:
    task = write_tb1_task(tmp_path / "src", "answer", **{"data__input.csv": "a,b\n"})
    dest = tmp_path / "harbor"
    el.ok("dataset", "convert", str(task), str(dest))
    assert (dest / "instruction.md").read_text() == "Write 42 to /app/answer.txt."
    config = tomllib.loads((dest / "task.toml").read_text())
    assert config["agent"]["timeout_sec"] == 240.0
    assert config["verifier"]["timeout_sec"] == 45.0
    assert config["environment"]["env"] == {"TEST_DIR": "/tests"}
    assert (dest / "environment" / "Dockerfile").read_text() == "FROM debian:12\nWORKDIR /app\n"
    assert (dest / "environment" / "data" / "input.csv").read_text() == "a,b\n"
    assert not (dest / "environment" / "docker-compose.yaml").exists()  # the client alone: no sidecars
    assert sorted(p.name for p in (dest / "tests").iterdir()) == [
        "run-tests.sh",
        "test.sh",
        "test_outputs.py",
    ]
    assert (dest / "solution" / "solve.sh").read_text() == "#!/bin/bash\necho 42 > /app/answer.txt\n"
    assert el("dataset", "convert", str(task), str(dest)).code == 2  # never over what exists


def test_a_task_yaml_naming_no_timeouts_gets_tb1s_defaults_not_envloops(el: El, tmp_path: Path) -> None:
    task = write_tb1_task(tmp_path / "src", "untimed")
    config = yaml.safe_load((task / "task.yaml").read_text())
    del config["max_agent_timeout_sec"], config["max_test_timeout_sec"]
    (task / "task.yaml").write_text(yaml.safe_dump(config))
    el.ok("dataset", "convert", str(task), str(tmp_path / "out"))
    written = tomllib.loads((tmp_path / "out" / "task.toml").read_text())
    assert (written["agent"]["timeout_sec"], written["verifier"]["timeout_sec"]) == (360.0, 60.0)


def test_solution_yaml_commands_become_solve_sh_and_other_services_become_sidecars(
    el: El, tmp_path: Path
) -> None:
    task = write_tb1_task(tmp_path / "src", "with-db")
    (task / "solution.sh").unlink()
    (task / "solution.yaml").write_text(
        yaml.safe_dump(
            [{"command": "echo 42 > /app/answer.txt", "min_timeout_sec": 1}, {"command": "ls /app"}]
        )
    )
    compose = yaml.safe_load(TB1_COMPOSE)
    compose["services"]["client"]["depends_on"] = ["db"]
    compose["services"]["db"] = {
        "build": {"context": "db"},
        "image": "${T_BENCH_TASK_DOCKER_NAME_PREFIX}__db",
        "environment": {"LOGS": "${T_BENCH_CONTAINER_LOGS_PATH}"},
    }
    (task / "docker-compose.yaml").write_text(yaml.safe_dump(compose))
    (task / "db").mkdir()
    (task / "db" / "Dockerfile").write_text("FROM debian:12\n")
    dest = tmp_path / "harbor"
    el.ok("dataset", "convert", str(tmp_path / "src"), str(dest))
    assert (
        dest / "with-db" / "solution" / "solve.sh"
    ).read_text() == "#!/bin/bash\necho 42 > /app/answer.txt\nls /app\n"
    written = yaml.safe_load((dest / "with-db" / "environment" / "docker-compose.yaml").read_text())
    assert written == {
        "services": {
            "main": {"depends_on": ["db"]},
            "db": {"build": {"context": "db"}, "environment": {"LOGS": "/logs"}},
        }
    }


def test_push_takes_tb1_tasks_as_they_are_beside_harbor_tasks(el: El, tmp_path: Path) -> None:
    root = tmp_path / "bench"
    write_tb1_task(root, "answer")
    write_tb1_task(root / "group", "nested")
    pushed = el("dataset", "push", str(root), "--name", "tb1")
    assert pushed.code == 0, pushed.stderr
    shown = json.loads(el.ok("dataset", "show", "tb1@1", "--json").stdout)
    assert [m["name"] for m in shown["members"]] == ["answer", "group.nested"]
    one = el("dataset", "push", str(root / "answer"), "--name", "one")
    assert one.code == 0, one.stderr
    assert json.loads(el.ok("dataset", "show", "one@1", "--json").stdout)["members"][0]["name"] == "answer"


def test_a_broken_tb1_task_is_refused_in_one_line_naming_it_as_the_user_does(el: El, tmp_path: Path) -> None:
    task = write_tb1_task(tmp_path / "src", "broken")
    (task / "task.yaml").write_text("instruction: [unclosed\n")
    refused = el("dataset", "push", str(tmp_path / "src"), "--name", "bad")
    assert refused.code == 2
    assert "task.yaml: not valid YAML" in refused.stderr
    assert "envloop-push-" not in refused.stderr
    (task / "task.yaml").write_text("a: &x [1]\nb: *x\n")
    assert "YAML aliases are not accepted" in el("dataset", "push", str(task), "--name", "bad").stderr
    (task / "task.yaml").write_text("max_agent_timeout_sec: 10\n")
    assert "instruction: no instruction" in el("dataset", "push", str(task), "--name", "bad").stderr


def run_verifier(
    tmp_path: Path, pytest_output: str, exit_code: int = 0, verifier: str = PYTEST_VERIFIER
) -> tuple[int, str, dict[str, float] | None]:
    """A TB1 verifier (pytest's unless named) run by bash with its two fixed paths moved into
    `tmp_path`, on a run-tests.sh that prints `pytest_output`."""
    tests, logs = tmp_path / "tests", tmp_path / "logs"
    tests.mkdir(parents=True)
    logs.mkdir()
    (tests / "out.txt").write_text(pytest_output)
    (tests / "run-tests.sh").write_text(f"cat {tests}/out.txt\nexit {exit_code}\n")
    script = verifier.replace("/tests", str(tests)).replace("/logs/verifier", str(logs))
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=False)
    reward = logs / "reward.json"
    return done.returncode, done.stderr, json.loads(reward.read_text()) if reward.exists() else None


SUMMARY = "=========================== short test summary info ============================\n"


def test_the_pytest_parser_gives_1_only_when_every_test_passed_and_keeps_each_test(tmp_path: Path) -> None:
    passed = (
        SUMMARY
        + "PASSED test_outputs.py::test_a\nPASSED test_outputs.py::test_b\nSKIPPED test_outputs.py::test_c\n"
    )
    assert run_verifier(tmp_path / "1", passed)[2] == {"reward": 1, "test_a": 1, "test_b": 1, "test_c": 1}
    failed = (
        SUMMARY + 'PASSED test_outputs.py::test_a\nFAILED test_outputs.py::test_"b" - AssertionError: x\n'
    )
    assert run_verifier(tmp_path / "2", failed, exit_code=1)[2] == {"reward": 0, "test_a": 1, "test_b": 0}


def test_no_pytest_summary_is_0_as_tb1_counts_it_unresolved_with_the_reason(tmp_path: Path) -> None:
    # Whatever the output says: the agent's code, run by the tests, can print anything (a network
    # failure of a host the task names is told from the trial's proxy record instead).
    for number, output in enumerate(("/app/answer.cpp:3: error: 'answer' was not declared\n", "")):
        code, stderr, reward = run_verifier(tmp_path / str(number), output, exit_code=1)
        assert (code, reward) == (0, {"reward": 0})
        assert (
            "no pytest summary in run-tests.sh's output (the tests did not run to their end): "
            "TB1 counts this as unresolved (a parse error), so the reward is 0"
        ) in stderr


SWEBENCH_RESULTS = "grading…\nSWEBench results starts here\n{verdict}\nSWEBench results ends here\n"


def test_the_swebench_parser_reads_the_verdict_between_its_markers(tmp_path: Path) -> None:
    passed = SWEBENCH_RESULTS.format(verdict="PASSED")
    assert run_verifier(tmp_path / "1", passed, verifier=SWEBENCH_VERIFIER)[2] == {"reward": 1}
    failed = "PASSED test_x\n" + SWEBENCH_RESULTS.format(verdict="FAILED")
    assert run_verifier(tmp_path / "2", failed, verifier=SWEBENCH_VERIFIER)[2] == {"reward": 0}
    code, stderr, reward = run_verifier(
        tmp_path / "3", "error: Failed to fetch: pypi\nPASSED\n", 1, verifier=SWEBENCH_VERIFIER
    )
    assert (code, reward) == (0, {"reward": 0})
    assert "no SWEBench results in run-tests.sh's output (the grading did not run to its end)" in stderr


def test_a_swebench_task_is_converted_with_the_swebench_verifier(el: El, tmp_path: Path) -> None:
    task = write_tb1_task(tmp_path / "src", "swe")
    config = yaml.safe_load((task / "task.yaml").read_text())
    (task / "task.yaml").write_text(yaml.safe_dump({**config, "parser_name": "swebench"}))
    el.ok("dataset", "convert", str(task), str(tmp_path / "out"))
    assert (tmp_path / "out" / "tests" / "test.sh").read_text() == SWEBENCH_VERIFIER


def test_a_parser_envloop_lacks_ends_unscored_with_the_reason(el: El, tmp_path: Path) -> None:
    task = write_tb1_task(tmp_path / "src", "other-parser")
    config = yaml.safe_load((task / "task.yaml").read_text())
    (task / "task.yaml").write_text(yaml.safe_dump({**config, "parser_name": "made-up"}))
    el.ok("dataset", "convert", str(task), str(tmp_path / "out"))
    done = subprocess.run(
        ["bash", str(tmp_path / "out" / "tests" / "test.sh")], capture_output=True, text=True, check=False
    )
    assert done.returncode == 3
    assert "envloop has no Terminal-Bench 1 parser 'made-up' (it has: pytest, swebench)" in done.stderr


def test_a_tb1_tasks_own_files_may_not_be_links_out_of_it(el: El, tmp_path: Path) -> None:
    task = write_tb1_task(tmp_path / "src", "linked")
    (task / "task.yaml").unlink()
    (task / "task.yaml").symlink_to("/etc/passwd")
    refused = el("dataset", "push", str(task), "--name", "bad")
    assert refused.code == 2
    assert "task.yaml: is a link" in refused.stderr
    assert "root:" not in refused.stderr


def test_files_the_dockerfile_copies_by_name_stay_in_its_build_context(el: El, tmp_path: Path) -> None:
    # TB1 builds in the whole task folder: a Dockerfile may copy solution.sh, tests/ or a run-tests.sh.
    copies = write_tb1_task(
        tmp_path / "src",
        "copies-its-own",
        dockerfile='FROM debian:12\nCOPY solution.sh /oracle/solution.sh\nCOPY ["tests/", "/app/tests/"]\n'
        "COPY --from=busybox:1 /bin/sh /opt/sh\nWORKDIR /app\n",
    )
    everything = write_tb1_task(tmp_path / "src", "copies-all", dockerfile="FROM debian:12\nCOPY . /app\n")
    dest = tmp_path / "harbor"
    el.ok("dataset", "convert", str(tmp_path / "src"), str(dest))
    kept = dest / "copies-its-own" / "environment"
    assert (kept / "solution.sh").read_bytes() == (copies / "solution.sh").read_bytes()
    assert (kept / "tests" / "test_outputs.py").read_text() == TEST_OUTPUTS
    assert not (kept / "run-tests.sh").exists() and not (kept / "task.yaml").exists()
    # `COPY .` names no file: the solution and the tests stay out of the image it builds.
    assert sorted(p.name for p in (dest / "copies-all" / "environment").iterdir()) == ["Dockerfile"]
    assert (everything / "solution.sh").exists()


def same_shell(task: Path) -> Path:
    config = yaml.safe_load((task / "task.yaml").read_text())
    (task / "task.yaml").write_text(yaml.safe_dump({**config, "run_tests_in_same_shell": True}))
    return task


SAME_SHELL_NOTE = (
    "task.yaml's run_tests_in_same_shell is not honoured: the tests run in a fresh shell of the "
    "agent's container, not in the agent's own"
)
NO_SOLUTION_NOTE = "no solution.sh or solution.yaml: the oracle has no solution to run"


def warning_lines(stderr: str) -> list[str]:
    return [line.removeprefix("warning: ") for line in stderr.splitlines() if line.startswith("warning: ")]


def test_push_and_convert_say_each_distinct_warning_once_with_how_many_tasks_and_which(
    el: El, tmp_path: Path
) -> None:
    root = tmp_path / "bench"
    for name in ("a", "b", "c", "d", "e"):
        same_shell(write_tb1_task(root, name, dockerfile="FROM debian:12\nRUN true\nWORKDIR /app\n"))
    (write_tb1_task(root, "f") / "solution.sh").unlink()
    pushed = el("dataset", "push", str(root), "--name", "many")
    assert pushed.code == 0, pushed.stderr
    lines = warning_lines(pushed.stderr)
    dockerfile = [line for line in lines if "environment/Dockerfile instructions" in line]
    assert len(dockerfile) == 1 and dockerfile[0].startswith("5 tasks (a, b, c and 2 more): "), lines
    assert f"5 tasks (a, b, c and 2 more): {SAME_SHELL_NOTE}" in lines
    assert f"task f: {NO_SOLUTION_NOTE}" in lines
    assert len(lines) == 3, lines
    # --json keeps one line a task and warning, for a program to read.
    kept = el.ok("dataset", "push", str(root), "--name", "many", "--json").json()["warnings"]
    assert sorted(w for w in kept if w.endswith(SAME_SHELL_NOTE)) == [
        f"task {name}: {SAME_SHELL_NOTE}" for name in "abcde"
    ]
    shown = el.ok("dataset", "show", "many@1").stdout
    assert shown.count("environment/Dockerfile instructions") == 1
    assert "  5 tasks (a, b, c and 2 more): environment/Dockerfile" in shown
    converted = el("dataset", "convert", str(root), str(tmp_path / "out"))
    assert converted.code == 0, converted.stderr
    assert warning_lines(converted.stderr) == [
        f"5 tasks (a, b, c and 2 more): {SAME_SHELL_NOTE}",
        f"task f: {NO_SOLUTION_NOTE}",
    ]
    alone = el("dataset", "convert", str(root / "f"), str(tmp_path / "f-harbor"))
    assert warning_lines(alone.stderr) == [f"task f: {NO_SOLUTION_NOTE}"]  # named as a push names it


OWN_RUN_TESTS = '#!/bin/bash\ncd "$(dirname "$0")"\npython3 -m pytest -rA test_outputs.py\n'


def test_the_tests_folders_run_tests_sh_runs_over_the_roots_and_the_roots_is_required_as_in_tb1(
    el: El, tmp_path: Path
) -> None:
    # TB1 copies the root run-tests.sh to /tests, then the tests folder over it, and runs
    # /tests/run-tests.sh: the folder's own wins; without a root one TB1 fails every trial.
    source = tmp_path / "src"
    both = write_tb1_task(source, "both", **{"tests__run-tests.sh": OWN_RUN_TESTS})
    write_tb1_task(source, "same", **{"tests__run-tests.sh": RUN_TESTS})
    write_tb1_task(source, "root-only")
    converted = el("dataset", "convert", str(source), str(tmp_path / "out"))
    assert converted.code == 0, converted.stderr
    out = tmp_path / "out"
    assert (out / "both" / "tests" / "run-tests.sh").read_text() == OWN_RUN_TESTS
    assert (out / "same" / "tests" / "run-tests.sh").read_text() == RUN_TESTS
    assert (out / "root-only" / "tests" / "run-tests.sh").read_text() == RUN_TESTS
    # Said only where the two differ: where they are the same nothing changes.
    assert warning_lines(converted.stderr) == [
        "task both: tests/run-tests.sh is the one that runs, not the root run-tests.sh: "
        "Terminal-Bench 1 copies the tests folder over it in /tests"
    ]
    (both / "run-tests.sh").unlink()
    refused = el("dataset", "push", str(both), "--name", "bad")
    assert refused.code == 2
    assert "both: no run-tests.sh at its root (Terminal-Bench 1 runs no task without one)" in refused.stderr


def test_a_tests_run_tests_sh_that_is_a_link_or_a_folder_is_refused_and_nothing_is_written_through_it(
    el: El, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.sh"
    task = write_tb1_task(tmp_path / "src", "linked")
    (task / "tests" / "run-tests.sh").symlink_to(outside)
    refused = el("dataset", "convert", str(task), str(tmp_path / "out"))
    assert refused.code == 2
    assert "tests/run-tests.sh: is a link" in refused.stderr
    (task / "tests" / "run-tests.sh").unlink()
    (task / "tests" / "test.sh").symlink_to(outside)
    assert (
        "tests/test.sh: is the name the Harbor verifier takes"
        in el("dataset", "push", str(task), "--name", "bad").stderr
    )
    (task / "tests" / "test.sh").unlink()
    (task / "tests" / "run-tests.sh").mkdir()
    assert "tests/run-tests.sh: must be a file" in el("dataset", "push", str(task), "--name", "bad").stderr
    assert not outside.exists() and not (tmp_path / "out").exists()


def test_warnings_are_grouped_by_message_in_the_order_each_first_came_and_other_lines_stay() -> None:
    lines = [
        "task a: needs docker",
        "origins were not recorded",  # a line about no task is said as it is
        "task b: needs docker",
        "task a: has no oracle",
        "task b: needs docker",  # a task is counted once per message
        "task c: needs docker",
        "task d: needs docker",
    ]
    assert grouped_warnings(lines) == [
        "4 tasks (a, b, c and 1 more): needs docker",
        "origins were not recorded",
        "task a: has no oracle",
    ]
    assert grouped_warnings(["task a: x", "task b: x"]) == ["2 tasks (a, b): x"]
