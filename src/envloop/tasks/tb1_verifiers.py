"""The verifiers of Terminal-Bench 1 tasks: each runs the task's `run-tests.sh` and reads its
output as the TB1 parser the task names does, writing `/logs/verifier/reward.json`.

Output the parser finds no verdict in scores 0, with the reason in the verifier's log: TB1 names
such a run a parse error and counts it among the unresolved. Leaving it unscored instead would
let an agent turn its 0 into a missing attempt by breaking what the tests need (uninstalling
pytest, leaving code that does not build), which nobody else could tell from its output. A
run-tests.sh that cannot fetch what it needs here fails on a host it names, which the trial's
proxy records: that leaves the trial unscored as the environment's failure whatever the
verifier wrote (environments/task_hosts.py), and an oracle's 0 shows any other such task."""

import json

_FRAME = r"""#!/bin/bash
ABOUT
export TEST_DIR=/tests
output=$(mktemp)
bash /tests/run-tests.sh 2>&1 | tee "$output"
awk 'PROGRAM' "$output" > /logs/verifier/reward.json
status=$?
rm -f "$output"
if [ "$status" -ne 0 ]; then
  echo '{"reward": 0}' > /logs/verifier/reward.json
  echo "NO_VERDICT: TB1 counts this as unresolved (a parse error), so the reward is 0" >&2
fi
"""
"""What every parser's verifier does: run run-tests.sh, show its output, and let an awk program
read it into reward.json; a program that exits non-zero found no verdict, which scores 0."""


def _verifier(about: str, program: str, no_verdict: str) -> str:
    return _FRAME.replace("ABOUT", about).replace("PROGRAM", program).replace("NO_VERDICT", no_verdict)


PYTEST_VERIFIER = _verifier(
    """# A Terminal-Bench 1 task's verifier: its run-tests.sh, whose output is read as TB1's pytest parser
# reads it (the "short test summary info" of pytest -rA). Reward 1 when every test passed (PASSED,
# XFAIL and SKIPPED pass; FAILED, XPASS and ERROR fail), else 0; each test's 1 or 0 is kept beside
# it. No summary in the output (pytest never ran, or not to its end): 0, and the reason on stderr.""",
    r"""
  /short test summary info/ { summary = 1; next }
  summary && NF >= 2 && $1 ~ /^(PASSED|FAILED|SKIPPED|XFAIL|XPASS|ERROR)$/ {
    name = $2
    sub(/^[^:]*::/, "", name)
    name = substr(name, 1, 120)
    gsub(/["\\]/, "", name)
    passed = ($1 == "PASSED" || $1 == "XFAIL" || $1 == "SKIPPED") ? 1 : 0
    if (!(name in seen)) { order[++count] = name; seen[name] = passed } else if (!passed) { seen[name] = 0 }
  }
  END {
    if (count == 0) { exit 2 }
    reward = 1
    for (i = 1; i <= count; i++) { if (!seen[order[i]]) reward = 0 }
    printf "{\"reward\": %d", reward
    if (count <= 99) { for (i = 1; i <= count; i++) printf ", \"%s\": %d", order[i], seen[order[i]] }
    printf "}\n"
  }
""",
    "no pytest summary in run-tests.sh's output (the tests did not run to their end)",
)

SWEBENCH_VERIFIER = _verifier(
    """# A Terminal-Bench 1 task's verifier for the swebench parser: its run-tests.sh grades the patch
# with SWE-bench's harness and prints PASSED or FAILED between "SWEBench results starts here" and
# "SWEBench results ends here". Reward 1 for PASSED, 0 for FAILED or no such block.""",
    r"""
  /SWEBench results starts here/ { inside = 1; next }
  /SWEBench results ends here/ { inside = 0; next }
  inside && $1 == "PASSED" { verdict = 1 }
  inside && $1 == "FAILED" { failed = 1 }
  END {
    if (failed) { print "{\"reward\": 0}"; exit 0 }
    if (verdict) { print "{\"reward\": 1}"; exit 0 }
    exit 2
  }
""",
    "no SWEBench results in run-tests.sh's output (the grading did not run to its end)",
)

_SCRIPTS = {"pytest": PYTEST_VERIFIER, "swebench": SWEBENCH_VERIFIER}


def has_parser(parser: str) -> bool:
    return parser in _SCRIPTS


def unknown_parser_reason(parser: str) -> str:
    return f"envloop has no Terminal-Bench 1 parser {parser!r} (it has: {', '.join(sorted(_SCRIPTS))})"


def verifier_script(parser: str) -> str:
    """The `tests/test.sh` of a task whose `task.yaml` names `parser`."""
    if not has_parser(parser):
        # Pushed as it is, the task runs and ends unscored with this reason: a score from a parser
        # envloop does not have would be a guess.
        return f"#!/bin/bash\necho {json.dumps(unknown_parser_reason(parser))} >&2\nexit 3\n"
    return _SCRIPTS[parser]
