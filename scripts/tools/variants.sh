#!/usr/bin/env bash
# Interleaved timing of kernel variants on the GPU machine, in one call: `flce bench` once per
# variant per round (V1 V2 … V1 V2 …, so clock drift and neighbours hit all alike), then each
# shape's median forward and forward+backward per variant and its ratio to the first, last.
# A variant is LABEL=BINARY[:ENV=VALUE[,ENV=VALUE…]] — a bundle's flce and the environment it runs
# under (e.g. the profiling knob FLCE_SM90_MAINLOOP, src/geometry.rs):
#   bash scripts/tools/variants.sh 2 "old=old-bundle/flce" "new=gpu-bundle/flce" \
#     "skew2=gpu-bundle/flce:FLCE_SM90_MAINLOOP=skew=2"
# BENCH_ARGS: flce bench options (unset: no three-product runs; set empty: flce bench's defaults).
# SHAPES: flce bench's --shapes (names, comma-separated), or several of them separated by spaces
# ("16384,2048,128256 65536,4096,128256": flce bench takes an N,D,V shape one at a time), each
# run in turn within a variant's round.
# Logs under $OUT (or ./gpu-logs), one file per variant and round.
set -uo pipefail
rounds=${1:?rounds}; shift
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
export FLCE_CACHE_DIR=${FLCE_CACHE_DIR:-$(mktemp -d)}  # private (0700), fresh per run
labels=()
for r in $(seq 1 "$rounds"); do
  for v in "$@"; do
    label=${v%%=*}; rest=${v#*=}; bin=${rest%%:*}; envs=""
    [[ "$rest" == *:* ]] && envs=${rest#*:}
    [ "$r" = 1 ] && labels+=("$label")
    # ENV=VALUE pairs split on the commas that start a new NAME= (a value may hold commas)
    pairs=()
    [ -n "$envs" ] && mapfile -t pairs < <(python3 -c 'import re,sys; print("\n".join(p for p in re.split(r",(?=[A-Z_][A-Z0-9_]*=)", sys.argv[1]) if p))' "$envs")
    : > "$OUT/var-$label-$r.jsonl"; : > "$OUT/var-$label-$r.log"
    for shapes in ${SHAPES:-gemma2,llama3,qwen25}; do
      rm -f "$OUT/part.jsonl"
      env "${pairs[@]}" "$bin" bench --shapes "$shapes" ${BENCH_ARGS---workspace-budget-mb 0} \
        --json "$OUT/part.jsonl" >> "$OUT/var-$label-$r.log" 2>&1 \
        || { echo "bench $label round $r ($shapes) failed"; tail -n 5 "$OUT/var-$label-$r.log"; }
      [ -f "$OUT/part.jsonl" ] && cat "$OUT/part.jsonl" >> "$OUT/var-$label-$r.jsonl"
    done
  done
done
rm -f "$OUT/part.jsonl"
python3 - "$OUT" "$rounds" "${labels[@]}" <<'PY'
import json, statistics, sys
out, rounds, labels = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
rows, plans = {}, {}
for label in labels:
    for r in range(1, rounds + 1):
        try:
            lines = open(f"{out}/var-{label}-{r}.jsonl").read().split("\n")
        except OSError:
            continue
        for line in filter(None, lines):
            j = json.loads(line)
            # the three-product pass's time, where BENCH_ARGS asked for one (nan: none)
            rows.setdefault(j["shape"], {}).setdefault(label, []).append(
                (j["fwd_ms"], j["fb_ms"], j["cublas_ms"], j.get("forward_backward_ms", float("nan"))))
            # the trading plan's token chunk (the vocabulary-slice pass: "head" and its rows) and
            # workspace (the same every round)
            chunk = j.get("forward_backward_token_chunk")
            if j.get("forward_backward_kind") == "vocab_slice":
                chunk = f"head {j.get('forward_backward_head_rows')}"
            plans.setdefault(j["shape"], {})[label] = (chunk, j.get("forward_backward_ws_mb"))
# spread: (max - min) / median of the rounds, in %, of the forward and of the three-product time
# where there is one, else of fwd+bwd — a ratio to the first variant inside the spreads is no result
print("| shape | variant | fwd ms | /first | fwd+bwd ms | /first | three-product ms | /first | cuBLAS ms | runs | spread fwd / last "
      "| three-product chunk (slice: head rows), workspace MB |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for shape, by in rows.items():
    med = {l: tuple(statistics.median(x[k] for x in v) for k in range(4)) for l, v in by.items()}
    base = med.get(labels[0])
    for label in labels:
        if label not in med:
            continue
        m = med[label]
        rel = [f"{m[k] / base[k]:.3f}" if base and base[k] == base[k] else "-" for k in (0, 1, 3)]
        step = f"{m[3]:.2f}" if m[3] == m[3] else "-"
        def spread(k):
            xs = [x[k] for x in by[label]]
            return f"{100 * (max(xs) - min(xs)) / m[k]:.1f}%" if len(xs) > 1 else "-"
        spread = f"{spread(0)} / {spread(3 if m[3] == m[3] else 1)}"
        chunk, ws = plans.get(shape, {}).get(label, (None, None))
        plan = f"{chunk}, {ws:.0f}" if chunk is not None and ws is not None else "-"
        print(f"| {shape} | {label} | {m[0]:.2f} | {rel[0]} | {m[1]:.2f} | {rel[1]} | {step} | {rel[2]} | {m[2]:.2f} | "
              f"{len(by[label])} | {spread} | {plan} |")
PY
