"""`envloop/wire/__init__.py` is written from its modules' `__all__` (`envloop.wire.index`), so a
model is named once, in its own module, and the package's three lists never drift from it."""

import shutil
import subprocess
import sys
from pathlib import Path

from envloop.wire import index


def test_the_package_is_what_its_modules_all_make_it() -> None:
    written = (index.PACKAGE / "__init__.py").read_text()
    assert written == index.rendered(), "the wire package is stale: run `python -m envloop.wire.index`"


def test_a_model_named_in_its_modules_all_reaches_the_three_lists(tmp_path: Path) -> None:
    package = tmp_path / "wire"
    shutil.copytree(index.PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    usage = package / "usage.py"
    usage.write_text(usage.read_text().replace("__all__ = [\n", '__all__ = [\n    "Thing",\n'))
    made = index.rendered(package)
    assert "        Thing,\n" in made  # imported for the type checker
    assert '    "Thing": "usage",\n' in made  # imported from its module on first use
    assert '    "Thing",\n' in made.split("__all__ = [")[1]  # exported


def test_the_writer_leaves_a_current_package_untouched() -> None:
    """Run as a command, it writes only when something changed."""
    before = (index.PACKAGE / "__init__.py").stat().st_mtime_ns
    done = subprocess.run(
        [sys.executable, "-m", "envloop.wire.index"], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stderr == ""
    assert (index.PACKAGE / "__init__.py").stat().st_mtime_ns == before
