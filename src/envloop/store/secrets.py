"""Profile secrets at rest: encrypted with a key that is never in the database.

A value in `profile_secrets` is a Fernet token (AES-128-CBC with HMAC-SHA256, from the
`cryptography` package) marked `fernet:`; whoever copies the database alone learns nothing. The
key comes from, in order:

- `ENVLOOP_SECRET_KEY`: Fernet keys (urlsafe base64 of 32 bytes), comma-separated, newest first,
  for an operator who keeps keys elsewhere (a secret manager, a systemd credential);
- else the key file `ENVLOOP_SECRET_KEY_FILE`, by default `ENVLOOP_HOME/secret.key`, created
  with mode 0600 the first time a secret is stored: one key per line, newest first.

Every process that runs trials needs the key: a worker on another machine gets the same
`ENVLOOP_SECRET_KEY` or a copy of the file. New values are encrypted with the newest key; any
listed key decrypts. `rotate_secret_key` (`el secret rotate-key`) re-encrypts every value with a
new key and then forgets the old ones, in an order that survives a crash at any point: the new
key is written beside the old ones before any value changes, all values change in one
transaction, and only then are the old keys dropped. Values stored before encryption existed are
sealed on the next open of the store.
"""

import contextlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from envloop.errors import UserError
from envloop.settings import env_name, settings
from envloop.store.db import Store
from envloop.store.reads import SessionReads, plaintext_secret
from envloop.store.schema import SEALED_PREFIX
from envloop.store.tables import Profile, ProfileSecret

if TYPE_CHECKING:
    from cryptography.fernet import MultiFernet

PREFIX = SEALED_PREFIX
KEY_ENV = env_name("secret_key")
KEY_FILE_NAME = "secret.key"


class SecretKeyError(UserError):
    """The secret key is missing, malformed, or does not open a stored value."""


@dataclass(frozen=True)
class Keyring:
    """The keys that open stored secrets, newest first, and where they came from."""

    keys: tuple[bytes, ...]
    file: Path | None
    """The key file, or None when the keys come from ENVLOOP_SECRET_KEY."""

    def _fernet(self) -> "MultiFernet":
        from cryptography.fernet import Fernet, MultiFernet  # noqa: PLC0415 - only when secrets are used

        try:
            return MultiFernet([Fernet(key) for key in self.keys])
        except ValueError:
            where = str(self.file.name) if self.file else KEY_ENV
            raise SecretKeyError(f"{where}: not a valid secret key (urlsafe base64 of 32 bytes)") from None

    def seal(self, value: str) -> str:
        return PREFIX + self._fernet().encrypt(value.encode()).decode()

    def open(self, stored: str) -> str:
        """The plain value of a stored secret (one stored before encryption is returned as is)."""
        if not stored.startswith(PREFIX):
            return stored
        from cryptography.fernet import InvalidToken  # noqa: PLC0415

        try:
            return self._fernet().decrypt(stored.removeprefix(PREFIX).encode()).decode()
        except InvalidToken:
            raise SecretKeyError(
                "a stored secret does not open with the secret key: "
                f"is this the key this store's secrets were written with ({_source(self)})?"
            ) from None

    def reseal(self, stored: str) -> str:
        """The same value encrypted with the newest key."""
        return self.seal(self.open(stored))


def _new_key() -> bytes:
    from cryptography.fernet import Fernet  # noqa: PLC0415

    return Fernet.generate_key()


def _source(ring: Keyring) -> str:
    return KEY_ENV if ring.file is None else f"key file {ring.file.name}"


def key_file(home: Path) -> Path:
    configured = settings().secret_key_file
    return configured.expanduser() if configured else home / KEY_FILE_NAME


def keyring(home: Path) -> Keyring:
    """The keys for the store under `home`; the key file is created (0600) when there is none."""
    from_env = _keys_from_environment()
    if from_env:
        return Keyring(tuple(k.strip().encode() for k in from_env.split(",") if k.strip()), None)
    path = key_file(home)
    try:
        text = path.read_text(encoding="ascii")
    except FileNotFoundError:
        _write_keys(path, [_new_key()], exclusive=True)
        text = path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise SecretKeyError(f"cannot read the secret key file {path.name}: {exc}") from None
    keys = tuple(line.strip().encode() for line in text.splitlines() if line.strip())
    if not keys:
        raise SecretKeyError(f"the secret key file {path.name} holds no key")
    return Keyring(keys, path)


def _write_keys(path: Path, keys: list[bytes], *, exclusive: bool = False) -> None:
    """Replace the key file atomically, readable by its owner only. With `exclusive`, a file that
    appeared meanwhile (another process created the first key) is kept instead."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=".secret-key-", dir=path.parent)
    temporary = Path(name)
    try:
        os.fchmod(handle, 0o600)
        os.write(handle, b"".join(key + b"\n" for key in keys))
        os.fsync(handle)
        os.close(handle)
        if exclusive:
            with contextlib.suppress(FileExistsError):
                os.link(temporary, path)
        else:
            temporary.replace(path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()


def has_key(home: Path) -> bool:
    return bool(_keys_from_environment()) or key_file(home).exists()


def _keys_from_environment() -> str:
    chosen = settings().secret_key
    return chosen.get_secret_value().strip() if chosen else ""


def seal_plaintext(store: Store, home: Path) -> int:
    """Encrypt values stored before encryption existed; returns how many there were.

    An embedded store (SQLite under this home) creates its key if needed. A shared database is
    sealed only by a process that already has the key: a worker on another machine that lacks it
    must not seal the team's secrets with a key of its own (`el secret rotate-key` on the server
    seals them too)."""
    if not (store.is_sqlite or has_key(home)):
        return 0
    with store.read() as session:
        plain = SessionReads(session).first(plaintext_secret)
    if plain is None:
        return 0
    ring = keyring(home)
    with store.write() as session:
        rows = session.scalars(select(ProfileSecret).where(ProfileSecret.value.not_like(f"{PREFIX}%"))).all()
        for row in rows:
            row.value = ring.seal(row.value)
        return len(rows)


def resolved_params(session: Session, profile: Profile, home: Path) -> dict[str, str]:
    """All params with secret values filled in: for runners only, never for display. The values are
    decrypted with the key of the installation at `home` (the caller's context's, never whatever
    ENVLOOP_HOME happens to name). Here, beside the keys, so the worker that runs a trial and the
    service that stores the profile open its secrets the same way."""
    return {**profile.params, **secret_values(session, profile, home)}


def secret_values(session: Session, profile: Profile, home: Path) -> dict[str, str]:
    """The profile's secret params, opened."""
    rows = session.scalars(select(ProfileSecret).where(ProfileSecret.profile_id == profile.id)).all()
    if not rows:
        return {}
    ring = keyring(home)
    return {row.name: ring.open(row.value) for row in rows}


class Rotation(BaseModel):
    secrets: int
    key_source: str
    note: str | None = None


def rotate_secret_key(store: Store, home: Path) -> Rotation:
    """Re-encrypt every stored secret with a new key (the key file) or with the first key of
    ENVLOOP_SECRET_KEY, then forget the old keys; crash-safe at every step (module docstring)."""
    current = keyring(home)
    if current.file is not None:
        ring = Keyring((_new_key(), *current.keys), current.file)
        _write_keys(current.file, list(ring.keys))
    else:
        ring = current
    ring.seal("")  # a malformed key fails here, before any value changes
    with store.write() as session:
        rows = session.execute(
            select(ProfileSecret.profile_id, ProfileSecret.name, ProfileSecret.value)
        ).all()
        for profile_id, name, value in rows:
            session.execute(
                update(ProfileSecret)
                .where(ProfileSecret.profile_id == profile_id, ProfileSecret.name == name)
                .values(value=ring.reseal(value))
            )
    if ring.file is not None:
        _write_keys(ring.file, [ring.keys[0]])
        return Rotation(secrets=len(rows), key_source=f"key file {ring.file.name}")
    note = f"every secret now uses the first key of {KEY_ENV}; the others can be removed from it"
    return Rotation(secrets=len(rows), key_source=KEY_ENV, note=note if len(ring.keys) > 1 else None)
