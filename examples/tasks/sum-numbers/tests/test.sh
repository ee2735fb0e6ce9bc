#!/usr/bin/env bash
# Reward 1 when /app/sum.txt holds the sum of the original numbers (1200), else 0.
app="${ENVLOOP_APP_DIR:-/app}"
logs="${ENVLOOP_LOGS_DIR:-/logs}"
mkdir -p "$logs/verifier"
got="$(tr -d '[:space:]' < "$app/sum.txt" 2>/dev/null)"
if [ "$got" = "1200" ]; then
  echo 1 > "$logs/verifier/reward.txt"
else
  echo "expected 1200, got '${got}'"
  echo 0 > "$logs/verifier/reward.txt"
fi
