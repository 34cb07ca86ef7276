#!/usr/bin/env bash
# The code's size, against the limits in scripts/size_limits.txt: lines per
# folder of src/, apps/ and python/ (C++ and CUDA), their total against its
# budget, and every function over 120 lines (universal-ctags finds their
# extents) against its allowance. Exits non-zero past any limit, naming it.
# Run by scripts/test.sh; alone: scripts/size-report.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
limits=scripts/size_limits.txt
max_function=120

files=$(git ls-files 'src/*' 'apps/*' 'python/*' | grep -E '\.(h|cc|cu|cuh)$')
echo "size-report: lines per folder"
for f in $files; do printf '%s %s\n' "$(dirname "$f" | cut -d/ -f1-3)" "$(wc -l <"$f")"; done |
  awk '{ n[$1] += $2; t += $2 } END { for (d in n) printf "  %7d  %s\n", n[d], d; printf "  %7d  total\n", t }' |
  sort -k2 | sort -rn -s -k1,1 >/tmp/size-report.$$
cat /tmp/size-report.$$
total=$(awk '$2 == "total" { print $1 }' /tmp/size-report.$$)
rm -f /tmp/size-report.$$
budget=$(awk '$1 == "total" { print $2 }' "$limits")
failed=0
if [ "$total" -gt "$budget" ]; then
  echo "size-report: FAILED: $total lines, over the budget of $budget ($limits)"
  failed=1
fi

echo "size-report: functions over $max_function lines"
long=$(for f in $files; do ctags --fields=+ne --c++-kinds=f --language-force=C++ -f - "$f" 2>/dev/null; done |
  awk -F'\t' -v max="$max_function" '{ l = ""; e = ""
      for (i = 4; i <= NF; i++) { if ($i ~ /^line:/) l = substr($i, 6); if ($i ~ /^end:/) e = substr($i, 5) }
      if (l != "" && e != "" && e - l + 1 > max) print $2, $1, e - l + 1 }' | sort -u)
while read -r file name lines; do
  [ -n "$file" ] || continue
  allowed=$(awk -v f="$file" -v n="$name" '$1 == "function" && $2 == f && $3 == n { print $4 }' "$limits")
  if [ -z "$allowed" ]; then
    echo "  $lines  $file $name: FAILED (over $max_function lines; split it into named steps)"
    failed=1
  elif [ "$lines" -gt "$allowed" ]; then
    echo "  $lines  $file $name: FAILED (grew past its allowance of $allowed in $limits)"
    failed=1
  else
    echo "  $lines  $file $name (allowed $allowed until it is split)"
  fi
done <<<"$long"
[ "$failed" = 0 ] && echo "size-report: within the limits of $limits"
exit "$failed"
