"""The floors of envloop's code, kept by its imports.

Each package of `envloop` stands on a floor. A module may import its own floor and those below it,
never one above: the ground (errors, settings, the pure core, the API's models) knows nothing of
the store, the store nothing of what runs trials, those nothing of the service layer, and the
service layer nothing of the operations and surfaces that call it. Beside the floors, two rules the
floors cannot say (the CLI only presents; the queue reaches environment providers through their
contract), and no import cycle inside `runners/`, `operations/` or `scheduling/`.

Every import counts: at the top of a module, inside a function (an import there still ties the
two modules together), and for the type checker alone. Where today's code breaks a rule, the
import is listed below with why; an entry that no longer matches an import fails too, so each list
only shrinks. The walk reads the sources (`ast`) and imports nothing.
"""

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

FLOORS: tuple[tuple[str, frozenset[str]], ...] = (
    (
        "ground",
        frozenset(
            {
                "errors",
                "settings",
                "setting_addresses",
                "set_for_trials",
                "home",
                "liveness",
                "core",
                "wire",
                "plugins",
                "tasks",
                "uploads",
            }
        ),
    ),
    ("store", frozenset({"store"})),
    (
        "adapters",
        frozenset({"environments", "models", "agents", "trajectories", "gateway", "runners", "scheduling"}),
    ),
    ("services", frozenset({"services"})),
    ("operations", frozenset({"operations"})),
    ("surfaces", frozenset({"api", "client", "local", "testing"})),
    ("the console", frozenset({"console"})),
    ("the CLI", frozenset({"cli", "__main__"})),
)
"""Bottom to top: the packages (and top-level modules) of `envloop` on each floor. The surfaces
stack too: the console is mounted on the API (`console.api_and_console`), the CLI serves both. The
package itself (`envloop/__init__.py`: the version, and the clients by name on first use) stands
apart."""

CLIMBS_ALLOWED: dict[tuple[str, str], str] = {}
"""Imports that climb a floor today, each with why."""

CLI_MACHINE_LOCAL: dict[tuple[str, str], str] = {
    ("envloop.cli.build", "envloop.services.builds"): "el dataset build: Docker images of this machine",
    (
        "envloop.cli.plugin",
        "envloop.services.components",
    ): "el plugin list: the components installed in this Python",
    ("envloop.cli.worker", "envloop.services.components"): (
        "el worker checks the environment of the machine it runs trials on before starting"
    ),
    ("envloop.cli.key", "envloop.store.context"): "types the store el key works on",
    ("envloop.cli.key", "envloop.services.keys"): (
        "el key: any project's keys, made on the server's own store: the first key cannot come over HTTP"
    ),
    (
        "envloop.cli.model",
        "envloop.services.keys",
    ): "el model serve checks the keys of the store it serves beside",
    (
        "envloop.cli.serve",
        "envloop.services.keys",
    ): "el serve checks its own store for a key before listening",
    (
        "envloop.cli.secret",
        "envloop.store.secrets",
    ): "el secret rotate-key: this machine's key file and store",
    ("envloop.cli.state", "envloop.store.context"): "types the embedded store the local client runs on",
    ("envloop.cli.state", "envloop.services.context"): "opens the embedded store the local client runs on",
}
"""The CLI presents what a client (`envloop.Client`, `envloop.LocalClient`) answers, so the same
command works against a server; these reach the service layer or the store directly, each because
what it does belongs to this machine and has no operation."""

PROVIDERS_ALLOWED: dict[tuple[str, str], str] = {}
"""The queue runs trials in whatever environment a task names, through the environment contract;
these name one provider (Docker) instead, each with why."""

NO_CYCLES_INSIDE = ("envloop.runners", "envloop.operations", "envloop.scheduling")

CYCLES_ALLOWED: dict[frozenset[str], str] = {}
"""Import cycles inside those packages today (each a set of modules that import each other)."""


@dataclass(frozen=True)
class Import:
    source: str
    target: str
    line: int


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    base = SRC.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def imports_of(path: Path) -> Iterator[Import]:
    """What the module imports from `envloop`: a `from package import module` names the module."""
    source = module_name(path)
    package = source if path.name == "__init__.py" else source.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                above = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*above, base] if base else above)
            submodules = [f"{base}.{alias.name}" for alias in node.names if is_module(f"{base}.{alias.name}")]
            names = submodules or [base]
        else:
            continue
        for name in names:
            if name == "envloop" or name.startswith("envloop."):
                yield Import(source, name, node.lineno)


IMPORTS = [found for path in sorted((SRC / "envloop").rglob("*.py")) for found in imports_of(path)]


def part(module: str) -> str | None:
    """The package or top-level module of `envloop` a module belongs to (None: the package itself)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


FLOOR_OF = {name: level for level, (_, names) in enumerate(FLOORS) for name in names}


def broken(rule: dict[tuple[str, str], str], found: set[tuple[str, str]]) -> list[str]:
    """The imports that break a rule without being listed, and the listed ones no longer made."""
    return [f"{a} imports {b}" for a, b in sorted(found - set(rule))] + [
        f"{a} -> {b} is listed but no longer imported: remove it from the list"
        for a, b in sorted(set(rule) - found)
    ]


def test_every_package_stands_on_one_floor() -> None:
    parts = {part(module_name(path)) for path in (SRC / "envloop").rglob("*.py")} - {None}
    assert sorted(parts - set(FLOOR_OF)) == []
    assert sum(len(names) for _, names in FLOORS) == len(FLOOR_OF)


def test_no_import_climbs_to_a_floor_above_its_own() -> None:
    climbs = set()
    for each in IMPORTS:
        source, target = part(each.source), part(each.target)
        if source is not None and target is not None and FLOOR_OF[target] > FLOOR_OF[source]:
            climbs.add((each.source, each.target))
    assert broken(CLIMBS_ALLOWED, climbs) == []


def test_the_cli_reaches_the_service_layer_and_the_store_through_the_clients() -> None:
    found = {
        (each.source, each.target)
        for each in IMPORTS
        if part(each.source) == "cli"
        and part(each.target) in {"services", "store"}
        and each.target not in {"envloop.services", "envloop.store"}
    }
    assert broken(CLI_MACHINE_LOCAL, found) == []


def test_the_queue_reaches_environment_providers_through_their_contract() -> None:
    found = {
        (each.source, each.target)
        for each in IMPORTS
        if part(each.source) == "scheduling" and each.target.startswith("envloop.environments.docker")
    }
    assert broken(PROVIDERS_ALLOWED, found) == []


def cycles(modules: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(modules.get(module, ())):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while True:
                top = stack.pop()
                group.append(top)
                if top == module:
                    break
            if len(group) > 1:
                found.append(frozenset(group))

    for module in sorted(modules):
        if module not in index:
            visit(module)
    return found


@pytest.mark.parametrize("package", NO_CYCLES_INSIDE)
def test_no_import_cycle_inside(package: str) -> None:
    inside = [
        each
        for each in IMPORTS
        if each.source.startswith(f"{package}.") and each.target.startswith(f"{package}.")
    ]
    graph: dict[str, set[str]] = {}
    for each in inside:
        graph.setdefault(each.source, set()).add(each.target)
    found = set(cycles(graph))
    allowed = {group for group in CYCLES_ALLOWED if next(iter(group)).startswith(f"{package}.")}
    assert sorted(map(sorted, found - allowed)) == []
    assert [f"{sorted(group)} is listed but no longer a cycle" for group in allowed - found] == []


def test_the_walk_sees_imports_at_the_top_in_functions_and_for_the_type_checker() -> None:
    """The checks above would pass vacuously if the walk missed imports."""
    made = {(each.source, each.target) for each in IMPORTS}
    assert ("envloop.console.install", "envloop.api.app") in made  # at the top
    assert ("envloop.scheduling.executor_choice", "envloop.scheduling.ray_executor") in made  # in a function
    assert ("envloop.operations.services", "envloop.services.jobs") in made  # for the type checker
    assert not any(a.startswith("envloop.api.") and b.startswith("envloop.console") for a, b in made)
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [frozenset({"a", "b", "c"})]
    assert broken({}, {("envloop.store.db", "envloop.services.jobs")}) == [
        "envloop.store.db imports envloop.services.jobs"
    ]
