#!/usr/bin/env bash
set -euo pipefail
cd "${ENVLOOP_APP_DIR:-/app}"
printf 'Hello, world!\n' > hello.txt
