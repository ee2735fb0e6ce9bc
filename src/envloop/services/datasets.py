"""Dataset revisions: freeze tasks into the artifact store and record NAME@N."""

import hashlib
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from pydantic import BaseModel, TypeAdapter, ValidationError
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from envloop.core.ids import new_id
from envloop.core.nesting import MAX_DEPTH, deeper_than
from envloop.errors import ConflictError, NotFoundError, UserError
from envloop.services.context import Context
from envloop.services.refs import check_name, dataset_ref, parse_dataset_ref
from envloop.store.tables import Dataset, DatasetMember
from envloop.wire.datasets import DatasetView, MemberView, TaskFeature, TaskOrigin

if TYPE_CHECKING:
    from envloop.tasks.model import HarborTask

# The models this module returns are defined in envloop.wire (light to import) and re-exported here.
__all__ = ["DatasetView", "MemberView"]

SHELL_RUNNER = "envloop/shell@1"
CHAT_RUNNER = "envloop/chat@1"


class _Member(BaseModel):
    name: str
    digest: str
    row: dict[str, object] | None = None
    requires: list[str] = []
    features: list[TaskFeature] | None = None


def feature_warnings(members: Sequence[tuple[str, list[TaskFeature] | None]]) -> list[str]:
    """One line per task and feature, as `el dataset push` prints them and the revision keeps them."""
    return [f"task {name}: {feature.describe()}" for name, features in members for feature in features or []]


def member_features(member: DatasetMember) -> list[TaskFeature] | None:
    if member.features is None:
        return None
    return [TaskFeature.model_validate(feature) for feature in member.features]


def _content_digest(kind: str, runner: str, scorer: str | None, members: list[_Member]) -> str:
    canonical = json.dumps(
        {"kind": kind, "runner": runner, "scorer": scorer, "members": [[m.name, m.digest] for m in members]},
        sort_keys=True,
        separators=(",", ":"),
    )
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def _view(
    row: Dataset,
    members: list[DatasetMember] | None,
    count: int,
    created: bool | None = None,
    warnings: list[str] | None = None,
    origins: dict[str, TaskOrigin] | None = None,
) -> DatasetView:
    found = origins or {}
    shown = (
        None
        if members is None
        else [
            MemberView(
                position=m.position,
                name=m.name,
                digest=m.digest,
                features=member_features(m),
                origin=found.get(m.name),
            )
            for m in members
        ]
    )
    if warnings is None:
        warnings = feature_warnings([(m.name, m.features) for m in shown or []])
    return DatasetView(
        name=row.name,
        version=row.version,
        ref=dataset_ref(row.name, row.version),
        runner=row.runner,
        kind=row.kind,
        scorer=row.scorer,
        digest=row.content_digest,
        created_at=row.created_at,
        member_count=count,
        members=shown,
        created=created,
        warnings=warnings,
    )


def _check_runner(runner: str, kind: str) -> None:
    if kind == "jsonl":
        if runner != CHAT_RUNNER:
            raise UserError(f"JSONL datasets run with {CHAT_RUNNER}, not {runner}")
        return
    from envloop.runners.registry import UnknownRunnerError, get_runner  # noqa: PLC0415 - only pushes

    try:
        found = get_runner(runner)
    except UnknownRunnerError as exc:
        raise UserError(str(exc)) from None
    if found.task_kind != "harbor":
        raise UserError(f"runner {runner} cannot run task directories")


def push_dataset(
    ctx: Context,
    path: Path,
    name: str,
    runner: str | None = None,
    scorer: str | None = None,
    origins: str | None = None,
) -> DatasetView:
    """Freeze every task under `path`; identical content returns the existing revision.

    `origins` (JSON: task name → TaskOrigin) is kept with a new revision, naming where each task
    came from; an identical revision that already exists keeps what it had."""
    # Reading task directories and rows (and the sandbox's policy, for a task's features) is for
    # pushes alone: commands that only read datasets and jobs do not pay for importing it.
    check_name("dataset", name)
    if not path.exists():
        raise UserError(f"{path}: no such file or directory")
    with tempfile.TemporaryDirectory(prefix="envloop-push-") as scratch:
        try:
            harbor, notes = _harbor_form(path, Path(scratch))
            view = _push(ctx, harbor, name, runner, scorer, origins)
            return view.model_copy(update={"warnings": [*view.warnings, *notes]})
        except UserError as exc:
            # A converted task's errors name it as the user does, never the scratch folder.
            raise type(exc)(str(exc).replace(f"{scratch}/", "")) from None


def _harbor_form(path: Path, scratch: Path) -> tuple[Path, list[str]]:
    """`path` itself, or, when it holds Terminal-Bench 1 tasks, its Harbor-format equivalent
    written under `scratch` (tasks/tb1.py), named as `path` is so the tasks keep their names; with
    the conversion's notes, one line a task and note as the push prints them."""
    from envloop.tasks.discover import task_name  # noqa: PLC0415
    from envloop.tasks.model import TaskFormatError  # noqa: PLC0415
    from envloop.tasks.tb1 import convert_tree, holds_tb1_tasks  # noqa: PLC0415

    if path.is_file() or not holds_tb1_tasks(path):
        return path, []
    converted = scratch / path.resolve().name
    try:
        notes = convert_tree(path, converted)
    except TaskFormatError as exc:
        raise UserError(str(exc).replace(str(path), path.name)) from None
    except OSError as exc:
        raise UserError(f"{path.name}: {exc.strerror or 'cannot be read'}") from None
    return converted, [f"task {task_name(converted, task)}: {note}" for task, note in notes]


def _push(
    ctx: Context, path: Path, name: str, runner: str | None, scorer: str | None, origins: str | None
) -> DatasetView:
    from envloop.environments.features import task_features  # noqa: PLC0415
    from envloop.tasks.discover import load_tasks  # noqa: PLC0415
    from envloop.tasks.model import TaskFormatError  # noqa: PLC0415
    from envloop.tasks.unknown_keys import unknown_keys  # noqa: PLC0415
    from envloop.tasks.variables import referenced_variables  # noqa: PLC0415

    notes: list[str] = []
    try:
        if path.is_file():
            kind, members = "jsonl", _jsonl_members(path, scorer or "exact")
            scorer = scorer or "exact"
            runner = runner or CHAT_RUNNER
        else:
            if scorer is not None:
                raise UserError("--scorer applies to JSONL datasets only")
            kind, runner = "harbor", runner or SHELL_RUNNER
            tasks = load_tasks(path)
            members = [
                _Member(
                    name=t.name, digest=t.digest, requires=referenced_variables(t), features=task_features(t)
                )
                for t in tasks
            ]
            notes = [f"task {t.name}: {line}" for t in tasks for line in unknown_keys(t.config)]
    except TaskFormatError as exc:
        raise UserError(str(exc)) from None
    except RecursionError:
        raise UserError(
            f"{path.name}: a file is nested too deeply to read (at most {MAX_DEPTH} levels are accepted)"
        ) from None
    _check_runner(runner, kind)
    origins_document = _origins_document(origins, kind, [m.name for m in members])
    if kind == "harbor":
        for task in tasks:
            _check_archive_limits(task)
        for task in tasks:
            ctx.artifacts.put_task(task.digest, task.root)
    digest = _content_digest(kind, runner, scorer, members)
    for _ in range(5):
        try:
            return _record(ctx, name, kind, runner, scorer, digest, members, notes, origins_document)
        except IntegrityError:
            continue
    raise ConflictError(f"could not record a revision of {name}: too many concurrent pushes")


_ORIGINS = TypeAdapter(dict[str, TaskOrigin])


def _origins_document(origins: str | None, kind: str, names: list[str]) -> bytes | None:
    """The origins checked against the tasks pushed: one for each task, none for another."""
    if origins is None:
        return None
    if kind != "harbor":
        raise UserError("origins apply to task directories only")
    try:
        parsed = _ORIGINS.validate_json(origins)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise UserError(f"origins: {where}: {first['msg']}") from None
    missing = sorted(set(names) - set(parsed))
    extra = sorted(set(parsed) - set(names))
    if missing or extra:
        which = f"no origin for task {missing[0]}" if missing else f"an origin for no task ({extra[0]})"
        raise UserError(f"origins: {which}")
    return _ORIGINS.dump_json(parsed)


def _stored_origins(ctx: Context, dataset_id: str) -> dict[str, TaskOrigin] | None:
    document = ctx.artifacts.dataset_origins(dataset_id)
    return None if document is None else _ORIGINS.validate_json(document)


def _check_archive_limits(task: "HarborTask") -> None:
    """A task is stored as an archive that every trial unpacks within the archive limits: one over
    them would be accepted here and then fail every trial, so it is refused now, naming the limit."""
    from envloop.tasks.archive import DEFAULT_MAX_BYTES, DEFAULT_MAX_ENTRIES  # noqa: PLC0415
    from envloop.tasks.digest import task_entries  # noqa: PLC0415

    entries = task_entries(task.root)
    directories = {str(PurePosixPath(e.path).parent) for e in entries} - {"."}
    count = len(entries) + len(directories)
    size = sum(e.source.lstat().st_size for e in entries if e.kind == "file")
    if count > DEFAULT_MAX_ENTRIES:
        raise UserError(
            f"task {task.name} has {count:,} files and folders; "
            f"a task may hold at most {DEFAULT_MAX_ENTRIES:,}"
        )
    if size > DEFAULT_MAX_BYTES:
        raise UserError(
            f"task {task.name} holds {size:,} bytes; a task may hold at most {DEFAULT_MAX_BYTES:,} bytes "
            f"({DEFAULT_MAX_BYTES // (1 << 30)} GiB)"
        )


def _jsonl_members(path: Path, scorer: str) -> list[_Member]:
    from envloop.tasks.jsonl import load_jsonl, row_digest  # noqa: PLC0415
    from envloop.tasks.scorers import validate_scorer  # noqa: PLC0415

    rows = load_jsonl(path)
    for number, row in enumerate(rows, start=1):
        if deeper_than(row.model_dump(mode="python")):
            raise UserError(f"{path.name}: row {number} is nested more than {MAX_DEPTH} levels deep")
    validate_scorer(scorer, rows, source=path)
    return [
        _Member(name=row.id or "", digest=row_digest(row), row=row.model_dump(mode="json")) for row in rows
    ]


def _record(
    ctx: Context,
    name: str,
    kind: str,
    runner: str,
    scorer: str | None,
    digest: str,
    members: list[_Member],
    notes: list[str],
    origins_document: bytes | None,
) -> DatasetView:
    """Store the revision (or find the identical one); `notes` are push-time warnings beside the
    features' (unknown task.toml keys), not kept with the revision. The origins are written before
    the revision's row is committed, so a revision never lacks the origins it was pushed with."""
    with ctx.store.write() as session:
        existing = session.scalar(
            select(Dataset).where(
                Dataset.project_id == ctx.project_id, Dataset.name == name, Dataset.content_digest == digest
            )
        )
        warnings = feature_warnings([(m.name, m.features) for m in members]) + notes
        if existing is not None:
            _record_missing_features(session, existing, members)
            return _view(existing, None, len(members), created=False, warnings=warnings)
        latest = session.scalar(
            select(func.max(Dataset.version)).where(
                Dataset.project_id == ctx.project_id, Dataset.name == name
            )
        )
        row = Dataset(
            id=new_id("ds"),
            project_id=ctx.project_id,
            name=name,
            version=(latest or 0) + 1,
            runner=runner,
            kind=kind,
            scorer=scorer,
            content_digest=digest,
        )
        session.add(row)
        session.flush()
        session.add_all(
            DatasetMember(
                dataset_id=row.id,
                position=i,
                name=m.name,
                digest=m.digest,
                row=m.row,
                requires=m.requires,
                features=None
                if m.features is None
                else [feature.model_dump(mode="json") for feature in m.features],
            )
            for i, m in enumerate(members)
        )
        session.flush()
        if origins_document is not None:
            ctx.artifacts.put_dataset_origins(row.id, origins_document)
        return _view(row, None, len(members), created=True, warnings=warnings)


def _record_missing_features(session: Session, dataset: Dataset, members: list[_Member]) -> None:
    """A revision pushed before features were recorded gets them when its content is pushed again."""
    found = {m.name: m.features for m in members}
    for member in dataset_members(session, dataset.id):
        features = found.get(member.name)
        if member.features is None and features is not None:
            member.features = [feature.model_dump(mode="json") for feature in features]


def resolve_dataset(session: Session, project_id: str, ref: str) -> Dataset:
    name, version = parse_dataset_ref(ref)
    query = select(Dataset).where(Dataset.project_id == project_id, Dataset.name == name)
    if version is None:
        row = session.scalar(query.order_by(Dataset.version.desc()).limit(1))
    else:
        row = session.scalar(query.where(Dataset.version == version))
    if row is None:
        raise NotFoundError(f"unknown dataset {ref!r}")
    return row


def dataset_members(session: Session, dataset_id: str) -> list[DatasetMember]:
    return list(
        session.scalars(
            select(DatasetMember)
            .where(DatasetMember.dataset_id == dataset_id)
            .order_by(DatasetMember.position)
        )
    )


def get_dataset(ctx: Context, ref: str) -> DatasetView:
    with ctx.store.read() as session:
        row = resolve_dataset(session, ctx.project_id, ref)
        members = dataset_members(session, row.id)
        return _view(row, members, len(members), origins=_stored_origins(ctx, row.id))


def list_datasets(ctx: Context) -> list[DatasetView]:
    with ctx.store.read() as session:
        counts = dict(
            session.execute(
                select(DatasetMember.dataset_id, func.count()).group_by(DatasetMember.dataset_id)
            ).all()
        )
        rows = session.scalars(
            select(Dataset)
            .where(Dataset.project_id == ctx.project_id)
            .order_by(Dataset.name, Dataset.version)
        )
        return [_view(row, None, counts.get(row.id, 0)) for row in rows]
