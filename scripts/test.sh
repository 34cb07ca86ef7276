#!/usr/bin/env bash
# The README's test command and CI's (.ci/run). Phases, each ending with a
# one-line summary, its wall time and its CPU time (user+sys of everything it
# ran: a quiet 2-core machine takes about half of it for the parallel parts);
# the first failure ends the run:
#   deps      scripts/install-deps.sh (plus Chromium for the browser test)
#   format    scripts/check-format.sh: every C++ file clang-formatted; and
#             scripts/size-report.sh: lines per folder and long functions
#             within scripts/size_limits.txt
#   release   scripts/build.sh (Release, -Werror) into build/, the whole CTest suite
#             (on a quiet 2-core machine from clean: the build about 10 min,
#             most of it the library's 111 files; ctest about 5 min)
#   sanitize  build-asan/ (AddressSanitizer + UndefinedBehaviorSanitizer, a
#             unity build, -Werror), the fast tier plus the tests labelled
#             `asan` (the checkpoint readers' mutation fuzz test, a
#             data=2,model=2 layout case and a pipeline under mpirun), less
#             the four planner searches labelled `noasan`. On by
#             default; TESSEL_SANITIZE_TESTS=0 skips it (a local run only: CI
#             runs it). The build about 8 min, the tests about 4.5 min.
#             What it runs and skips, and its measured cost: tests/README.md.
# What each phase costs, measured on a fresh clone:
# tests/README.md, "CI time".
# scripts/test.sh --fast: build/ and the fast tier only (ctest -L fast), for
# the edit-compile-test loop. scripts/test.sh --sanitize: the sanitizer phase
# only. Other arguments go to the release phase's ctest (e.g.
# scripts/test.sh -R Training). Tiers, labels and the sanitizer phase:
# tests/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."

fast=0
sanitize_only=0
case "${1:-}" in
  --fast) fast=1 && shift ;;
  --sanitize) sanitize_only=1 && shift ;;
esac
jobs=$(nproc)

summary=()
phase=""
t0=$SECONDS
cpu0=0
cpu_now=0
times_file=$(mktemp)
trap 'rm -f "$times_file"' EXIT
# cpu_now: CPU seconds (user+sys) of the processes this shell has waited for
# so far (bash's `times`; in this shell, not a $(...) subshell).
children_cpu() {
  times >"$times_file"
  local u s
  read -r u s < <(tail -1 "$times_file")
  cpu_now=$(awk -v u="$u" -v s="$s" 'function sec(t) { split(t, a, "m"); return a[1] * 60 + a[2] }
    BEGIN { printf "%d", sec(u) + sec(s) }')
}
begin() {
  phase=$1
  t0=$SECONDS
  children_cpu
  cpu0=$cpu_now
  echo "== test.sh: $phase ..."
}
end() {
  children_cpu
  summary+=("$phase: passed in $((SECONDS - t0)) s ($((cpu_now - cpu0)) CPU s)")
  echo "== test.sh: ${summary[-1]}"
}
trap 'echo "== test.sh: $phase: FAILED after $((SECONDS - t0)) s"' ERR

if [ "$fast" = 1 ]; then
  begin "release build"
  scripts/install-deps.sh >/dev/null
  scripts/build.sh
  end
  begin "fast tier (ctest -L fast)"
  (cd build && ctest --output-on-failure -j 2 -L fast "$@")
  end
  printf '== test.sh: %s\n' "${summary[@]}"
  exit 0
fi

if [ "$sanitize_only" = 1 ]; then
  scripts/install-deps.sh >/dev/null
else
  begin "dependencies"
  # Chromium (and a font for its text) only for the test path: the browser test
  # of `tessel report` loads a real report; it is skipped where Chromium is absent.
  scripts/install-deps.sh chromium fonts-liberation
  end

  begin "format check and size limits"
  scripts/check-format.sh
  scripts/size-report.sh
  end

  begin "release build"
  scripts/build.sh
  end
  begin "full ctest"
  (cd build && ctest --output-on-failure -j 2 "$@")
  end
fi

if [ "${TESSEL_SANITIZE_TESTS:-1}" = 0 ]; then
  printf '== test.sh: %s\n' "${summary[@]}" "sanitizer phase: skipped (TESSEL_SANITIZE_TESTS=0)"
  exit 0
fi

begin "sanitizer build (build-asan)"
# -O1 keeps the sanitized tests quick (the test drivers and the folders that
# run little get -O0, CMakeLists.txt); -g1 (line tables: file:line in reports)
# compiles about a third faster than -g; -march=native compiles the same
# AVX2/FMA paths as the Release build. A unity build (CMake's batches of 8
# files per compile) parses the headers once per batch. Only the targets its
# tests need.
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1 -march=native" \
  -DTESSEL_SANITIZE=ON -DTESSEL_WERROR=ON -DCMAKE_UNITY_BUILD=ON >/dev/null
cmake --build build-asan -j "$jobs" --target tessel_tests tessel_cli tessel_layout_tests \
  tessel_mpi_tests tessel_walkthrough
end
begin "sanitizer tests (ctest -L 'fast|asan' -LE noasan)"
(
  cd build-asan
  # LeakSanitizer stays on in every process, under mpirun too.
  # tests/lsan-mpi.supp suppresses a leak report when a frame of the
  # allocation's stack is in Open MPI's libraries: Open MPI keeps MPI_Init's
  # allocations (its components', its run-time layer's) until exit. Open MPI
  # is built without frame pointers, so the default frame-pointer unwinder
  # records only the frame just above malloc, often in a component unloaded
  # by exit ("<unknown module>"), which no suppression can name. Processes
  # that mpirun launches therefore unwind with the slow unwinder
  # (fast_unwind_on_malloc=0): whole stacks, which reach libmpi and
  # libopen-rte. mpirun sets it in their environment only
  # (mca_base_env_list), as it costs about 2.5x the CPU of a process that
  # allocates much; processes outside mpirun never initialise MPI.
  supp="$PWD/../tests/lsan-mpi.supp"
  export LSAN_OPTIONS="suppressions=$supp:print_suppressions=0"
  export OMPI_MCA_mca_base_env_list="LSAN_OPTIONS=$LSAN_OPTIONS:fast_unwind_on_malloc=0"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  ctest --output-on-failure -j 2 -L 'fast|asan' -LE noasan
)
end

printf '== test.sh: %s\n' "${summary[@]}"
