"""Make the virtualenv that holds Inspect AI for `bench/peers/run.py`, apart from envloop's own.

Inspect and its dependencies never enter envloop's `.venv`: the two tools must not share (or fight
over) package versions, and envloop's tests must not depend on a peer being installed. The venv
lives under the user's cache directory; running this again with the same pins does nothing.

    .venv/bin/python bench/peers/setup_inspect.py [--venv DIR]
"""

import argparse
import os
import subprocess
import sys
from pathlib import Path

INSPECT_PINS = ("inspect-ai==0.3.285", "openai==3.57.0")
"""Inspect itself and the SDK its OpenAI-compatible provider needs (the version envloop pins)."""


def default_venv() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "envloop-bench" / "inspect-venv"


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _stamp(venv: Path) -> Path:
    return venv / ".envloop-bench-pins"


def is_ready(venv: Path) -> bool:
    stamp = _stamp(venv)
    return stamp.exists() and stamp.read_text().split() == list(INSPECT_PINS)


def ensure_inspect_venv(venv: Path) -> Path:
    """Create the venv and install the pins unless a previous run already did; return its python."""
    if is_ready(venv):
        return venv_python(venv)
    base = Path(getattr(sys, "_base_executable", sys.executable))
    subprocess.run([str(base), "-m", "venv", str(venv)], check=True)
    pip = [str(venv_python(venv)), "-m", "pip", "install", "--disable-pip-version-check", "--quiet"]
    subprocess.run([*pip, *INSPECT_PINS], check=True)
    _stamp(venv).write_text("\n".join(INSPECT_PINS) + "\n")
    return venv_python(venv)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--venv", type=Path, default=default_venv())
    args = parser.parse_args()
    python = ensure_inspect_venv(args.venv)
    version = subprocess.run(
        [str(python), "-c", "import inspect_ai; print(inspect_ai.__version__)"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    print(f"inspect-ai {version} in {args.venv}")


if __name__ == "__main__":
    main()
