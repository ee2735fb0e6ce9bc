#!/usr/bin/env bash
# Reward = the fraction of the four required directories that exist with their .keep file.
# reward.json also carries the count as a second dimension.
app="${ENVLOOP_APP_DIR:-/app}"
logs="${ENVLOOP_LOGS_DIR:-/logs}"
mkdir -p "$logs/verifier"
found=0
for dir in src tests docs build; do
  if [ -f "$app/$dir/.keep" ]; then found=$((found + 1)); else echo "missing $dir/.keep"; fi
done
reward="$(awk -v f="$found" 'BEGIN { printf "%.2f", f / 4 }')"
printf '{"reward": %s, "directories_found": %d}\n' "$reward" "$found" > "$logs/verifier/reward.json"
