"""What a worker records of itself (`host:pid:start time`) and how another process judges it gone."""

import subprocess

import pytest

from envloop import liveness


def test_an_ended_process_of_this_host_is_gone_and_a_running_one_is_not() -> None:
    ended = subprocess.Popen(["true"])
    identity = liveness.process_identity(ended.pid)
    ended.wait()
    assert liveness.identity_gone(identity)
    assert not liveness.identity_gone(liveness.process_identity())


@pytest.mark.parametrize(
    "identity", ["", "garbage", "1:2", ":1:2", "host:pid:1", "host:1:start", "another:host:1:2"]
)
def test_what_is_not_an_identity_of_this_host_is_never_taken_for_gone(identity: str) -> None:
    assert not liveness.identity_gone(identity)


def test_a_host_name_holding_colons_is_read_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(liveness.HOST_VARIABLE, "rack:7")
    assert liveness.identity_gone("rack:7:1:2")
    assert not liveness.identity_gone("7:1:2")
