"""The environment variables page, written from the settings model at build time.

Every `ENVLOOP_*` row comes from `envloop.settings.Settings` (the type, default and meaning the code
validates against) or from `envloop.set_for_trials.SET_FOR_TRIALS` (what envloop sets inside a
trial), so the page cannot drift from them; only the few variables of other tools that envloop
honours are listed here.
"""

from typing import Any

from markdown_text import cell
from pydantic.fields import FieldInfo

from envloop.set_for_trials import SET_FOR_TRIALS
from envloop.settings import (
    DOCKER,
    GROUPS,
    SETUP,
    TRIALS,
    WHERE,
    WORKERS,
    Settings,
    env_name,
)

OTHERS: dict[str, list[tuple[str, str, str]]] = {
    WHERE: [
        (
            "`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`",
            "unset",
            "the S3 (or S3-compatible) endpoint and credentials of an `s3://` artifact store",
        )
    ],
    WORKERS: [
        ("`RAY_ADDRESS`", "`auto`", "the Ray cluster of `--executor ray` when `--ray-address` is not given")
    ],
    DOCKER: [("`DOCKER_HOST`", "the daemon's Unix socket", "the Docker daemon envloop talks to")],
    SETUP: [
        (
            "`CI`",
            "unset",
            "set: a test that would skip (no chromium, no Docker daemon, no Ray) fails instead",
        )
    ],
}
"""Variables of other tools (boto, Ray, Docker, CI systems) that envloop honours, by section."""

INTROS = {
    TRIALS: "Read by every worker for every trial; "
    "[Sandboxes and limits](../operators/sandboxes.md#operator-settings) says what each one does. "
    "The Ray executor passes those set on the worker to its nodes, and with them ",
    DOCKER: "See [Docker daemon and base images](../operators/docker.md).",
}


def environment_markdown() -> str:
    lines = [
        "# Environment variables",
        "",
        "<!-- Generated from envloop.settings when the site is built; edit the settings model, not "
        "this page. -->",
        "",
        "Every variable envloop reads, by who sets it. A bad value is refused in one line naming the "
        "variable (exit code 2, [Exit codes](exit-codes.md)): `el` checks them all before a command "
        "runs; a worker's trial settings are checked again at each trial's setup, which a bad value "
        "fails. An empty variable counts as unset.",
    ]
    for group in GROUPS:
        lines += ["", f"## {group}", ""]
        if group == TRIALS:
            lines += [INTROS[group] + _also_forwarded() + ".", ""]
        elif INTROS.get(group):
            lines += [INTROS[group], ""]
        lines += ["| variable | default | meaning |", "|---|---|---|"]
        lines += [
            _row(name, field)
            for name, field in Settings.model_fields.items()
            if _extra(field)["group"] == group
        ]
        lines += [
            f"| {names} | {cell(default)} | {cell(meaning)} |"
            for names, default, meaning in OTHERS.get(group, [])
        ]
    lines += [
        "",
        "## Inside a trial",
        "",
        "Set by envloop for every command of a trial (see "
        "[What a trial sees](../guides/writing-tasks.md#what-a-trial-sees)); never set them yourself.",
        "",
        "| variable | value |",
        "|---|---|",
    ]
    lines += [
        f"| {', '.join(f'`{n}`' for n in names)} | {cell(meaning)} |" for names, meaning in SET_FOR_TRIALS
    ]
    return "\n".join(lines) + "\n"


def _also_forwarded() -> str:
    """The trial settings listed in other sections (the model marks them `trial`)."""
    names = [
        f"`{env_name(name)}`"
        for name, field in Settings.model_fields.items()
        if _extra(field)["trial"] and _extra(field)["group"] != TRIALS
    ]
    return ", ".join(names[:-1]) + f" and {names[-1]}"


def _row(name: str, field: FieldInfo) -> str:
    extra = _extra(field)
    default = extra.get("shown") or _default(field.default)
    option = f" (the default of `{extra['option']}`)" if extra.get("option") else ""
    return f"| `{env_name(name)}` | {cell(default)} | {cell((field.description or '') + option)} |"


def _default(value: object) -> str:
    if value in (None, (), ""):
        return "unset"
    if isinstance(value, bool | int | float):
        return f"{value:g}" if isinstance(value, float) else str(value)
    return f"`{value}`"


def _extra(field: FieldInfo) -> dict[str, Any]:
    extra = field.json_schema_extra
    assert isinstance(extra, dict)
    return extra
