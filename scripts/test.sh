#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite (CTest).
set -euo pipefail
cd "$(dirname "$0")/.."
# Chromium (and a font for its text) only for the test path: the browser test
# of `tessel report` loads a real report; it is skipped where Chromium is absent.
scripts/install-deps.sh chromium fonts-liberation
scripts/build.sh
cd build
ctest --output-on-failure -j 2 "$@"
