#!/usr/bin/env bash
# Generates docs/images/report-gpt-fortunes.png, docs/usage.md's picture of
# `tessel report`: the main job (examples/gpt-fortunes.json on 4 ranks,
# data=2 x model=2, as scripts/demo.sh runs it) against the same job on one
# process. Both runs are real (about 6 minutes on 2 cores); the page is drawn
# by headless Chromium. Run it under the benchmark lock on a shared machine:
#   flock /tmp/tessel-bench.lock scripts/report_screenshot.sh
# Extra arguments go to both `tessel train` runs (e.g. --steps 50 for a quick look).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh chromium fonts-liberation
scripts/build.sh
export OMPI_MCA_btl=self,vader OMPI_MCA_mpi_yield_when_idle=1
out=runs/report-screenshot
rm -rf "$out"
mkdir -p "$out" docs/images
mpirun --allow-run-as-root --oversubscribe -n 4 \
  build/tessel train --config examples/gpt-fortunes.json --mesh data=2,model=2 --threads 1 \
  --out "$out/4-ranks-data2-model2" "$@"
build/tessel train --config examples/gpt-fortunes.json --threads 2 --out "$out/1-process" "$@"
build/tessel report "$out/4-ranks-data2-model2" "$out/1-process" --out "$out/report.html"
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
  --user-data-dir="$out/chromium-profile" --window-size=1280,1700 \
  --screenshot="$PWD/docs/images/report-gpt-fortunes.png" "file://$PWD/$out/report.html"
echo "wrote docs/images/report-gpt-fortunes.png from $out/report.html"
