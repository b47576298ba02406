#!/usr/bin/env bash
# Per-launch DRAM bytes, L2 hit rate, SM clock, cycles and time of one flce kernel under ncu
# (`--clock-control none`), for each variant of the environment, in one device call: what told the
# forward's DRAM bytes and clock from its cycles in docs/journal.md v49 (ncu's sections cost minutes a
# kernel; five metrics cost seconds). Run on the GPU machine from the repository root with
# gpu-bundle/ built by scripts/gpu/prepare.sh:
#   OUT=$OUT KERNEL=flce_sm90_forward SHAPES="llama3 gemma2" COUNT=2 bash scripts/tools/ncu-launch-metrics.sh \
#     base= "l2b3=FLCE_SM90_MAINLOOP=l2b=3" "band16=FLCE_SM90_FORWARD_BAND=16"
# A variant is LABEL=ENV=VALUE (several: LABEL=ENV=VALUE,ENV=VALUE; nothing after the first `=`:
# the default). KERNEL: a regex of kernel names (default flce_sm90_forward); COUNT: launches
# profiled a run (default 2); SHAPES: `flce bench` shapes, one run each; BENCH_ARGS: more `flce
# bench` options (default `--iters 1 --workspace-budget-mb 0`); BIN: the flce binary (default
# gpu-bundle/flce; e.g. an older build carried beside it, to compare builds). Writes
# $OUT/ncu-LABEL-SHAPE.csv and prints one table (scripts/tools/ncu_launch_table.py).
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
export FLCE_CACHE_DIR=${FLCE_CACHE_DIR:-$(mktemp -d)}
M=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__cycles_elapsed.max,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct
files=()
for v in "${@:-base=}"; do
  label=${v%%=*}; envs=${v#*=}
  pairs=()
  [ -n "$envs" ] && mapfile -t pairs < <(python3 -c 'import re,sys; print("\n".join(p for p in re.split(r",(?=[A-Z_][A-Z0-9_]*=)", sys.argv[1]) if p))' "$envs")
  for s in ${SHAPES:-llama3}; do
    f="$OUT/ncu-$label-${s//,/x}.csv"
    env "${pairs[@]}" timeout "${T_NCU:-90}" ncu --clock-control none -k "regex:${KERNEL:-flce_sm90_forward}" \
      -c "${COUNT:-2}" --metrics "$M" --csv "${BIN:-gpu-bundle/flce}" bench --shapes "$s" ${BENCH_ARGS:---iters 1 --workspace-budget-mb 0} \
      > "$f" 2>&1
    echo "$label $s: rc=$? at ${SECONDS}s"
    files+=("$f")
  done
done
python3 scripts/tools/ncu_launch_table.py "${files[@]}"
