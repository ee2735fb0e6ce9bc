#!/usr/bin/env bash
# Reward 1 when count_words.sh prints the word count for two sample files, else 0.
app="${ENVLOOP_APP_DIR:-/app}"
logs="${ENVLOOP_LOGS_DIR:-/logs}"
mkdir -p "$logs/verifier"
sample="$(mktemp)"
printf 'one two three\nfour five\n' > "$sample"
first="$(bash "$app/count_words.sh" "$sample" 2>/dev/null | tr -d '[:space:]')"
printf 'a\n\n  b   c  \n' > "$sample"
second="$(bash "$app/count_words.sh" "$sample" 2>/dev/null | tr -d '[:space:]')"
rm -f "$sample"
echo "first=$first second=$second"
if [ "$first" = "5" ] && [ "$second" = "3" ]; then
  echo 1 > "$logs/verifier/reward.txt"
else
  echo 0 > "$logs/verifier/reward.txt"
fi
