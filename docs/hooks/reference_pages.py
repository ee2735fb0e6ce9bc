"""MkDocs hook: the pages written from the code when the site is built.

The CLI, HTTP API, task.toml and environment variable references come from the commands,
`openapi.json`, the typed task model and the settings model, so they cannot drift from them;
`BENCHMARKS.md` stays at the project's root, where the bench scripts' readers look, and is shown in
the site as it is.
"""

import json
from pathlib import Path
from typing import Any

from api_reference import api_markdown
from cli_reference import cli_markdown
from environment_reference import environment_markdown
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page
from task_reference import task_fields_markdown

ROOT = Path(__file__).resolve().parents[2]
TASK_FIELDS_MARKER = "<!-- task.toml fields -->"


def on_files(files: Files, config: MkDocsConfig, **_: Any) -> Files:
    generated = {
        "reference/cli.md": cli_markdown(),
        "reference/http-api.md": api_markdown(json.loads((ROOT / "openapi.json").read_text())),
        "reference/environment.md": environment_markdown(),
        "benchmarks.md": (ROOT / "BENCHMARKS.md").read_text(),
    }
    for uri, content in generated.items():
        files.append(File.generated(config, uri, content=content))
    return files


def on_page_markdown(markdown: str, page: Page, **_: Any) -> str:
    """The task format page holds a marker where the field tables go."""
    if TASK_FIELDS_MARKER in markdown:
        return markdown.replace(TASK_FIELDS_MARKER, task_fields_markdown())
    return markdown
