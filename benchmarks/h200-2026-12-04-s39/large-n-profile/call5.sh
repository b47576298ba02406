PYTHONPATH=/tmp/site python3 scripts/profile_kernels.py --shape llama3_n65536 --steps 1 --top 8 --launches --configs auto/auto/min
