"""Datasets: push a task archive (or a JSONL file) as a new revision, an upload written out by hand.

An upload is unpacked with the same hostile-archive checks as any task archive, into a scratch
folder named after the uploaded file, and then pushed exactly like a local path.
"""

import re
import shutil
import tempfile
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, File, Form, Response, UploadFile

from envloop.api.auth import ProjectContext
from envloop.api.limits import max_unpacked_bytes
from envloop.api.schemas import ERRORS
from envloop.services import datasets
from envloop.services.context import Context
from envloop.services.datasets import DatasetView
from envloop.services.errors import UserError
from envloop.tasks.archive import length_problem, safe_extract
from envloop.tasks.model import TaskFormatError

router = APIRouter(prefix="/v1/datasets", tags=["datasets"], responses=ERRORS)

_ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".zip")
_SAFE_STEM = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


def _split_name(filename: str) -> tuple[str, str]:
    """(stem, suffix) of an uploaded file name, refusing kinds we cannot read."""
    base = Path(filename).name
    problem = length_problem(base, "a file name")
    if problem is not None:
        raise UserError(f"upload {base[:80]!r}…: {problem}")
    for suffix in (".jsonl", *_ARCHIVE_SUFFIXES):
        if base.endswith(suffix) and len(base) > len(suffix):
            stem = base[: -len(suffix)]
            if not _SAFE_STEM.match(stem):
                raise UserError(f"upload name {base!r}: use letters, digits, '.', '_' and '-'")
            return stem, suffix
    raise UserError(f"upload {base!r}: expected a .jsonl file or a .tar.gz, .tgz, .tar or .zip archive")


def _unpack(upload: UploadFile, scratch: Path) -> Path:
    """The path to push: the JSONL file, the archive's single top-level folder, or the unpacked root.

    The uploaded file keeps its name and the unpacked root is named after it, so messages about
    them name what the uploader sent."""
    stem, suffix = _split_name(upload.filename or "")
    received = scratch / f"{stem}{suffix}"
    with received.open("wb") as sink:
        shutil.copyfileobj(upload.file, sink)
    if suffix == ".jsonl":
        return received
    root = scratch / "unpacked" / stem
    safe_extract(received, root, max_bytes=max_unpacked_bytes())
    visible = [p for p in root.iterdir() if not p.name.startswith(".")]
    if not (root / "task.toml").exists() and len(visible) == 1 and visible[0].is_dir():
        return visible[0]
    return root


def _push(ctx: Context, upload: UploadFile, name: str, runner: str | None, scorer: str | None) -> DatasetView:
    with tempfile.TemporaryDirectory(prefix="envloop-upload-") as tmp:
        scratch = Path(tmp)
        prefix = f"{scratch}/"
        try:
            path = _unpack(upload, scratch)
            prefix = f"{path.parent}/"
            return datasets.push_dataset(ctx, path, name, runner=runner, scorer=scorer)
        except TaskFormatError as exc:
            raise UserError(str(exc).replace(prefix, "")) from None
        except UserError as exc:  # messages name files by where they were unpacked
            raise type(exc)(str(exc).replace(prefix, "")) from None


@router.post(
    "",
    status_code=201,
    responses={200: {"model": DatasetView, "description": "Identical content: the existing revision"}},
)
def push_dataset(
    ctx: ProjectContext,
    response: Response,
    name: Annotated[str, Form(min_length=1, description="dataset name; the revision becomes NAME@N")],
    archive: Annotated[
        UploadFile, File(description="task folder(s) as .tar.gz/.tgz/.tar/.zip, or a .jsonl file")
    ],
    runner: Annotated[str | None, Form(description="runner to pin (default by format)")] = None,
    scorer: Annotated[str | None, Form(description="JSONL scorer: exact, includes, regex, numeric")] = None,
) -> DatasetView:
    """Freeze the uploaded tasks as a new revision (identical content returns the existing one)."""
    view = _push(ctx, archive, name, runner, scorer)
    if not view.created:
        response.status_code = 200
    return view
