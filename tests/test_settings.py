"""The settings model (envloop.settings): every ENVLOOP_* value is checked once before `el` runs a
command, a bad one is refused in one line naming it, readers see the environment as it is now,
and the Ray executor forwards exactly the trial settings that were set."""

import os
import socket

import pytest

from envloop.environments.base import EnvironmentSetupError
from envloop.environments.policy import operator_policy
from envloop.setting_addresses import driver_url
from envloop.settings import SettingsError, settings
from envloop.store.db import make_engine
from tests.conftest import El


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("ENVLOOP_WORKER_CAPACITY", "lots", "valid integer"),
        ("ENVLOOP_MAX_CPUS", "inf", "finite number"),
        ("ENVLOOP_SANDBOX", "docker", "'auto', 'bwrap' or 'plain'"),
        ("ENVLOOP_MAX_UPLOAD_MB", "-5", "at least 1"),
    ],
)
def test_a_bad_value_stops_el_in_one_line_naming_the_variable(
    el: El, name: str, value: str, says: str
) -> None:
    refused = el("job", "list", env={name: value})
    assert refused.code == 2
    assert refused.stderr.strip().splitlines() == [refused.stderr.strip()]
    assert refused.stderr.startswith(f"el: error: {name}={value!r}: ")
    assert says in refused.stderr and "Traceback" not in refused.stderr
    assert not (el.home / "envloop.db").exists()  # stopped before the store was opened


@pytest.mark.parametrize("url", ["mysql://bob:hunter2@db/x", "hunter2", "sqlite-hunter2"])
def test_a_store_url_envloop_cannot_open_is_refused_without_repeating_it(el: El, url: str) -> None:
    refused = el("job", "list", env={"ENVLOOP_DATABASE_URL": url})
    assert refused.code == 2
    assert refused.stderr == (
        "el: error: ENVLOOP_DATABASE_URL: expected sqlite:///PATH or postgresql://USER@HOST:PORT/DATABASE\n"
    )
    assert not (el.home / "envloop.db").exists()


@pytest.mark.parametrize(
    ("url", "opened"),
    [
        ("sqlite:///var/envloop.db", "sqlite:///var/envloop.db"),
        ("postgresql://bob@db:5432/evals", "postgresql+psycopg://bob@db:5432/evals"),
        ("postgres://bob@db:5432/evals", "postgresql+psycopg://bob@db:5432/evals"),
        ("postgresql+psycopg://bob@db:5432/evals", "postgresql+psycopg://bob@db:5432/evals"),
    ],
)
def test_every_store_url_the_settings_accept_is_one_the_store_opens(url: str, opened: str) -> None:
    """The settings' check and the store's engine read one table of schemes
    (`setting_addresses.STORE_DRIVERS`)."""
    assert driver_url(url) == opened
    assert make_engine(url).url.render_as_string() == opened


def test_an_unreachable_store_is_one_line_naming_it_without_its_password(el: El) -> None:
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    url = f"postgresql://bob:hunter2@127.0.0.1:{port}/evals"
    for args in (("job", "list"), ("dataset", "list"), ("worker", "--idle-exit", "1")):
        refused = el(*args, env={"ENVLOOP_DATABASE_URL": url})
        assert refused.code == 4, refused.stderr
        assert refused.stderr.startswith(
            f"el: error: cannot reach the store postgresql://bob:***@127.0.0.1:{port}/evals "
            "(ENVLOOP_DATABASE_URL): "
        )
        assert len(refused.stderr.splitlines()) == 1 and "hunter2" not in refused.stderr


def test_el_help_needs_no_valid_settings(el: El) -> None:
    assert el("--help", env={"ENVLOOP_WORKER_CAPACITY": "lots"}).code == 0


def test_the_settings_follow_the_environment_as_it_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVLOOP_MAX_MEMORY_MB", "300")
    assert settings().max_memory_mb == 300
    monkeypatch.setenv("ENVLOOP_MAX_MEMORY_MB", "")
    assert settings().max_memory_mb == 8192  # an empty variable is unset
    monkeypatch.setenv("ENVLOOP_PLUGIN_MODULES", " first, second.sub ,")
    assert settings().plugin_modules == ("first", "second.sub")


def test_a_bad_trial_setting_fails_the_trial_s_setup_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVLOOP_TRIAL_NETWORK", "open")
    with pytest.raises(SettingsError, match="ENVLOOP_TRIAL_NETWORK='open'"):
        settings()
    with pytest.raises(EnvironmentSetupError, match="ENVLOOP_TRIAL_NETWORK='open': input should be"):
        operator_policy()


def test_ray_nodes_get_the_trial_settings_that_were_set_and_nothing_of_the_worker_s_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in [n for n in os.environ if n.startswith("ENVLOOP_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("ENVLOOP_SANDBOX", "plain")
    monkeypatch.setenv("ENVLOOP_MAX_CPUS", "1.5")
    monkeypatch.setenv("ENVLOOP_LAUNCHER", "shell")
    monkeypatch.setenv("ENVLOOP_SECRET_KEY", "a-key")
    monkeypatch.setenv("ENVLOOP_HOME", "/somewhere")
    monkeypatch.setenv("ENVLOOP_DATABASE_URL", "sqlite:///x.db")
    assert settings().trial_environ() == {
        "ENVLOOP_LAUNCHER": "shell",
        "ENVLOOP_MAX_CPUS": "1.5",
        "ENVLOOP_SANDBOX": "plain",
    }
