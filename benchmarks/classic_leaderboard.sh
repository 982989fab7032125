#!/usr/bin/env bash
# Rebuild benchmarks/results/classic: reference rows, then zero-shot smollm2-135m rows with
# fewer episodes (the LLM acts at ~1-7 env-steps/s on a 2-core CPU). Finished episodes are
# skipped, so rerunning resumes; delete the output folder to start over.
set -euo pipefail
OUT=${OUT:-benchmarks/results/classic}
B="llmgym bench --seed 1000 --output $OUT"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

$B --suite classic --agents random,optimal,sb3-ppo,sb3-dqn

for agent in "llm:smollm2-135m" "llm:smollm2-135m,mode=generate"; do
  if [ "$agent" = "llm:smollm2-135m" ]; then many=200 some=20 few=2 one=1; else many=100 some=5 few=1 one=0; fi
  $B --envs Text-Blackjack-v1 --agents "$agent" --episodes $many
  $B --envs Text-FrozenLake-v1,Text-CartPole-v1 --agents "$agent" --episodes $some
  $B --envs Text-FrozenLake8x8-v1,Text-CliffWalking-v1,Text-Taxi-v4,Text-MountainCar-v0,Text-Pendulum-v1 --agents "$agent" --episodes $few
  if [ "$one" -gt 0 ]; then
    $B --envs Text-Acrobot-v1,Text-MountainCarContinuous-v0 --agents "$agent" --episodes $one
  fi
done

# One leaderboard over every recorded row.
python - "$OUT" <<'PY'
import sys
from llmgym.bench.report import write_report
from llmgym.bench.suites import SUITES
agents = ["random", "optimal", "sb3-ppo", "sb3-dqn", "llm:smollm2-135m", "llm:smollm2-135m,mode=generate"]
write_report(sys.argv[1], SUITES["classic"], agents, "bash benchmarks/classic_leaderboard.sh")
PY
