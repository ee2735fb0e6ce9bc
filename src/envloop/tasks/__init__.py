"""Task formats: Harbor task directories and JSONL rows, their digests, and safe archive handling."""

from envloop.tasks.archive import extract_task_archive, pack_task, safe_extract
from envloop.tasks.digest import task_digest
from envloop.tasks.discover import discover_tasks, load_tasks
from envloop.tasks.harbor import load_harbor_task
from envloop.tasks.jsonl import SCORERS, ScorerName, jsonl_digest, load_jsonl, row_digest
from envloop.tasks.model import ChatRow, HarborTask, TaskConfig, TaskFormatError
from envloop.tasks.scorers import validate_scorer

__all__ = [
    "SCORERS",
    "ChatRow",
    "HarborTask",
    "ScorerName",
    "TaskConfig",
    "TaskFormatError",
    "discover_tasks",
    "extract_task_archive",
    "jsonl_digest",
    "load_harbor_task",
    "load_jsonl",
    "load_tasks",
    "pack_task",
    "row_digest",
    "safe_extract",
    "task_digest",
    "validate_scorer",
]
