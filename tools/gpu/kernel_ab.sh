#!/usr/bin/env bash
# A/B of GPU kernel versions in one call: vt_gpu_bench rows of this tree (A) against the
# same tree with some files replaced (B), alternating runs, medians and B/A per row.
#
#   tools/gpu/kernel_ab.sh --only 'MatMul M=1 N=,PagedAttention decode B=1' --alt DIR
#                          [--rounds 3] [--budget 560]
#
# DIR mirrors the repository: every file under it replaces the file at the same path
# in B (e.g. DIR/src/vt/gpu/gpu_quant_dot.cuh; `git show REV:PATH > DIR/PATH` makes one
# before the call, since the device's copy of the tree may have no .git). Both builds
# (vt_gpu_bench and the CUDA backend it loads) run at once: A in /tmp/vllm_gpu_build, the build dir of
# gpu_compare.sh, so a warm machine reuses it; B in /tmp/vllm_gpu_build_b from a copy
# of the tree in /tmp/ab_src. Rows are run A, B, A, B, ... so that clock and thermal
# drift fall on both. Output: $OUT/kernel_ab.log (all runs and the table) and
# $OUT/kernel_ab.tar.gz (the build logs and each run's rows).
set -uo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
final_out=${OUT:-/tmp/kernel_ab}
out=/tmp/kernel_ab_work  # packed into $OUT/kernel_ab.tar.gz (the device tool brings back few files)
rm -rf "$out"
mkdir -p "$out" "$final_out"
trap 'tar czf "$final_out/kernel_ab.tar.gz" -C "$out" . 2>/dev/null; cp "$out/kernel_ab.log" "$final_out/" 2>/dev/null' EXIT
only=
alt=
rounds=3
budget=560
while [ $# -gt 0 ]; do
  case $1 in
    --only) only=$2; shift 2 ;;
    --alt) alt=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    *) echo "kernel_ab.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ -n "$only" ] || { echo "kernel_ab.sh: --only TEXT is required (the vt_gpu_bench rows to compare)" >&2; exit 2; }
[ -d "$alt" ] || { echo "kernel_ab.sh: --alt '$alt' is not a folder" >&2; exit 2; }
alt=$(cd "$alt" && pwd)
started=$(date +%s)
left() { echo $(( started + budget - $(date +%s) )); }
log=$out/kernel_ab.log
exec > >(tee "$log") 2>&1

source "$repo/tools/gpu/gpu_build_env.sh"
gpu_env_setup
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader

build_a=/tmp/vllm_gpu_build
build_b=/tmp/vllm_gpu_build_b
src_b=/tmp/ab_src
rm -rf "$src_b" && mkdir -p "$src_b"
tar -C "$repo" --exclude=./.git --exclude=./build --exclude=./.gpu_carry -cf - . | tar -C "$src_b" -xf -
ln -s "$repo/.gpu_carry" "$src_b/.gpu_carry"
(cd "$alt" && find . -type f) | while read -r f; do
  [ -f "$src_b/$f" ] || { echo "kernel_ab.sh: $f is not a file of the tree" >&2; exit 2; }
  cp "$alt/$f" "$src_b/$f"
  echo "B replaces ${f#./}"
done || exit 2

configure_if_new() {  # BUILD SOURCE
  [ -f "$1/build.ninja" ] && return 0
  local saved=$repo
  repo=$2
  gpu_configure "$1" -DVT_BUILD_TESTS=OFF
  repo=$saved
}
configure_if_new "$build_a" "$repo"
configure_if_new "$build_b" "$src_b"
echo "configured ($(( $(date +%s) - started )) s)"
ninja -C "$build_a" -j"$(nproc)" vt_gpu_bench vt_cuda >"$out/build_a.log" 2>&1 &
pid_a=$!
ninja -C "$build_b" -j"$(nproc)" vt_gpu_bench vt_cuda >"$out/build_b.log" 2>&1
rc_b=$?
wait $pid_a
rc_a=$?
echo "built: A rc $rc_a, B rc $rc_b ($(( $(date +%s) - started )) s)"
[ $rc_a = 0 ] && [ $rc_b = 0 ] || { grep -h -E "error|FAILED" "$out"/build_?.log | head -30; exit 1; }

for round in $(seq 1 "$rounds"); do
  for variant in a b; do
    [ "$(left)" -gt 30 ] || { echo "out of time before round $round $variant"; break 2; }
    bin=$build_a/bin/vt_gpu_bench
    [ $variant = b ] && bin=$build_b/bin/vt_gpu_bench
    echo "--- round $round, ${variant^^}"
    timeout $(( $(left) - 10 )) "$bin" --only "$only" | tee "$out/run_${variant}_$round.log"
  done
done

# Per row: median time of each variant and B / A (below 1: B is faster).
python3 - "$out" <<'EOF'
import glob, os, re, statistics, sys
out = sys.argv[1]
rows = {}
for path in sorted(glob.glob(os.path.join(out, "run_*_*.log"))):
    variant = os.path.basename(path).split("_")[1].upper()
    for line in open(path):
        m = re.match(r"(.+?) +([0-9.]+) us +[0-9]+ GB/s", line)
        if m:
            rows.setdefault(m.group(1), {}).setdefault(variant, []).append(float(m.group(2)))
print(f"{'row':52} {'A us':>9} {'B us':>9} {'B/A':>6}")
for name, by in rows.items():
    a = statistics.median(by.get("A", [float("nan")]))
    b = statistics.median(by.get("B", [float("nan")]))
    print(f"{name:52} {a:9.1f} {b:9.1f} {b / a:6.3f}")
EOF
