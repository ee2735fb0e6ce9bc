"""Parsing of the references users type: NAME@N for datasets, NAME@VERSION for profiles."""

import re

from envloop.errors import UserError

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$")
_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def check_name(kind: str, name: str) -> str:
    if not _NAME.match(name) or "//" in name or name.endswith("/"):
        raise UserError(f"invalid {kind} name {name!r}: use letters, digits, '.', '_', '-' and '/'")
    return name


def check_version(kind: str, version: str) -> str:
    if not _VERSION.match(version):
        raise UserError(f"invalid {kind} version {version!r}: use letters, digits, '.', '_' and '-'")
    return version


def split_ref(kind: str, ref: str) -> tuple[str, str]:
    name, sep, version = ref.rpartition("@")
    if not sep or not name or not version:
        raise UserError(f"invalid {kind} reference {ref!r}: expected NAME@VERSION")
    return check_name(kind, name), version


def dataset_ref(name: str, version: int) -> str:
    return f"{name}@{version}"


def parse_dataset_ref(ref: str) -> tuple[str, int | None]:
    """NAME@N, or NAME@latest / bare NAME (None: resolve to the newest revision now)."""
    if "@" not in ref:
        return check_name("dataset", ref), None
    name, version = split_ref("dataset", ref)
    if version == "latest":
        return name, None
    if not version.isdigit() or int(version) < 1:
        raise UserError(f"invalid dataset reference {ref!r}: the revision must be a number >= 1 or 'latest'")
    return name, int(version)
