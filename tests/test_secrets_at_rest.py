"""Profile secrets at rest: encrypted with a key kept outside the database (a 0600 key file under
ENVLOOP_HOME, or ENVLOOP_SECRET_KEY), rotated by `el secret rotate-key`, and kept out of the
public profile digest."""

import json
import stat
from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config
from cryptography.fernet import Fernet, InvalidToken
from sqlalchemy import select, text, update

from envloop.errors import ConflictError, UserError
from envloop.services import profiles
from envloop.services.context import Context, open_context
from envloop.store import secrets
from envloop.store.db import MIGRATIONS_DIR, Store, make_engine
from envloop.store.secrets import SecretKeyError
from envloop.store.tables import Profile, ProfileSecret
from tests.conftest import El, write_profile

SECRET = "sk-canary-7f3e91d2c4b5a608"


def _create(ctx: Context, tmp_path: Path, value: str = SECRET, version: str = "1") -> profiles.ProfileView:
    path = write_profile(
        tmp_path / f"p{version}.json", {"AGENT_NAME": "nop", "MODEL_API_KEY": value}, ["MODEL_API_KEY"]
    )
    return profiles.create_profile(ctx, "team/keyed", version, profiles.read_profile_file(path))


def _resolved(ctx: Context) -> str:
    with ctx.store.read() as session:
        row = session.scalars(select(Profile)).one()
        return secrets.resolved_params(session, row, ctx.home)["MODEL_API_KEY"]


def _database_bytes(home: Path) -> bytes:
    return b"".join(p.read_bytes() for p in home.glob("envloop.db*"))


def test_a_secret_is_encrypted_with_a_key_file_only_its_owner_can_read(ctx: Context, tmp_path: Path) -> None:
    _create(ctx, tmp_path)
    key_file = ctx.home / "secret.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    Fernet(key_file.read_text().strip().encode())  # a real Fernet key
    assert SECRET.encode() not in _database_bytes(ctx.home)
    assert _resolved(ctx) == SECRET


def test_without_its_key_a_copied_database_opens_no_secret(ctx: Context, tmp_path: Path) -> None:
    _create(ctx, tmp_path)
    (ctx.home / "secret.key").write_text(Fernet.generate_key().decode() + "\n")
    with pytest.raises(SecretKeyError, match="does not open with the secret key"):
        _resolved(ctx)


def test_an_operator_key_in_the_environment_is_used_and_no_file_is_written(
    ctx: Context, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVLOOP_SECRET_KEY", Fernet.generate_key().decode())
    _create(ctx, tmp_path)
    assert not (ctx.home / "secret.key").exists()
    assert _resolved(ctx) == SECRET
    monkeypatch.setenv("ENVLOOP_SECRET_KEY", "not-a-key")
    with pytest.raises(UserError, match="not a valid secret key"):
        _resolved(ctx)


def test_rotation_reencrypts_every_secret_with_a_new_key_and_forgets_the_old(
    el: El, ctx: Context, tmp_path: Path
) -> None:
    _create(ctx, tmp_path)
    _create(ctx, tmp_path, value="second-secret-value", version="2")
    key_file = ctx.home / "secret.key"
    old_key = key_file.read_text()
    with ctx.store.read() as session:
        before = set(session.scalars(select(ProfileSecret.value)))
    rotated = el.ok("secret", "rotate-key", "--json").json()
    assert rotated["secrets"] == 2
    new_key = key_file.read_text()
    assert new_key != old_key and len(new_key.split()) == 1
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    with ctx.store.read() as session:
        after = set(session.scalars(select(ProfileSecret.value)))
        assert not before & after
        values = {
            row.version: secrets.resolved_params(session, row, ctx.home)["MODEL_API_KEY"]
            for row in session.scalars(select(Profile))
        }
    assert values == {"1": SECRET, "2": "second-secret-value"}
    for value in after:
        with pytest.raises(InvalidToken):  # the old key opens nothing any more
            Fernet(old_key.strip().encode()).decrypt(value.removeprefix("fernet:").encode())
    assert "re-encrypted 2 secrets" in el.ok("secret", "rotate-key").stdout


def test_secrets_stored_before_encryption_are_sealed_when_the_store_opens(
    ctx: Context, tmp_path: Path
) -> None:
    _create(ctx, tmp_path)
    with ctx.store.write() as session:
        session.execute(update(ProfileSecret).values(value=SECRET))  # as an older envloop stored it
    reopened = open_context(ctx.home)
    try:
        with reopened.store.read() as session:
            assert session.scalars(select(ProfileSecret.value)).one().startswith("fernet:")
        assert _resolved(reopened) == SECRET
    finally:
        reopened.close()


def test_the_public_digest_does_not_depend_on_secret_values(el: El, ctx: Context, tmp_path: Path) -> None:
    """A guess of a secret cannot be confirmed against the digest `el profile show` prints."""
    first = _create(ctx, tmp_path)
    shown = el.ok("profile", "show", "team/keyed@1", "--json").json()["digest"]
    path = write_profile(
        tmp_path / "other.json", {"AGENT_NAME": "nop", "MODEL_API_KEY": "guess"}, ["MODEL_API_KEY"]
    )
    other = profiles.create_profile(ctx, "team/other", "1", profiles.read_profile_file(path))
    assert shown == first.digest == other.digest
    with pytest.raises(ConflictError, match="immutable"):
        _create(ctx, tmp_path, value="a different secret")
    assert _create(ctx, tmp_path).created is False


def test_migration_0003_recomputes_digests_that_covered_secret_values(ctx: Context, tmp_path: Path) -> None:
    """A store at revision 0002 holds a digest over the secret value; upgrading replaces it by the
    digest a new store computes for the same profile, which covers no secret."""
    expected = _create(ctx, tmp_path).digest
    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = make_engine(url)
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0002")
        conn.execute(text("INSERT INTO projects (id, name, created_at) VALUES ('prj_x', 'x', '2026-01-01')"))
        conn.execute(
            text(
                "INSERT INTO profiles (id, project_id, name, version, params, secret_names, content_digest, "
                "created_at) VALUES ('prf_x', 'prj_x', 'team/keyed', '1', :params, :names, :digest, "
                "'2026-01-01')"
            ),
            {
                "params": json.dumps({"AGENT_NAME": "nop"}),
                "names": json.dumps(["MODEL_API_KEY"]),
                "digest": "sha256:old-digest-over-the-secret",
            },
        )
    engine.dispose()
    store = Store(url)
    try:
        with store.read() as session:
            assert session.scalars(select(Profile.content_digest)).one() == expected
    finally:
        store.close()


def test_params_that_are_not_strings_are_refused_not_coerced(el: El, tmp_path: Path) -> None:
    path = tmp_path / "numbers.json"
    path.write_text(
        json.dumps({"schema_version": "envplatform.profile/v2", "spec": {"params": {"AGENT_NAME": 5}}})
    )
    result = el("profile", "create", "team/numbers", "1", "--file", str(path))
    assert result.code == 2 and "spec.params.AGENT_NAME" in result.stderr
    assert "valid string" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    path.write_text(
        json.dumps({"schema_version": "envplatform.profile/v2", "spec": {"params": {"STREAM": True}}})
    )
    assert el("profile", "create", "team/numbers", "1", "--file", str(path)).code == 2
    assert el.ok("profile", "list", "--json").json() == []
