"""Writes `envloop/wire/__init__.py` from the `__all__` of each module beside it.

The package names each model three times: an import for the type checker, the module to import it
from on first use (`_MODULE_OF`), and `__all__`. All three come from the modules' own `__all__`,
so adding a model is defining it and naming it in its module's `__all__`; then

    python -m envloop.wire.index

rewrites the package, and `tests/test_wire_index.py` fails while it is not current.
"""

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).parent
NOT_MODELS = ("__init__", "deferred", "index")
"""The modules of the package that hold no model: the package, the deferred names, this writer."""

DOCSTRING = '''\
"""The models that cross a boundary: requests and answers of the service layer, the HTTP API, the
HTTP client and the in-process client, and the CLI's JSON output.

They import only pydantic and the pure core (`envloop.core`), so code that only talks to envloop
(`envloop.Client`, the CLI's help, a notebook) never loads the store, the sandbox or a model SDK.
The service modules re-export the models they return, so `envloop.services.jobs.JobView` and
`envloop.wire.JobView` are the same class.

Written by `python -m envloop.wire.index` from each module's `__all__` (`envloop.wire.index`).
"""
'''

GETATTR = '''
"""The submodule that defines each name: a name is imported with its module on first use
(`from envloop.wire import JobView` loads `envloop.wire.jobs` alone), so a command that reads one
model does not build the others."""


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'envloop.wire' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"envloop.wire.{module}"), name)
    globals()[name] = value
    return value

'''


def exported(module: Path) -> list[str]:
    """The module's `__all__`, read from its source (nothing is imported)."""
    for node in ast.parse(module.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
        ):
            names: list[str] = ast.literal_eval(node.value)
            return names
    return []


def exports(package: Path = PACKAGE) -> dict[str, list[str]]:
    """Each model module's exported names, by module name."""
    modules = sorted(p for p in package.glob("*.py") if p.stem not in NOT_MODELS)
    return {module.stem: exported(module) for module in modules}


def _listed(names: list[str]) -> list[str]:
    """Constants first, then classes, each alphabetical: the order ruff keeps `__all__` in."""
    return sorted(names, key=lambda name: (not name.isupper(), name))


def _imported(names: list[str]) -> list[str]:
    """As `_listed`, but ignoring case: the order ruff keeps an import's names in."""
    return sorted(names, key=lambda name: (not name.isupper(), name.lower()))


def _import(module: str, names: list[str]) -> str:
    listed = "".join(f"        {name},\n" for name in _imported(names))
    return f"    from envloop.wire.{module} import (\n{listed}    )\n"


def rendered(package: Path = PACKAGE) -> str:
    """The package's `__init__.py` as this writer makes it."""
    found = exports(package)
    module_of = {name: module for module, names in found.items() for name in names}
    imports = "".join(_import(module, names) for module, names in found.items() if names)
    table = "".join(f'    "{name}": "{module_of[name]}",\n' for name in sorted(module_of))
    listed = "".join(f'    "{name}",\n' for name in _listed(list(module_of)))
    return (
        f"{DOCSTRING}\nimport importlib\nfrom typing import TYPE_CHECKING, Any\n\n"
        f"if TYPE_CHECKING:\n{imports}\n_MODULE_OF = {{\n{table}}}{GETATTR}\n__all__ = [\n{listed}]\n"
    )


def main() -> int:
    target = PACKAGE / "__init__.py"
    text = rendered()
    if target.read_text() != text:
        target.write_text(text)
        print(f"rewrote {target.name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
