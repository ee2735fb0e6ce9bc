"""Where the embedded installation lives (ENVLOOP_HOME, else ~/.envloop): light to import, so a
command can find it before it loads the store."""

import os
from pathlib import Path


def envloop_home() -> Path:
    return Path(os.environ.get("ENVLOOP_HOME") or Path.home() / ".envloop").expanduser()
