#!/usr/bin/env bash
# One call of the lent GPU machine: a 20-step smoke run of train.py (every stage, tiny
# batch), then the real training, packed into $OUT/demo.tar.gz (split into 15 MB parts
# demo.tar.gz.part-aa, -ab, ... when larger: the device returns files of at most 16 MiB)
# and the log in $OUT/train.log. Input: .demo_data/ from prepare_corpus.py (carried).
#   device tool: run command="bash tools/demo_model/run_on_gpu.sh" carry=[".demo_data"]
set -euo pipefail
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
OUT="${OUT:-$PWD/out/demo}"
mkdir -p "$OUT"
exec > >(tee "$OUT/train.log") 2>&1
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
python3 tools/demo_model/train.py --data .demo_data --out /tmp/demo_smoke --smoke
python3 tools/demo_model/train.py --data .demo_data --out /tmp/demo "$@"
tar -C /tmp/demo -czf /tmp/demo.tar.gz .
ls -la /tmp/demo /tmp/demo/hf /tmp/demo.tar.gz
split -b 15000000 -d -a 1 /tmp/demo.tar.gz "$OUT/demo.tar.gz.part-"
cp /tmp/demo/metrics.json /tmp/demo/samples.json /tmp/demo/loss.png "$OUT/"
