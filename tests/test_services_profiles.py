"""Profiles: immutable versions, secrets stored apart and never shown."""

from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from sqlalchemy import select

from envloop.errors import ConflictError, UserError
from envloop.services import datasets, job_submission, profiles
from envloop.services.context import Context
from envloop.store import secrets
from envloop.store.tables import Profile, ProfileSecret
from envloop.wire.jobs import JobRequest
from tests.conftest import make_task, write_profile

SECRET = "sk-test-4f1c9a7e2b"


def _doc(tmp_path: Path, params: dict[str, str], secret: list[str] | None = None) -> profiles.ProfileDocument:
    return profiles.read_profile_file(write_profile(tmp_path / "p.json", params, secret))


def test_seed_style_profile_is_accepted_and_secrets_are_masked(ctx: Context, tmp_path: Path) -> None:
    doc = _doc(tmp_path, {"AGENT_NAME": "oracle", "MODEL_API_KEY": SECRET}, ["MODEL_API_KEY"])
    view = profiles.create_profile(ctx, "team/eval", "1", doc)
    assert view.params["MODEL_API_KEY"] == "***"
    assert SECRET not in view.model_dump_json()
    assert SECRET not in profiles.get_profile(ctx, "team/eval@1").model_dump_json()


def test_secret_values_are_stored_apart_from_params_and_encrypted(ctx: Context, tmp_path: Path) -> None:
    doc = _doc(tmp_path, {"AGENT_NAME": "oracle", "MODEL_API_KEY": SECRET}, ["MODEL_API_KEY"])
    profiles.create_profile(ctx, "team/eval", "1", doc)
    with ctx.store.read() as session:
        row = session.scalars(select(Profile)).one()
        assert "MODEL_API_KEY" not in row.params
        stored = session.scalars(select(ProfileSecret.value)).one()
        assert stored.startswith("fernet:") and SECRET not in stored
        assert secrets.resolved_params(session, row, ctx.home)["MODEL_API_KEY"] == SECRET


def test_same_content_again_is_a_no_op(ctx: Context, tmp_path: Path) -> None:
    doc = _doc(tmp_path, {"AGENT_NAME": "nop"})
    assert profiles.create_profile(ctx, "a", "1", doc).created is True
    assert profiles.create_profile(ctx, "a", "1", doc).created is False


def test_different_content_for_an_existing_version_is_refused(ctx: Context, tmp_path: Path) -> None:
    profiles.create_profile(ctx, "a", "1", _doc(tmp_path, {"AGENT_NAME": "nop"}))
    with pytest.raises(ConflictError, match="immutable"):
        profiles.create_profile(ctx, "a", "1", _doc(tmp_path, {"AGENT_NAME": "oracle"}))


def test_a_changed_secret_value_is_different_content(ctx: Context, tmp_path: Path) -> None:
    profiles.create_profile(ctx, "a", "1", _doc(tmp_path, {"K": "one"}, ["K"]))
    with pytest.raises(ConflictError):
        profiles.create_profile(ctx, "a", "1", _doc(tmp_path, {"K": "two"}, ["K"]))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"schema_version": "other/v1", "spec": {"params": {}}}', "schema_version"),
        ('{"schema_version": "envplatform.profile/v2"}', "spec"),
        ('{"schema_version": "envplatform.profile/v2", "spec": {"params": {"A": [1]}}}', "spec.params.A"),
    ],
)
def test_malformed_profile_files_are_refused_naming_the_field(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "p.json"
    path.write_text(content)
    with pytest.raises(UserError, match=message):
        profiles.read_profile_file(path)


def test_secret_params_must_name_existing_params(ctx: Context, tmp_path: Path) -> None:
    with pytest.raises(UserError, match="secret_params"):
        profiles.create_profile(ctx, "a", "1", _doc(tmp_path, {"A": "x"}, ["B"]))


def test_file_name_and_version_must_match_the_command(ctx: Context, tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text(
        '{"schema_version": "envplatform.profile/v2", "name": "x", "version": "2", "spec": {"params": {}}}'
    )
    with pytest.raises(UserError, match="names"):
        profiles.create_profile(ctx, "y", "2", profiles.read_profile_file(path))
    with pytest.raises(UserError, match="version"):
        profiles.create_profile(ctx, "x", "3", profiles.read_profile_file(path))


def test_a_job_submitted_through_a_context_opens_secrets_with_its_homes_key_whatever_envloop_home_names(
    ctx: Context, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A program holding a context on one home (a server, a test, an embedding script) while
    ENVLOOP_HOME names another installation: its jobs' secrets open with its own home's key."""
    doc = _doc(tmp_path, {"AGENT_NAME": "oracle", "MODEL_API_KEY": SECRET}, ["MODEL_API_KEY"])
    profiles.create_profile(ctx, "team/eval", "1", doc)
    ref = datasets.push_dataset(ctx, make_task(tmp_path / "tasks", "t0").parent, "ds").ref
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "secret.key").write_text(Fernet.generate_key().decode() + "\n")
    monkeypatch.setenv("ENVLOOP_HOME", str(elsewhere))
    submitted = job_submission.submit_job(ctx, JobRequest(dataset=ref, profiles=["team/eval@1"]))
    assert submitted.job.counts


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"AGENT_NAME": "command"}, "profile a@1: AGENT_COMMAND is required when AGENT_NAME=command"),
        (
            {"AGENT_NAME": "command", "AGENT_COMAND": "true"},
            "profile a@1: AGENT_COMAND is not a param of agent 'command': did you mean AGENT_COMMAND?",
        ),
        (
            {"MODEL_BASE_URL": "http://127.0.0.1:1", "MODEL_NAEM": "m"},
            "profile a@1: MODEL_NAEM is not a param of runner envloop/chat@1: did you mean MODEL_NAME?",
        ),
    ],
)
def test_a_profile_that_cannot_run_is_refused_before_its_version_is_frozen(
    ctx: Context, tmp_path: Path, params: dict[str, str], message: str
) -> None:
    with pytest.raises(UserError) as refused:
        profiles.create_profile(ctx, "a", "1", _doc(tmp_path, params))
    assert str(refused.value) == message
    with ctx.store.read() as session:
        assert session.scalars(select(Profile)).all() == []


def test_a_name_no_component_declares_and_none_resembles_is_kept_for_the_tasks(
    ctx: Context, tmp_path: Path
) -> None:
    """A task's task.toml may reference a profile param by a name of its own: not a mistake."""
    view = profiles.create_profile(ctx, "a", "1", _doc(tmp_path, {"AGENT_NAME": "nop", "DATA_URL": "x"}))
    assert view.params["DATA_URL"] == "x"
