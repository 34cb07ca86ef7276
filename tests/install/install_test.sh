#!/bin/bash
# The installed package, used the way a user's project uses it:
#   install_test.sh BUILD_DIR SOURCE_DIR MPIEXEC
# installs BUILD_DIR into a temporary prefix (cmake --install), configures and
# builds examples/cpp-custom-model out of tree against it (find_package(Tessel)),
# checks that its own model "mixer" goes through dry run, inspect and plan, trains it
# for a few steps on 1 rank and on 4 ranks (mpirun, data=2,model=2, both MLPs
# split over `model`), and compares the losses of every step in metrics.jsonl:
# relative 1e-5, the layout-invariance tolerance. Exits 0 when all holds.
set -u
build=$1 src=$2 mpiexec=$3
dir=$(mktemp -d /tmp/tessel_install_XXXXXX)
trap 'rm -rf "$dir"' EXIT
example=$src/examples/cpp-custom-model
config=$example/mixer.json
layout=batch=data,hidden=model,token_hidden=model
steps=6
fail() { echo "FAIL: $*"; [ -f "$dir/log" ] && tail -n 40 "$dir/log"; exit 1; }
step() { echo "== $*"; "$@" >"$dir/log" 2>&1 || fail "$* (exit $?)"; }

step cmake --install "$build" --prefix "$dir/prefix"
for f in include/tessel/tessel.h include/tessel/run_cli.h include/tessel/ir/builder.h \
  lib/libtessel.a lib/libtessel_cli.a lib/cmake/Tessel/TesselConfig.cmake \
  lib/cmake/Tessel/TesselConfigVersion.cmake lib/cmake/Tessel/TesselTargets.cmake bin/tessel; do
  [ -e "$dir/prefix/$f" ] || fail "the install lacks $f"
done

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
step cmake -S "$example" -B "$dir/example" -DCMAKE_PREFIX_PATH="$dir/prefix" "${launcher[@]}"
step cmake --build "$dir/example" -j 2
exe=$dir/example/mixer-trainer

# The custom model through the offline paths: dry run (memory per rank) and inspect.
step "$exe" train --config "$config" --dry-run --mesh data=2,model=2 --layout "$layout"
grep -Eq "^ +3 +[0-9.]+ MiB" "$dir/log" || fail "the dry run printed no rank 3"
step "$exe" inspect --config "$config" --mesh data=2,model=2 --layout "$layout" --rank 1
grep -q "block1.channel_mix.w1 .*S(hidden)" "$dir/log" ||
  fail "inspect does not show the mixer's channel MLP split over hidden"
grep -q "block1.token_mix.w1 .*S(token_hidden)" "$dir/log" ||
  fail "inspect does not show the mixer's token MLP split over token_hidden"

step "$exe" plan --config "$config" --ranks 4 --cluster "$src/examples/clusters/dgx-h100-32.json" --top 1
grep -q "configurations" "$dir/log" || fail "plan printed no candidates for the mixer"

run=(train --config "$config" --steps $steps --set eval_every=0 --threads 1)
step "$exe" "${run[@]}" --out "$dir/one"
step "$mpiexec" --allow-run-as-root --oversubscribe -n 4 "$exe" "${run[@]}" \
  --mesh data=2,model=2 --layout "$layout" --out "$dir/four"
grep -q '"model"' "$dir/four/metrics.jsonl" || fail "no collectives on the model axis"

losses() { grep -o '"loss":[^,}]*' "$1/metrics.jsonl" | cut -d: -f2; }
paste <(losses "$dir/one") <(losses "$dir/four") | awk -v steps=$steps '
  { n++; d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1);
    printf "step %d: 1 rank %.9f, 4 ranks %.9f, rel %.2e\n", n - 1, $1, $2, r;
    if (!(r <= 1e-5)) bad = 1 }
  END { if (n != steps) { print "expected " steps " steps, got " n; exit 1 } exit bad }' ||
  fail "the 4-rank losses differ from 1 rank by more than 1e-5"
echo "PASS: installed package builds the example; mixer trains on 1 and 4 ranks to the same losses"
