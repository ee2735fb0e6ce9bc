"""The verifiers of Terminal-Bench 1 tasks: each runs the task's `run-tests.sh` and reads its
output as the TB1 parser the task names does, writing `/logs/verifier/reward.json`. Output the
parser finds no verdict in writes no reward (exit 3), so the trial ends unscored with the reason,
never 0. TB1 names such a run a parse error and counts it among the unresolved; here no verdict
most often means an environment that cannot run the tests (a run-tests.sh that downloads its
tools without a network), which a 0 would blame on the agent. The cost: a run-tests.sh that
prints no summary when the agent's work does not build leaves that trial unscored too
(docs/reference/task-format.md)."""

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
  rm -f /logs/verifier/reward.json
  echo "NO_VERDICT so there is no verdict" >&2
  exit 3
fi
"""
"""What every parser's verifier does: run run-tests.sh, show its output, and let an awk program
read it into reward.json; a program that exits non-zero found no verdict."""


def _verifier(about: str, program: str, no_verdict: str) -> str:
    return _FRAME.replace("ABOUT", about).replace("PROGRAM", program).replace("NO_VERDICT", no_verdict)


PYTEST_VERIFIER = _verifier(
    """# A Terminal-Bench 1 task's verifier: its run-tests.sh, whose output is read as TB1's pytest parser
# reads it (the "short test summary info" of pytest -rA). Reward 1 when every test passed (PASSED,
# XFAIL and SKIPPED pass; FAILED, XPASS and ERROR fail), else 0; each test's 1 or 0 is kept beside
# it. No summary in the output (pytest never ran): no reward, and the reason on stderr.""",
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
    "no pytest summary in run-tests.sh's output: the tests did not run,",
)

SWEBENCH_VERIFIER = _verifier(
    """# A Terminal-Bench 1 task's verifier for the swebench parser: its run-tests.sh grades the patch
# with SWE-bench's harness and prints PASSED or FAILED between "SWEBench results starts here" and
# "SWEBench results ends here". Reward 1 for PASSED, 0 for FAILED; no such block: no reward.""",
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
    "no SWEBench results in run-tests.sh's output: the grading did not run,",
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
