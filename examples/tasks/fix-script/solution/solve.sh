#!/usr/bin/env bash
set -euo pipefail
cd "${ENVLOOP_APP_DIR:-/app}"
sed -i 's/wc -l/wc -w/' count_words.sh
