#!/usr/bin/env bash
# `make test-gpu`: every GPU check in one command, sized for one 8-minute call on a lent GPU
# machine (which has PyTorch, transformers and peft, and no network). Wheels it lacks travel in
# .whl/ (see docs/training.md, "On a GPU"); the embedded model's weights do not travel, so the
# throughput runs on a random-init model of its architecture (config and tokenizer in
# .gpu/smollm2-135m). On a machine without CUDA the gpu-marked tests skip and it stops there.
# Writes benchmarks/results/gpu/{pytest.txt,train_score.txt,train_generate.txt,throughput.json}
# (and copies them to $OUT when that is set).
#   bash benchmarks/gpu_check.sh          # PY=python3 by default; make test-gpu passes .venv's
set -euo pipefail
case "${1:-}" in
  -h|--help)
    echo "usage: [PY=python3] bash benchmarks/gpu_check.sh   (make test-gpu)"
    sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
    exit 0 ;;
esac
cd "$(dirname "$0")/.."
PY=${PY:-python3}
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/llmgym-site .whl/*.whl
  export PYTHONPATH=/tmp/llmgym-site:$PWD${PYTHONPATH:+:$PYTHONPATH}
else
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
RESULTS=benchmarks/results/gpu
mkdir -p "$RESULTS"
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 3)"; then
  echo "No CUDA GPU here: the gpu-marked tests skip (run this on a GPU machine)."
  "$PY" -m pytest -q -p no:cacheprovider -m gpu tests/gpu
  exit 0
fi
"$PY" -c "import torch; print(torch.__version__, torch.cuda.get_device_name(0))" | tee "$RESULTS/device.txt"
set +e
"$PY" -m pytest -q -p no:cacheprovider -m gpu tests/gpu -o addopts="" 2>&1 | tee "$RESULTS/pytest.txt"
status=${PIPESTATUS[0]}
for mode in score generate; do
  timeout 120 "$PY" -m llmgym train Text-Blackjack-v1 --model tiny --mode "$mode" \
    --device cuda --dtype bfloat16 --steps 200 --episodes-per-update 16 --num-envs 16 \
    --eval-episodes 20 --final-eval-episodes 50 --set action_head=false --no-progress \
    --output "/tmp/llmgym-gpu-$mode" 2>&1 | tail -n 5 | tee "$RESULTS/train_$mode.txt"
done
if [ -f .gpu/smollm2-135m/config.json ]; then
  "$PY" - <<'PY'
import shutil
from transformers import AutoConfig, AutoModelForCausalLM
config = AutoConfig.from_pretrained(".gpu/smollm2-135m")
AutoModelForCausalLM.from_config(config).save_pretrained("/tmp/smollm2-random")
for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
    shutil.copy(f".gpu/smollm2-135m/{name}", "/tmp/smollm2-random")
PY
  timeout 240 "$PY" benchmarks/train_throughput_configs.py --model /tmp/smollm2-random --threads 8 --device cuda \
    --iterations 2 --envs Text-Blackjack-v1 --output "$RESULTS/throughput.json" \
    --workdir /tmp/llmgym-gpu-throughput 2>&1 | tail -n 20
fi
set -e
if [ -n "${OUT:-}" ]; then cp "$RESULTS"/* "$OUT"/ 2>/dev/null || true; fi
exit "$status"
