"""Task files are parsed with limits: a compose file whose aliases expand to a billion items, a
recursive alias, a task.toml or compose file of megabytes are refused in one line, exit 2, before
anything walks what they would expand to, by `el dataset push` and by the server alike."""

import json
import time
import tomllib
from pathlib import Path

import pytest
import yaml

from envloop.tasks.bounded import MAX_YAML_NODES, ParseLimitError, load_toml, load_yaml
from envloop.tasks.dockerfile import parse_dockerfile
from tests.api_server import Server
from tests.conftest import EXAMPLES, SHARED, El

BOMB = (
    "x-bomb:\n  a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
    + "".join(f"  a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 10)}]\n" for n in range(1, 9))
    + "services:\n  main:\n    environment: *a8\n"
)
"""A compose file whose `environment` is 10^9 items through nine levels of anchors."""


def _task_with_compose(root: Path, compose: str) -> Path:
    source = EXAMPLES / "tasks" / "hello-file"
    for path in source.rglob("*"):
        if path.is_file():
            target = root / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    (root / "environment" / "docker-compose.yaml").write_text(compose)
    return root


def _refused_in_one_line(result: object, started: float, tmp_path: Path) -> str:
    stderr = result.stderr.strip()  # type: ignore[attr-defined]
    assert result.code == 2, stderr  # type: ignore[attr-defined]
    assert len(stderr.splitlines()) == 1 and "Traceback" not in stderr, stderr
    assert str(tmp_path) not in stderr
    assert time.monotonic() - started < 60  # a whole `el` process; the parse itself is timed below
    return stderr


def test_an_alias_bomb_is_refused_by_the_parser_in_well_under_a_second() -> None:
    started = time.thread_time()
    with pytest.raises(ParseLimitError, match=f"expands to more than {MAX_YAML_NODES:,} items"):
        load_yaml(BOMB, "environment/docker-compose.yaml")
    assert time.thread_time() - started < 1.0  # this thread's CPU: the machine's load does not count


def test_a_recursive_alias_and_deep_nesting_are_refused() -> None:
    with pytest.raises(ParseLimitError, match="refers to a node that contains it"):
        load_yaml("services: &s\n  main: *s\n", "f")
    with pytest.raises(ParseLimitError, match="nested more than 32 levels"):
        load_yaml("[" * 40 + "]" * 40, "f")
    with pytest.raises(ParseLimitError, match="nested more than 32 levels"):
        load_yaml("[" * 100_000 + "]" * 100_000, "f")


@pytest.mark.parametrize(
    "text",
    [
        "services:\n  a:\n    environment: [" + "a, " * 340_000 + "]\n",
        "x:\n" + "".join(f"  k{n}: v\n" for n in range(90_000)),
        "x: " + "[" * 300_000,
    ],
    ids=["flow items", "keys", "open brackets"],
)
def test_a_megabyte_of_plain_items_is_refused_by_the_parser_in_well_under_a_second(text: str) -> None:
    """No alias at all: a megabyte of items took PyYAML's own parser 14 to 39 s to build before
    the count was checked (and a few hundred kilobytes of `[` hours, where it was scanned); the
    parser's events are counted as they come and the first past a limit ends the reading."""
    started = time.thread_time()
    with pytest.raises(ParseLimitError, match=r"holds more than 20,000 items|nested more than 32 levels"):
        load_yaml(text[: 1 << 20], "environment/docker-compose.yaml")
    assert time.thread_time() - started < 1.0


def test_el_dataset_push_refuses_a_deeply_nested_terminal_bench_task_at_once(el: El, tmp_path: Path) -> None:
    """A Terminal-Bench 1 task's `task.yaml` of 200 KB of `[` kept `el dataset push` scanning for
    more than ten minutes (PyYAML's scanner is quadratic in flow nesting)."""
    task = tmp_path / "tb1" / "deep"
    (task / "tests").mkdir(parents=True)
    (task / "Dockerfile").write_text("FROM debian:12\n")
    (task / "docker-compose.yaml").write_text("services:\n  client:\n    build: .\n")
    (task / "run-tests.sh").write_text("#!/bin/sh\n")
    (task / "task.yaml").write_text("instruction: " + "[" * 100_000 + "]" * 100_000 + "\n")
    started = time.monotonic()
    message = _refused_in_one_line(
        el("dataset", "push", str(task.parent), "--name", "deep"), started, tmp_path
    )
    assert message.endswith("deep/task.yaml: nested more than 32 levels deep"), message
    assert el.ok("dataset", "list", "--json").json() == []


def test_an_ordinary_compose_file_with_anchors_and_merge_keys_loads_as_before() -> None:
    text = (
        "x-common: &common {environment: {A: '1'}, user: root}\n"
        "services:\n  db: {<<: *common, image: postgres}\n  api: {<<: *common, image: api}\n"
    )
    assert load_yaml(text, "f") == yaml.safe_load(text)


def test_el_dataset_push_refuses_a_yaml_bomb_in_one_line(el: El, tmp_path: Path) -> None:
    task = _task_with_compose(tmp_path / "bomb-task", BOMB)
    started = time.monotonic()
    message = _refused_in_one_line(el("dataset", "push", str(task), "--name", "bomb"), started, tmp_path)
    assert "environment/docker-compose.yaml: expands to more than 100,000 items" in message
    assert el.ok("dataset", "list", "--json").json() == []


def test_a_compose_like_file_that_is_build_context_data_is_never_parsed(el: El, tmp_path: Path) -> None:
    """Harbor reads environment/docker-compose.yaml alone: a compose.yaml beside it is a file the
    task is about (a broken compose file to fix), pushed as it is, whatever it holds."""
    task = _task_with_compose(tmp_path / "data-task", "services: {}\n")
    (task / "environment" / "docker-compose.yaml").unlink()
    (task / "environment" / "compose.yaml").write_text(BOMB)
    el.ok("dataset", "push", str(task), "--name", "data")


def test_el_dataset_push_refuses_config_files_of_megabytes(el: El, tmp_path: Path) -> None:
    task = _task_with_compose(tmp_path / "huge-compose", "services: {}\n# " + "x" * (2 << 20) + "\n")
    started = time.monotonic()
    message = _refused_in_one_line(el("dataset", "push", str(task), "--name", "huge"), started, tmp_path)
    assert "docker-compose.yaml: larger than the 1,048,576 bytes" in message
    task = _task_with_compose(tmp_path / "huge-toml", "services: {}\n")
    with (task / "task.toml").open("a") as handle:
        handle.write("\n# " + "x" * (2 << 20) + "\n")
    message = _refused_in_one_line(el("dataset", "push", str(task), "--name", "huge"), started, tmp_path)
    assert "task.toml: larger than the 1,048,576 bytes a task.toml may have" in message
    assert el.ok("dataset", "list", "--json").json() == []


def test_el_dataset_push_refuses_a_jsonl_row_of_megabytes(el: El, tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    metadata = json.dumps({"blob": "x" * (5 << 20)})
    rows.write_text(
        '{"prompt": "p", "answer": "a"}\n{"prompt": "q", "answer": "b", "metadata": ' + metadata + "}\n"
    )
    started = time.monotonic()
    result = el("dataset", "push", str(rows), "--name", "rows", "--scorer", "exact")
    message = _refused_in_one_line(result, started, tmp_path / "elsewhere")
    assert "line 2: 5,242,936 bytes is longer than a row may be (4,194,304)" in message
    assert el.ok("dataset", "list", "--json").json() == []


@pytest.mark.slow
def test_the_server_refuses_an_uploaded_yaml_bomb_in_one_line(server: Server, tmp_path: Path) -> None:
    task = _task_with_compose(tmp_path / "bomb-task", BOMB)
    remote = {
        "ENVLOOP_URL": server.url,
        "ENVLOOP_API_KEY": server.key,
        "ENVLOOP_HOME": str(tmp_path / "away"),
    }
    started = time.monotonic()
    result = server.el("dataset", "push", str(task), "--name", "bomb", env=remote)
    message = _refused_in_one_line(result, started, tmp_path)
    assert "environment/docker-compose.yaml: expands to more than 100,000 items" in message
    with server.http() as http:
        assert http.get("/v1/datasets").json() == []


HOSTILE_TOML = {
    "nested arrays": "x = " + "[" * 5_000 + "]" * 5_000 + "\n",
    "nested inline tables": "x = " + "{a = " * 5_000 + "1" + "}" * 5_000 + "\n",
    "a dotted key": "x." + ".".join(["a"] * 100_000) + " = 1\n",
    "a key of quoted parts": "x." + ".".join(['"a"'] * 100_000) + " = 1\n",
    "a table header": "[" + ".".join(["a"] * 100_000) + "]\n",
    "a dotted key in an inline table": "x = {" + ".".join(["a"] * 100_000) + " = 1}\n",
    "a huge array": "x = [" + "1," * 500_000 + "]\n",
    "many keys": "".join(f"k{n} = 1\n" for n in range(90_000)),
    "many arrays of tables": "[[t]]\n" * 170_000,
}
"""task.toml files of a megabyte or less that `tomllib` took seconds to minutes over (a key of
100,000 parts: minutes and gigabytes, quadratic in its parts) or that nest past any real use."""


@pytest.mark.parametrize("text", HOSTILE_TOML.values(), ids=HOSTILE_TOML.keys())
def test_a_hostile_task_toml_is_refused_by_the_parser_in_well_under_a_second(text: str) -> None:
    text = text.encode()[: 1 << 20].decode(errors="ignore")
    started = time.thread_time()
    with pytest.raises(
        ParseLimitError, match=r"^task.toml: (nested more than 32|a key of more than 32|holds more)"
    ):
        load_toml(text, "task.toml")
    assert time.thread_time() - started < 1.0


@pytest.mark.parametrize(
    "text",
    [
        'x = "' + "a.[{" * 250_000 + '"\n',
        "x = '''" + 'a.[{"\n' * 170_000 + "'''\n",
        "# a.b.c [x] {y}\n" * 65_000,
        'x = "' + '\\"' * 500_000 + "\n",
        'x = """' + '\\"""' * 200_000 + "\n",
    ],
    ids=[
        "a long string",
        "a long multi-line string",
        "many comments",
        "an open string",
        "an open long string",
    ],
)
def test_strings_and_comments_are_read_once_whatever_they_hold(text: str) -> None:
    """Dots and brackets inside strings and comments are text: a megabyte of them is neither
    refused nor read more than once, and a string that never ends is left to `tomllib` to name."""
    started = time.thread_time()
    try:
        assert load_toml(text, "task.toml") == tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        assert "Unterminated string" in str(error) or "Illegal character" in str(error)
    assert time.thread_time() - started < 1.0


def test_every_harbor_example_task_toml_reads_as_tomllib_reads_it() -> None:
    paths = sorted((SHARED / "harbor-examples").rglob("task.toml")) + sorted(EXAMPLES.rglob("task.toml"))
    assert len(paths) > 20
    for path in paths:
        text = path.read_text()
        assert load_toml(text, "task.toml") == tomllib.loads(text), path


def test_deep_nesting_made_of_a_table_a_key_and_an_array_is_refused() -> None:
    """Each part within its own limit, the document deeper than 32 levels in all."""
    text = "[" + ".".join(["a"] * 12) + "]\nk." + ".".join(["b"] * 12) + " = " + "[" * 12 + "]" * 12 + "\n"
    with pytest.raises(ParseLimitError, match="nested more than 32 levels deep"):
        load_toml(text, "task.toml")


@pytest.mark.parametrize("attack", ["a dotted key", "nested arrays", "a huge array"])
def test_el_dataset_push_refuses_a_hostile_task_toml_in_one_line(el: El, tmp_path: Path, attack: str) -> None:
    task = _task_with_toml(tmp_path / "hostile", HOSTILE_TOML[attack])
    started = time.monotonic()
    message = _refused_in_one_line(el("dataset", "push", str(task), "--name", "hostile"), started, tmp_path)
    assert message.startswith("el: error: hostile: task.toml: "), message
    assert el.ok("dataset", "list", "--json").json() == []


@pytest.mark.slow
def test_the_server_refuses_an_uploaded_hostile_task_toml_in_one_line(server: Server, tmp_path: Path) -> None:
    task = _task_with_toml(tmp_path / "hostile", HOSTILE_TOML["a table header"])
    remote = {
        "ENVLOOP_URL": server.url,
        "ENVLOOP_API_KEY": server.key,
        "ENVLOOP_HOME": str(tmp_path / "away"),
    }
    started = time.monotonic()
    message = _refused_in_one_line(
        server.el("dataset", "push", str(task), "--name", "hostile", env=remote), started, tmp_path
    )
    assert "hostile: task.toml: a key of more than 32 parts" in message
    with server.http() as http:
        assert http.get("/v1/datasets").json() == []


def _task_with_toml(root: Path, toml: str) -> Path:
    task = _task_with_compose(root, "services: {}\n")
    (task / "environment" / "docker-compose.yaml").unlink()
    text = toml + "\n" + (task / "task.toml").read_text()
    (task / "task.toml").write_text(text.encode()[: (1 << 20) - 4096].decode(errors="ignore"))
    return task


@pytest.mark.parametrize("depth", [500, 100_000], ids=["below the decoder's own limit", "past it"])
def test_el_refuses_a_profile_or_job_file_nested_deep_in_one_line(el: El, tmp_path: Path, depth: int) -> None:
    """Past about a thousand levels the JSON decoder raised RecursionError, which `el` reported as
    an internal error (exit 1); below, the value went on to validation."""
    nest = "[" * depth + "]" * depth
    profile = tmp_path / "profile.json"
    profile.write_text(
        '{"schema_version": "envplatform.profile/v2", "name": "team/deep", "version": "1", '
        f'"secret_params": [], "spec": {{"params": {{"AGENT_NAME": "nop"}}}}, "x": {nest}}}'
    )
    job = tmp_path / "job.json"
    job.write_text(f'{{"dataset": "d@1", "profiles": ["team/deep@1"], "x": {nest}}}')
    for command in (
        ("profile", "create", "team/deep", "1", "--file", str(profile)),
        ("job", "submit", "--config", str(job)),
    ):
        started = time.monotonic()
        message = _refused_in_one_line(el(*command), started, tmp_path / "elsewhere")
        assert message.endswith(".json: nested more than 32 levels deep"), message
    assert el.ok("profile", "list", "--json").json() == []


def test_a_megabyte_of_copy_sources_is_read_no_further_than_the_local_limits(tmp_path: Path) -> None:
    """250,000 sources in one COPY took the local plan 16 s at push (split, then one look-up each);
    past 64 KiB of arguments or 1,000 sources a COPY is counted as not done here, unread."""
    context = tmp_path / "environment"
    context.mkdir()
    (context / "a").write_text("a\n")
    sources = ", ".join(['"a"'] * 250_000)
    text = f'FROM debian:12\nWORKDIR /app\nCOPY a /app/\nCOPY [{sources}, "/app/"]\nADD {"a " * 2_000}/app/\n'
    started = time.thread_time()
    plan = parse_dockerfile(text, context)
    assert time.thread_time() - started < 1.0
    assert plan.skipped == {
        "COPY (past what the local sandbox reads)": 1,
        "ADD (past what the local sandbox reads)": 1,
        "FROM": 1,
    }
    assert [step.source.name for step in plan.copies] == ["a"]


def test_el_dataset_push_refuses_a_dockerfile_of_megabytes(el: El, tmp_path: Path) -> None:
    task = _task_with_toml(tmp_path / "huge-dockerfile", "")
    with (task / "environment" / "Dockerfile").open("a") as handle:
        handle.write("# " + "x" * (2 << 20) + "\n")
    started = time.monotonic()
    message = _refused_in_one_line(el("dataset", "push", str(task), "--name", "huge"), started, tmp_path)
    assert message.endswith(
        "huge-dockerfile: environment/Dockerfile: larger than the 1,048,576 bytes a Dockerfile may have"
    )
