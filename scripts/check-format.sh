#!/usr/bin/env bash
# Checks that every C++ (and CUDA: .cu, .cuh) file under src/ apps/ tests/ bench/ examples/ python/
# is formatted by clang-format (the repository's .clang-format); lists the
# files that are not and exits 1. `scripts/check-format.sh --fix` formats them.
# Only files git tracks (or would track: new, not ignored) are checked, so
# build directories never count.
set -euo pipefail
cd "$(dirname "$0")/.."
fix=0
[ "${1:-}" = "--fix" ] && fix=1
command -v clang-format >/dev/null || {
  echo "check-format: clang-format not found (Debian package clang-format)" >&2
  exit 1
}
mapfile -t files < <(git ls-files --cached --others --exclude-standard -- \
  src apps tests bench examples python | grep -E '\.(cc|h|cpp|hpp|cu|cuh)$' || true)
# Deleted-but-tracked files are listed by ls-files; skip them.
present=()
for f in "${files[@]}"; do [ -f "$f" ] && present+=("$f"); done
if [ "$fix" = 1 ]; then
  clang-format -i "${present[@]}"
  echo "check-format: formatted ${#present[@]} files"
  exit 0
fi
# One clang-format run; it reports "FILE:LINE:COL: error: code should be
# clang-formatted" per difference: keep the file names.
mapfile -t bad < <(clang-format --dry-run -Werror "${present[@]}" 2>&1 |
  sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' | sort -u)
if [ ${#bad[@]} -ne 0 ]; then
  echo "check-format: ${#bad[@]} of ${#present[@]} files are not clang-formatted:" >&2
  printf '  %s\n' "${bad[@]}" >&2
  echo "check-format: run scripts/check-format.sh --fix (clang-format $(clang-format --version | grep -o '[0-9][0-9.]*' | head -1))" >&2
  exit 1
fi
echo "check-format: ${#present[@]} files clang-formatted"
