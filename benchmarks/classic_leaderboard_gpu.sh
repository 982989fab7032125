#!/usr/bin/env bash
# The SmolLM2 cells of benchmarks/classic_leaderboard.sh, each in its own process, all at once on
# one GPU, in float32 (the CPU rows' dtype). The processes append to the same episodes.jsonl
# (under a lock; recorded episodes are skipped, so reruns resume), then the leaderboard is
# rebuilt from the records as classic_leaderboard.sh does.
#
#   LIMIT=430 bash benchmarks/classic_leaderboard_gpu.sh      # cut each cell after LIMIT s
#
# On one H200 (16 cores), 2026-11-26, LIMIT=430 (the RL CartPole policy was then
# cartpole-ppo-critic-s0): every cell finished except MountainCarContinuous in generate mode (no
# batch of its 999-step episodes done); docs/baselines.md has the details.
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
  echo "usage: [OUT=DIR] [LIMIT=SECONDS] bash benchmarks/classic_leaderboard_gpu.sh"
  sed -n '2,/^set /s/^# \{0,1\}//p' "$0"  # the header above
  exit 0
fi
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-benchmarks/results/classic}
LIMIT=${LIMIT:-0}  # 0: no limit
export LLMGYM_DTYPE=float32 OMP_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false
LOGS=runs/leaderboard-gpu; mkdir -p "$LOGS"  # one log per cell
cell() {  # cell ENV AGENT EPISODES BATCH
  local log
  log="$LOGS/$1-$(echo "$2" | tr -c 'a-zA-Z0-9.\n' '_').log"
  timeout "$LIMIT" llmgym bench --seed 1000 --output "$OUT" --envs "$1" --agents "$2" \
    --episodes "$3" --batch-size "$4" > "$log" 2>&1 &
}
source benchmarks/leaderboard_agents.sh
cell Text-CartPole-v1 "$ZS" 500 32
cell Text-CartPole-v1 "$CARTPOLE" 30 10
for env in ${LONG_DISCRETE//,/ }; do cell "$env" "$ZS" 30 30; done
for env in ${LONG_ENVS//,/ }; do cell "$env" "$GEN" 30 10; done
wait
if [ "$OUT" = benchmarks/results/classic ]; then README=; else README=--no-readme; fi
python benchmarks/leaderboard_readme.py --output "$OUT" $README
