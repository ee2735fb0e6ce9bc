#!/usr/bin/env bash
# The reference solution forgets `build`: the oracle earns 0.75 on this task.
set -euo pipefail
cd "${ENVLOOP_APP_DIR:-/app}"
for dir in src tests docs; do mkdir -p "$dir" && touch "$dir/.keep"; done
