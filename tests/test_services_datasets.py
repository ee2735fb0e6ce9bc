"""Dataset revisions: frozen, numbered, deduplicated by content."""

import json
import shutil
from pathlib import Path

import pytest

from envloop.errors import NotFoundError, UserError
from envloop.services import datasets
from envloop.services.context import Context
from tests.conftest import EXAMPLES, make_task


def test_push_records_revision_one_with_members_and_digests(ctx: Context) -> None:
    view = datasets.push_dataset(ctx, EXAMPLES / "tasks", "demo")
    assert (view.ref, view.version, view.created) == ("demo@1", 1, True)
    shown = datasets.get_dataset(ctx, "demo@1")
    assert shown.runner == "envloop/shell@1"
    assert [m.name for m in shown.members or []] == sorted(p.name for p in (EXAMPLES / "tasks").iterdir())
    assert all(m.digest.startswith("sha256:") for m in shown.members or [])


def test_identical_content_returns_the_existing_revision(ctx: Context) -> None:
    first = datasets.push_dataset(ctx, EXAMPLES / "tasks", "demo")
    again = datasets.push_dataset(ctx, EXAMPLES / "tasks", "demo")
    assert (again.ref, again.created) == (first.ref, False)
    assert len(datasets.list_datasets(ctx)) == 1


def test_editing_the_source_after_a_push_never_changes_the_revision(ctx: Context, tmp_path: Path) -> None:
    src = tmp_path / "src"
    make_task(src, "alpha", solve="touch done")
    v1 = datasets.push_dataset(ctx, src, "set")
    frozen = ctx.artifacts.task_dir(datasets.get_dataset(ctx, "set@1").members[0].digest)  # type: ignore[index]
    (src / "alpha" / "instruction.md").write_text("something else\n")
    v2 = datasets.push_dataset(ctx, src, "set")
    assert (v1.version, v2.version) == (1, 2)
    assert (frozen / "instruction.md").read_text() == "Do the alpha thing.\n"
    assert datasets.get_dataset(ctx, "set@latest").version == 2


def test_a_single_task_directory_is_a_dataset_of_one(ctx: Context) -> None:
    view = datasets.push_dataset(ctx, EXAMPLES / "tasks" / "hello-file", "one")
    assert view.member_count == 1


@pytest.mark.parametrize("ref", ["nope@1", "demo@7", "demo@zero", "demo@"])
def test_unknown_or_malformed_references_are_refused(ctx: Context, ref: str) -> None:
    datasets.push_dataset(ctx, EXAMPLES / "tasks", "demo")
    with pytest.raises(UserError):
        datasets.get_dataset(ctx, ref)


def test_malformed_task_toml_is_refused_naming_the_file_and_nothing_is_recorded(
    ctx: Context, tmp_path: Path
) -> None:
    src = tmp_path / "src"
    shutil.copytree(EXAMPLES / "tasks" / "hello-file", src / "hello-file")
    (src / "hello-file" / "task.toml").write_text("[agent]\ntimeout_sec = 'soon'\n")
    with pytest.raises(UserError, match=r"task\.toml"):
        datasets.push_dataset(ctx, src, "bad")
    with pytest.raises(NotFoundError):
        datasets.get_dataset(ctx, "bad@1")


def test_unknown_runner_is_refused(ctx: Context) -> None:
    with pytest.raises(UserError, match="runner"):
        datasets.push_dataset(ctx, EXAMPLES / "tasks", "demo", runner="acme/nothing@9")


def test_jsonl_sets_are_stored_pinned_to_the_chat_runner(ctx: Context, tmp_path: Path) -> None:
    rows = tmp_path / "qa.jsonl"
    rows.write_text(
        '{"id": "q1", "prompt": "2+2?", "answer": "4"}\n{"id": "q2", "prompt": "3+3?", "answer": "6"}\n'
    )
    view = datasets.push_dataset(ctx, rows, "qa", scorer="exact")
    shown = datasets.get_dataset(ctx, view.ref)
    assert (shown.kind, shown.runner, shown.scorer) == ("jsonl", "envloop/chat@1", "exact")
    assert [m.name for m in shown.members or []] == ["q1", "q2"]


def test_origins_must_name_each_pushed_task_and_no_other(ctx: Context, tmp_path: Path) -> None:
    src = tmp_path / "src"
    make_task(src, "alpha", solve="touch done")
    origin = {
        "registry": "r.json",
        "dataset": "d",
        "version": "1",
        "git_url": "/repo",
        "commit": "a" * 40,
        "path": "alpha",
    }
    with pytest.raises(UserError, match="origins: an origin for no task \\(beta\\)"):
        datasets.push_dataset(ctx, src, "set", origins=json.dumps({"alpha": origin, "beta": origin}))
    with pytest.raises(UserError, match="origins: no origin for task alpha"):
        datasets.push_dataset(ctx, src, "set", origins="{}")
    with pytest.raises(UserError, match=r"origins: alpha\.commit"):
        datasets.push_dataset(ctx, src, "set", origins=json.dumps({"alpha": {**origin, "commit": "xyz"}}))
    assert datasets.list_datasets(ctx) == []
    datasets.push_dataset(ctx, src, "set", origins=json.dumps({"alpha": origin}))
    (member,) = datasets.get_dataset(ctx, "set@1").members or []
    assert member.origin is not None and member.origin.commit == "a" * 40
