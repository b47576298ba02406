set -uo pipefail
export FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
mkdir -p /tmp/ncu5
echo "== ncu G llama3 $(date -u +%T)"
OUT=/tmp/ncu5 SHAPE=llama3 KERNEL=grad SOURCE=1 T_NCU=150 bash scripts/ncu-sm90.sh > $OUT/ncu-summary.txt 2>&1
echo "== ncu G report $(date -u +%T)"
timeout 150 ncu --clock-control none -k regex:flce_sm90_grad -c 1 --section SourceCounters --section WarpStateStats \
  -o /tmp/ncu5/grad-llama3 gpu-bundle/flce bench --shapes llama3 --forward auto --backward auto --step-budget-mb 0 > /tmp/ncu5/report.log 2>&1
for p in "--print-source sass" "--print-source cuda,sass" ""; do
  timeout 60 ncu -i /tmp/ncu5/grad-llama3.ncu-rep --page source --csv $p > /tmp/ncu5/grad-source.csv 2>/tmp/ncu5/source.err && [ -s /tmp/ncu5/grad-source.csv ] && break
done
ls -la /tmp/ncu5 > $OUT/files.txt
tar czf $OUT/ncu-grad.tgz -C /tmp ncu5
echo "== done $(date -u +%T)"
cat $OUT/ncu-summary.txt | head -40
head -c 600 /tmp/ncu5/grad-source.csv; echo; cat /tmp/ncu5/source.err | head -5
