#!/usr/bin/env bash
# Installs the Debian packages Tessel needs, skipping those already present.
# Run as root (or with sudo available). Extra package names may be passed as
# arguments (the benchmark script adds PyTorch this way).
set -euo pipefail

packages=(
  g++ cmake make                      # toolchain
  libdnnl-dev                         # oneDNN: GEMM
  libopenmpi-dev openmpi-bin          # Open MPI: the distributed runtime
  nlohmann-json3-dev                  # configs, manifests, safetensors headers
  libjs-chart.js                      # Chart.js, inlined into `tessel report` pages
  libcli11-dev                        # the tessel command line
  libgtest-dev libbenchmark-dev       # tests and kernel micro-benchmarks
  clang-format                        # scripts/check-format.sh (the format check in scripts/test.sh)
  universal-ctags                     # scripts/size-report.sh: function extents for the size limits
  zlib1g-dev                          # reading the gzipped Fashion-MNIST files
  libsentencepiece-dev pkg-config     # BPE/unigram tokenizers (tessel tokenize), found via pkg-config
  fortunes fortunes-min               # the text the GPT trains on
  dataset-fashion-mnist               # the images the MLP trains on
  pybind11-dev python3-pybind11 python3-dev  # the Python module (python/)
  python3-numpy python3-pytest        # its arrays and its tests (tests/python)
  "$@"
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
