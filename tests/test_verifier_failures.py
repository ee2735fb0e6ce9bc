"""A verifier that could not run (a missing tool, no network) is told apart from a failed agent."""

import pytest

from envloop.core.verifier_failures import environment_failure, missing_capability


@pytest.mark.parametrize(
    ("output", "reason"),
    [
        ("tests/test.sh: line 3: uvx: command not found\n", "`uvx` is not installed"),
        ("/tests/test.sh: 5: pytest: not found\n", "`pytest` is not installed"),
        ("bash: curl: command not found", "`curl` is not installed"),
        ("Traceback ...\nModuleNotFoundError: No module named 'numpy'\n", "Python module `numpy`"),
        ("curl: (6) Could not resolve host: example.org\n", "needed a network"),
        ("W: Failed to fetch ... Temporary failure in name resolution\n", "needed a network"),
        (
            "E: Could not open lock file /var/lib/dpkg/lock-frontend - open (30: Read-only file system)",
            "install system packages",
        ),
        ("E: Unable to locate package curl\n", "system package `curl`"),
    ],
)
def test_signs_of_a_missing_capability_are_named(output: str, reason: str) -> None:
    found = missing_capability(output)
    assert found is not None and reason in found


def test_an_honest_failure_is_not_an_environment_failure() -> None:
    output = "FAILED tests/test_outputs.py::test_file_exists - AssertionError: hello.txt missing\n"
    assert missing_capability(output) is None
    assert environment_failure(0.0, output, "") is None


def test_only_a_zero_or_missing_reward_is_set_aside() -> None:
    stderr = "bash: jq: command not found\n"
    assert environment_failure(1.0, "", stderr) is None
    assert environment_failure(0.5, "", stderr) is None
    assert (
        environment_failure(0.0, "", stderr)
        == "`jq` is not installed in the verifier's environment (command not found)"
    )
    assert environment_failure(None, stderr, "") is not None
