#!/usr/bin/env bash
# `make test-gpu`: every GPU check in one command, sized for one 8-minute call on a lent GPU
# machine (which has PyTorch, transformers and peft, and no network). Wheels it lacks travel in
# .whl/ (see docs/training.md, "On a GPU"); the embedded model's weights do not travel, so the
# throughput runs on a random-init model of its architecture (config and tokenizer in
# .gpu/smollm2-135m). On a machine without CUDA the gpu-marked tests skip and it stops there.
# Writes benchmarks/results/gpu/{pytest.txt,train_score.txt,train_generate.txt,train_throughput.json}
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
  timeout 90 "$PY" -m llmgym train Text-Blackjack-v1 --model tiny --mode "$mode" \
    --device cuda --dtype bfloat16 --steps 200 --episodes-per-update 16 --num-envs 16 \
    --eval-episodes 20 --final-eval-episodes 50 --set action_head=false --no-progress \
    --output "/tmp/llmgym-gpu-$mode" 2>&1 | tail -n 5 | tee "$RESULTS/train_$mode.txt"
done
if [ -f .gpu/smollm2-135m/config.json ]; then
  # Random-init weights of the embedded model's architecture, and issue 51's 0.5B config (a
  # Qwen2 of hidden 896, 24 layers, 14/2 heads, intermediate 4864, the embedded tokenizer).
  "$PY" - <<'PY'
import shutil
from transformers import AutoConfig, AutoModelForCausalLM, Qwen2Config
config = AutoConfig.from_pretrained(".gpu/smollm2-135m")
qwen = Qwen2Config(
    hidden_size=896, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
    intermediate_size=4864, vocab_size=config.vocab_size, tie_word_embeddings=True,
    bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id,
    max_position_embeddings=config.max_position_embeddings,
)
for out, arch in (("/tmp/smollm2-random", config), ("/tmp/qwen05-random", qwen)):
    AutoModelForCausalLM.from_config(arch).save_pretrained(out)
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(f".gpu/smollm2-135m/{name}", out)
PY
  # Issue 51 item 4's config, spelled out (benchmarks/train_throughput.py), on this tree.
  tt=(benchmarks/train_throughput.py --commits here --device cuda --dtype bfloat16 --threads 8
      --iterations 3 --output "$RESULTS/train_throughput.json" --workdir /tmp/llmgym-gpu-tt)
  timeout 200 "$PY" "${tt[@]}" --models /tmp/smollm2-random --modes score generate 2>&1 | tail -n 12
  timeout 120 "$PY" "${tt[@]}" --models /tmp/qwen05-random --modes score --append 2>&1 | tail -n 12
fi
set -e
if [ -n "${OUT:-}" ]; then cp "$RESULTS"/* "$OUT"/ 2>/dev/null || true; fi
exit "$status"
