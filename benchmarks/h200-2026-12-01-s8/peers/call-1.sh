mkdir -p /tmp/cut && cp .whl/a/cu13.part.aa /tmp/cut/ && ls -la /tmp/cut && nvidia-smi --query-gpu=name --format=csv,noheader
