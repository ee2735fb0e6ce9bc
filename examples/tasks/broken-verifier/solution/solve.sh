#!/usr/bin/env bash
set -euo pipefail
printf '{"status": "ok"}\n' > "${ENVLOOP_APP_DIR:-/app}/report.json"
