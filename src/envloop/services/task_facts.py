"""What each task of a job asks, expects and is labelled with (`store.tables.TaskFacts`), read once
per task content from the frozen task and kept by digest: a JSONL row's prompt, answer and
`metadata`; a Harbor task's instruction (its first step's, for a multi-step task) and task.toml
`[metadata]`. Samples search them in the store; breakdowns group by their labels.
"""

from typing import Any

from sqlalchemy import Table, select

from envloop.services.context import Context
from envloop.store.artifacts import ArtifactStoreUnavailableError
from envloop.store.tables import DatasetMember, Job, TaskFacts
from envloop.wire.samples import EXCERPT_CHARS

_TABLE: Table = TaskFacts.__table__  # type: ignore[assignment]


def record_task_facts(ctx: Context, job: Job) -> None:
    """Read the facts of the job's tasks the store does not know yet. A task whose frozen copy
    cannot be read now (an unreachable artifact store) is left out, and read on a later call."""
    chosen = set(job.tasks)
    query = (
        select(DatasetMember)
        .outerjoin(TaskFacts, TaskFacts.digest == DatasetMember.digest)
        .where(DatasetMember.dataset_id == job.dataset_id, TaskFacts.digest.is_(None))
    )
    with ctx.store.read() as session:
        missing = {m.digest: m for m in session.scalars(query) if m.name in chosen}
    ctx.store.insert_new(_TABLE, [row for m in missing.values() if (row := _read(ctx, m)) is not None])


def task_labels(ctx: Context, job: Job) -> dict[str, dict[str, Any]]:
    """Each task's labels (its metadata), by task name, for the tasks whose facts are known."""
    record_task_facts(ctx, job)
    query = (
        select(DatasetMember.name, TaskFacts.labels)
        .join(TaskFacts, TaskFacts.digest == DatasetMember.digest)
        .where(DatasetMember.dataset_id == job.dataset_id)
    )
    chosen = set(job.tasks)
    with ctx.store.read() as session:
        return {name: dict(labels) for name, labels in session.execute(query) if name in chosen}


def _read(ctx: Context, member: DatasetMember) -> dict[str, Any] | None:
    if member.row is not None:
        row = member.row
        metadata = row.get("metadata")
        return {
            "digest": member.digest,
            "input": str(row.get("prompt", ""))[:EXCERPT_CHARS],
            "target": str(row.get("answer", ""))[:EXCERPT_CHARS],
            "labels": metadata if isinstance(metadata, dict) else {},
        }
    # Reading task files is for the first look at a task: other reads never import the task format.
    from envloop.tasks.harbor import load_task_config  # noqa: PLC0415
    from envloop.tasks.model import TaskFormatError  # noqa: PLC0415

    try:
        root = ctx.artifacts.task_dir(member.digest)
    except ArtifactStoreUnavailableError:
        return None
    try:
        config = load_task_config(root / "task.toml")
    except TaskFormatError:
        config = None
    instruction = root / "instruction.md"
    if not instruction.is_file() and config is not None and config.steps:
        instruction = root / "steps" / config.steps[0].name / "instruction.md"
    text = instruction.read_text(encoding="utf-8", errors="replace") if instruction.is_file() else ""
    return {
        "digest": member.digest,
        "input": text[:EXCERPT_CHARS],
        "target": None,
        "labels": dict(config.metadata) if config is not None else {},
    }
