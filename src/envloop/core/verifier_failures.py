"""Telling "the verifier could not run" apart from "the agent failed", from what the verifier printed.

Real task verifiers install what they need as they start (`apt-get install curl`, `curl … | sh`,
`uvx pytest`) and write 0 when anything fails. Where the environment lacks a tool or a network, that
0 measures the environment, not the agent. When a verifier that gave 0 (or nothing) also printed
one of the unmistakable signs below, the trial is a `verifier_error` naming what was missing, and
the 0 is not counted. Signs are matched only in the verifier's own output, and only the first is
reported.
"""

import re

NO_NETWORK = "the verifier needed a network it did not have"
_SIGNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"(?:^|\n)(?:[^\n:]*: )?(?:line \d+: |\d+: )?([\w.+-]+): (?:command )?not found\b"),
        "`{0}` is not installed in the verifier's environment (command not found)",
    ),
    (
        re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'"),
        "Python module `{0}` is not installed in the verifier's environment",
    ),
    (
        re.compile(
            r"Could not resolve host|Temporary failure in name resolution|Network is unreachable|"
            r"Failed to establish a new connection|Could not connect to [\w.:-]+|getaddrinfo failed|"
            r"Name or service not known"
        ),
        NO_NETWORK,
    ),
    (
        re.compile(r"E: Could not open lock file[^\n]*(?:Read-only file system|Permission denied)"),
        "the verifier tried to install system packages, which this environment does not allow",
    ),
    (
        re.compile(r"E: Unable to locate package ([\w.+-]+)"),
        "the verifier could not install the system package `{0}` (no package index: no network)",
    ),
)


def missing_capability(output: str, *, offline_by_design: bool = False) -> str | None:
    """What the verifier's environment lacked, judging by its output, or None. A verifier whose
    task closed its network on purpose (`offline_by_design`) may well print network errors: it
    checks that the network is closed, so they are no sign of a missing capability."""
    for pattern, message in _SIGNS:
        if offline_by_design and message == NO_NETWORK:
            continue
        match = pattern.search(output)
        if match is not None:
            return message.format(*match.groups())
    return None


def environment_failure(
    reward: float | None, stdout: str, stderr: str, *, offline_by_design: bool = False
) -> str | None:
    """The reason to count a verifier run as a `verifier_error` rather than a score: it gave no
    reward or 0, and its output shows the environment lacked something."""
    if reward not in (None, 0.0):
        return None
    return missing_capability(stderr + "\n" + stdout, offline_by_design=offline_by_design)
