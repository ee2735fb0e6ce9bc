#!/usr/bin/env bash
set -euo pipefail
cd "${ENVLOOP_APP_DIR:-/app}"
awk '{ s += $1 } END { print s }' numbers.txt > sum.txt
