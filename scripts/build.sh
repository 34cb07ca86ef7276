#!/usr/bin/env bash
# Configures and builds Tessel (Release, warnings as errors) into build/: the
# library, the command line, the Python module, the benchmarks, the
# walkthrough and the three test executables. The test executables are
# compiled with precompiled headers and as unity builds (tessel_tests,
# tessel_layout_tests; CMakeLists.txt, TESSEL_UNITY_TESTS); every other file
# is compiled on its own, so the build checks that it includes what it uses.
# From clean on 2 cores it is CI's longest phase (tests/README.md, "CI time").
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DTESSEL_WERROR=ON >/dev/null
cmake --build build -j "$(nproc)"
