"""A folder on any fsspec file system (`s3://bucket/prefix`, `gs://…`, `memory://…`) that workers on
other machines share: the remote half of the artifact store.

fsspec is imported only when a remote store is used, so a local installation pays nothing for it.
S3 takes its endpoint and credentials from the standard `AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID` and
`AWS_SECRET_ACCESS_KEY` variables (read by botocore), with short connect timeouts and few retries:
an unreachable store must surface as one clear error in seconds, not hang a worker for minutes.

Every failure other than a missing object becomes `ArtifactStoreUnavailableError`, whose message
names the store's URL (never credentials) and the kind of failure.
"""

import hashlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from envloop.errors import ServerError, UserError

_T = TypeVar("_T")
_S3_OPTIONS: dict[str, Any] = {
    "config_kwargs": {"connect_timeout": 5, "read_timeout": 60, "retries": {"max_attempts": 3}},
}


class ArtifactStoreUnavailableError(ServerError):
    """The shared artifact store could not be read or written (unreachable, refused, misconfigured).
    Nothing the caller's input can fix; trying again later may succeed."""


def is_remote_url(location: str) -> bool:
    """A URL with a scheme other than file:// names a remote store; anything else is a local path."""
    scheme, sep, _ = location.partition("://")
    return bool(sep) and scheme.lower() != "file" and scheme.isidentifier()


class RemoteFolder:
    """Files under one URL prefix, addressed by relative POSIX keys (`tasks/ab….tar.gz`)."""

    def __init__(self, url: str) -> None:
        import fsspec  # noqa: PLC0415  (kept off the import path of every command that does not need it)

        self.url = url.rstrip("/")
        scheme = self.url.partition("://")[0].lower()
        if scheme not in fsspec.available_protocols():
            raise UserError(f"ENVLOOP_ARTIFACTS: unknown storage scheme {scheme!r}")
        options = dict(_S3_OPTIONS) if scheme in ("s3", "s3a") else {}
        try:
            self._fs, self._base = fsspec.core.url_to_fs(
                self.url, use_listings_cache=False, skip_instance_cache=True, **options
            )
        except ImportError as exc:
            raise UserError(f"ENVLOOP_ARTIFACTS: the {scheme}:// store needs {exc.name}") from None

    def _path(self, key: str) -> str:
        return f"{self._base}/{key}"

    def _call(self, what: str, work: Callable[[], _T]) -> _T:
        try:
            return work()
        except FileNotFoundError:
            raise
        except Exception as exc:
            reason = type(exc).__name__
            raise ArtifactStoreUnavailableError(
                f"artifact store {self.url}: could not {what} ({reason})"
            ) from exc

    def exists(self, key: str) -> bool:
        return self._call("check an object", lambda: bool(self._fs.exists(self._path(key))))

    def version(self, key: str) -> tuple[int, str]:
        """(size, a tag that changes whenever the object does); FileNotFoundError if absent."""
        info = self._call("read an object's details", lambda: self._fs.info(self._path(key)))
        if info.get("type") != "file":
            raise FileNotFoundError(key)
        tag = str(info.get("ETag") or info.get("etag") or info.get("mtime") or info.get("LastModified"))
        size = int(info.get("size") or 0)
        return size, hashlib.sha256(f"{size}|{tag}".encode()).hexdigest()[:16]

    def download(self, key: str, target: Path) -> None:
        self._call("download an object", lambda: self._fs.get_file(self._path(key), str(target)))

    def upload(self, files: Iterable[tuple[Path, str]]) -> None:
        pairs = list(files)
        if not pairs:
            return
        local = [str(path) for path, _ in pairs]
        remote = [self._path(key) for _, key in pairs]
        self._call("upload", lambda: self._fs.put(local, remote))

    def listing(self, prefix: str) -> dict[str, int]:
        """Every object under `prefix/`: its key relative to the prefix → its size."""
        base = self._path(prefix).rstrip("/")
        found = self._call("list objects", lambda: self._fs.find(base, detail=True))
        return {
            name[len(base) + 1 :]: int(info.get("size") or 0)
            for name, info in found.items()
            if info.get("type") == "file" and name.startswith(base + "/")
        }

    def remove(self, keys: Iterable[str]) -> None:
        paths = [self._path(key) for key in keys]
        if paths:
            self._call("remove objects", lambda: self._fs.rm(paths))
