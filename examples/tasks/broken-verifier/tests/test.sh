#!/usr/bin/env bash
# This verifier depends on a checker that the environment does not provide, so it exits with an
# error before it can write a reward. envloop reports the attempt as unscored.
set -euo pipefail
report-checker --schema status "${ENVLOOP_APP_DIR:-/app}/report.json"
echo 1 > "${ENVLOOP_LOGS_DIR:-/logs}/verifier/reward.txt"
