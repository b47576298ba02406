#!/usr/bin/env bash
# s43 call 4: dE from q formed in registers with the consumers taking turns to issue
# (FLCE_SM90_QFORM=regs, product_q.cu sm90_consume_q_regs): GPU cases (de-q = own-de bitwise) and
# memcheck under it; FLCE_STEP_PRODUCTS own-de / de-q (smem) / de-q (regs) interleaved (2 rounds);
# one profiled three-product step per shape with the regs form
set -uo pipefail
cp "$0" "$OUT/call.sh"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
FLCE_SM90_QFORM=regs FLCE_GPU_TEST_MODES=FusedTiles timeout 110 ./gpu-bundle/gpu-tests --small "bf16 plain (257,520,300)" \
  "bf16 nosoftcap (257,520,300)" "(1,64,1000)" "bf16 plain (129,200,5003)" de-chunks "bf16 plain (1024,64,8000)" \
  "bf16 zloss (257,520,300)" "f16 nosoftcap (257,520,300)" > "$OUT/tests.log" 2>&1
echo "tests rc=$? ${SECONDS}s ok=$(grep -c '^test .* ok ' $OUT/tests.log) of $(grep -c '^test ' $OUT/tests.log) de-q=$(grep -o 'de-q [0-9]* chunk(s) = own-de bitwise' $OUT/tests.log | wc -l)"
grep -E "FAILED|panicked" "$OUT/tests.log" | cut -c1-300 | head -5
FLCE_SM90_QFORM=regs FLCE_GPU_TEST_MODES=FusedTiles timeout 45 compute-sanitizer --tool memcheck ./gpu-bundle/gpu-tests --small \
  "bf16 plain (129,200,5003)" > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$? ${SECONDS}s $(grep -E 'ERROR SUMMARY|^gpu:' $OUT/memcheck.log | tr '\n' ' ')"
OUT="$OUT/ab" BENCH_ARGS="--step-budget-mb 8192" timeout 150 bash scripts/gpu-variants.sh 2 \
  "own=gpu-bundle/flce:FLCE_STEP_PRODUCTS=own-de" "deq=gpu-bundle/flce:FLCE_STEP_PRODUCTS=de-q" \
  "deqregs=gpu-bundle/flce:FLCE_STEP_PRODUCTS=de-q,FLCE_SM90_QFORM=regs" > "$OUT/ab.txt" 2>&1
echo "ab rc=$? ${SECONDS}s"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site gpu-bundle/wheels/flce-*.whl
for s in llama3 gemma2; do
  FLCE_STEP_PRODUCTS=de-q FLCE_SM90_QFORM=regs PYTHONPATH=/tmp/site timeout 40 python3 scripts/profile_kernels.py --shape $s \
    --top 8 --configs "auto/auto/8589934592" > $OUT/profile-$s-de-q-regs.log 2>&1
  echo "regs $s rc=$? ${SECONDS}s"
  grep -E "^\| (flce_sm90_product|flce_grad_from_compact|nvjet|flce_sm90_forward_compact)" $OUT/profile-$s-de-q-regs.log | cut -c1-110 | head -4
done
(cd "$OUT" && tar czf logs.tgz ab profile-*.log && rm -rf ab profile-*.log)
tail -n 11 "$OUT/ab.txt"
