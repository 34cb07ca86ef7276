#!/usr/bin/env bash
# The main job: install what is missing, build, train a GPT on the fortunes
# text, and print a sample. Extra arguments go to `tessel train`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
build/tessel train --config examples/gpt-fortunes.json --out runs/gpt-fortunes "$@"
