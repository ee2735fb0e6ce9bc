"""The documentation: the site builds with `mkdocs build --strict` (any warning fails it: a broken
link or anchor, a page missing from the navigation), the README is a front page whose links all
resolve, and what the pages state about the CLI (commands, options, exit codes) and the settings
(every ENVLOOP_* variable) is what the code has."""

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from typer._click import Command, Context
from typer.core import TyperGroup
from typer.main import get_command

from envloop.cli import exits
from envloop.cli.main import build_app
from envloop.set_for_trials import SET_FOR_TRIALS
from envloop.settings import Settings, env_name
from tests.conftest import REPO

DOCS = REPO / "docs"
README = REPO / "README.md"
TWO_COMMANDS = (
    "./scripts/demo   # installs everything, then runs the demo evaluation",
    "./scripts/test   # installs everything, then runs ruff, mypy --strict and the whole test suite",
)


def build_site(config: Path, destination: Path) -> subprocess.CompletedProcess[str]:
    """`mkdocs build --strict` as CI runs it (the notice about MkDocs' next major version muted)."""
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(destination)],
        cwd=config.parent,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def test_the_site_builds_strictly_with_its_generated_references(tmp_path: Path) -> None:
    site = tmp_path / "site"
    built = build_site(REPO / "mkdocs.yml", site)
    output = built.stdout + built.stderr
    assert built.returncode == 0 and "WARNING" not in output, output
    cli = (site / "reference" / "cli" / "index.html").read_text()
    assert 'id="el-job-samples"' in cli and "--skip-unsupported" in cli
    api = (site / "reference" / "http-api" / "index.html").read_text()
    assert "/v1/jobs/{job_id}/samples" in api and 'id="schema-jobrequest"' in api
    task_format = (site / "reference" / "task-format" / "index.html").read_text()
    assert "multi_step_reward_strategy" in task_format and "start_interval_sec" in task_format
    assert "Benchmarks: envloop beside Inspect AI" in (site / "benchmarks" / "index.html").read_text()
    assert (site / "screenshots" / "trace-390.png").is_file()


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    """The strict build is what catches stale cross-references, so it must fail on one."""
    docs = tmp_path / "docs"
    (docs / "reference").mkdir(parents=True)
    (docs / "index.md").write_text("# x\n\n[gone](concepts.md#no-such-section)\n")
    (docs / "concepts.md").write_text("# Concepts\n")
    (docs / "reference" / "task-format.md").write_text("# Task format\n")
    config = (REPO / "mkdocs.yml").read_text().split("\nnav:")[0]
    hooks = (REPO / "docs" / "hooks" / "reference_pages.py").as_posix()
    config = config.replace("docs/hooks/reference_pages.py", hooks)
    (tmp_path / "mkdocs.yml").write_text(config + "\n")
    built = build_site(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert built.returncode != 0
    assert "does not contain an anchor '#no-such-section'" in built.stdout + built.stderr


def test_the_readme_is_a_front_page_with_the_two_commands() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    for command in TWO_COMMANDS:
        assert command in text.splitlines(), command


def test_every_relative_link_in_the_readme_resolves() -> None:
    text = README.read_text()
    targets = re.findall(r"\]\(([^)\s]+)\)", text) + re.findall(r'<img src="([^"]+)"', text)
    relative = [target for target in targets if not re.match(r"^[a-z]+:|^#", target)]
    assert relative, "the README links into the documentation"
    missing = [target for target in relative if not (REPO / target.split("#")[0]).exists()]
    assert not missing


def _commands() -> dict[str, set[str]]:
    """Every command path of `el` (`el job submit`) with the options it takes."""
    root = get_command(build_app("*"))
    found: dict[str, set[str]] = {}

    def walk(command: Command, context: Context) -> None:
        options = {
            name for param in command.get_params(context) for name in param.opts if name.startswith("-")
        }
        found[context.command_path] = options
        if isinstance(command, TyperGroup):
            for name in command.list_commands(context):
                child = command.get_command(context, name)
                assert child is not None
                walk(child, Context(child, info_name=name, parent=context))

    walk(root, Context(root, info_name="el"))
    return found


def _documented_command_lines() -> list[tuple[str, str]]:
    """(file, line) for every `el …` command written in code in the README and the docs: in code
    blocks, and in inline code that starts with `el `."""
    lines: list[tuple[str, str]] = []
    for path in [README, *sorted(DOCS.rglob("*.md"))]:
        text = path.read_text()
        name = str(path.relative_to(REPO))
        for block in re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S):
            lines += [(name, line) for line in block.splitlines()]
        prose = re.sub(r"```.*?```", "", text, flags=re.S)
        lines += [(name, span) for span in re.findall(r"`(el [^`]+)`", prose)]
    return lines


def test_every_el_command_and_option_the_docs_show_exists() -> None:
    commands = _commands()
    wrong = []
    for name, line in _documented_command_lines():
        for match in re.finditer(r"(?:^|[\s$(=;&|])(el(?: [a-z][a-z-]*)+)((?: [^#|;&)]*)?)", line):
            words = match.group(1).split()
            # the longest prefix that is a command; a group followed by a word that is not its
            # command is a stale name (`el job show`)
            path = "el"
            for word in words[1:]:
                if f"{path} {word}" not in commands:
                    break
                path = f"{path} {word}"
            leaf_is_group = any(other.startswith(path + " ") for other in commands)
            if path == "el" or (leaf_is_group and len(words) > len(path.split())):
                wrong.append((name, line.strip()))
                continue
            options = re.findall(r"(?<![\w-])(--[a-z][a-z-]*|-[a-z])(?![\w-])", match.group(2))
            unknown = [option for option in options if option not in commands[path] | {"--help"}]
            if unknown:
                wrong.append((name, f"{line.strip()}: {unknown}"))
    assert not wrong


def test_the_documented_exit_codes_are_the_cli_s() -> None:
    table = (DOCS / "reference" / "exit-codes.md").read_text()
    documented = {int(code) for code in re.findall(r"^\| (\d+) \|", table, flags=re.M)}
    defined = {value for name, value in vars(exits).items() if name.isupper() and isinstance(value, int)}
    assert documented == defined


def environment_page() -> str:
    """The page as the docs hook writes it from envloop.settings when the site is built."""
    sys.path.insert(0, str(DOCS / "hooks"))
    try:
        from environment_reference import environment_markdown  # noqa: PLC0415 - a docs hook, by path
    finally:
        sys.path.remove(str(DOCS / "hooks"))
    return environment_markdown()


def test_the_environment_page_has_a_row_for_each_setting_and_each_variable_set_in_trials() -> None:
    assert not (DOCS / "reference" / "environment.md").exists()
    page = environment_page()
    settings_rows = re.findall(r"^\| `(ENVLOOP_[A-Z0-9_]+)` \| [^|]+ \| [^|]+ \|$", page, flags=re.M)
    assert sorted(settings_rows) == sorted(env_name(field) for field in Settings.model_fields)
    listed = set(re.findall(r"`(ENVLOOP_[A-Z0-9_]+)`", page))
    assert {name for names, _ in SET_FOR_TRIALS for name in names} <= listed


def test_every_envloop_variable_named_in_src_or_scripts_is_a_setting_or_set_for_trials() -> None:
    """A new variable cannot be read outside the settings model: naming one in the code or the
    scripts fails here until it is a field of envloop.settings.Settings (or a variable envloop
    itself sets inside trials)."""
    sources = [*(REPO / "src").rglob("*.py"), *(REPO / "scripts").iterdir()]
    named = {
        name for path in sources for name in re.findall(r"\bENVLOOP_[A-Z0-9_]*[A-Z0-9]\b", path.read_text())
    }
    known = {env_name(field) for field in Settings.model_fields}
    known |= {name for names, _ in SET_FOR_TRIALS for name in names}
    assert sorted(named - known) == []
    assert named  # the pattern finds the variables at all


def test_the_cli_reference_is_generated_not_checked_in() -> None:
    assert not (DOCS / "reference" / "cli.md").exists()
    assert not (DOCS / "reference" / "http-api.md").exists()


def test_the_site_s_pins_are_installed_with_the_dev_extra() -> None:
    """`scripts/setup` installs the dev extra, so a fresh machine can build the site as CI does."""
    pins = {line for line in (DOCS / "requirements.txt").read_text().splitlines() if "==" in line}
    dev = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["dev"]
    assert pins and pins <= set(dev)


_TEST_REFERENCE = re.compile(r"`(tests/[\w/]+\.py)(?:::(\w+))?`|`::(\w+)`")


def test_every_test_the_security_page_names_exists() -> None:
    """Each attack family on the security page names the test that attacks it: a test renamed or
    removed must not leave the page naming nothing. `::name` belongs to the file named before it
    in the same table row or paragraph."""
    missing = []
    for block in re.split(r"\n(?=\|)|\n\n", (DOCS / "operators" / "security.md").read_text()):
        file = None
        for match in _TEST_REFERENCE.finditer(block):
            file = match.group(1) or file
            name = match.group(2) or match.group(3)
            if file is None:
                missing.append(f"{match.group(0)} with no file before it")
                continue
            source = REPO / file
            if not source.is_file():
                missing.append(file)
            elif name and not re.search(rf"^(?:async )?def {name}\(", source.read_text(), re.MULTILINE):
                missing.append(f"{file}::{name}")
    assert not missing, missing
