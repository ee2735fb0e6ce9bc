"""The API fuzzed longer than CI: the schemathesis suite (tests/test_schemathesis_api.py) with more
generated requests per operation, valid and invalid, against a real server. It passes when no
request gets a 5xx and no response falls outside the OpenAPI document.

    .venv/bin/python bench/api_fuzz.py [--examples 200]
"""

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--examples", type=int, default=200, help="generated requests per operation")
    args = parser.parse_args()
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_schemathesis_api.py"],
        cwd=REPO,
        env=dict(os.environ, ENVLOOP_API_FUZZ_EXAMPLES=str(args.examples)),
        check=False,
        capture_output=True,
        text=True,
    )
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else result.stderr.strip()
    held = "held: no 5xx, no response outside the schema" if result.returncode == 0 else "NOT HELD"
    print(f"{args.examples} examples per operation: {summary} ({time.perf_counter() - start:.0f} s); {held}")
    if result.returncode != 0:
        print(result.stdout[-5000:])
        raise SystemExit(1)


if __name__ == "__main__":
    main()
