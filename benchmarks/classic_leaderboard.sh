#!/usr/bin/env bash
# Rebuild benchmarks/results/classic: reference rows, then smollm2-135m rows (zero-shot, and the
# policies RL trained from scratch) with fewer episodes (the LLM acts at ~1-7 env-steps/s on a
# 2-core CPU). Finished episodes are skipped, so rerunning resumes; delete the output folder to
# start over. The SB3 agents play the committed policies in benchmarks/results/classic/sb3/
# (bash benchmarks/train_sb3_policies.sh trains any that are missing there).
set -euo pipefail
OUT=${OUT:-benchmarks/results/classic}
B="llmgym bench --seed 1000 --output $OUT"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

SB3="env LLMGYM_CACHE=benchmarks/results/classic/sb3"
$SB3 $B --suite classic --agents random,optimal,sb3-ppo,sb3-dqn
$SB3 $B --envs Text-CartPole-v1,Text-Acrobot-v1,Text-Pendulum-v1 --agents sb3-a2c  # recipes so far

for agent in "llm:smollm2-135m" "llm:smollm2-135m,mode=generate"; do
  if [ "$agent" = "llm:smollm2-135m" ]; then many=200 some=20 few=2 one=1; else many=100 some=5 few=1 one=0; fi
  $B --envs Text-Blackjack-v1 --agents "$agent" --episodes $many
  $B --envs Text-FrozenLake-v1,Text-CartPole-v1 --agents "$agent" --episodes $some
  $B --envs Text-FrozenLake8x8-v1,Text-CliffWalking-v1,Text-Taxi-v4,Text-MountainCar-v0,Text-Pendulum-v1 --agents "$agent" --episodes $few
  if [ "$one" -gt 0 ]; then
    $B --envs Text-Acrobot-v1,Text-MountainCarContinuous-v0 --agents "$agent" --episodes $one
  fi
done

# Policies trained from scratch by benchmarks/rl_from_scratch.sh (committed weights).
BJ="llm:smollm2-135m@benchmarks/weights/rl/blackjack-ppo-s0"
LAKE="llm:smollm2-135m@benchmarks/weights/rl/frozenlake-slippery-ppo-s0"
$B --envs Text-Blackjack-v1 --agents "$BJ" --episodes 200
$B --envs Text-FrozenLake-v1 --agents "$LAKE" --episodes 20

# One leaderboard over every recorded row: leaderboard.md, the two charts and, for the committed
# folder, the README's leaderboard block (python benchmarks/leaderboard_readme.py redoes this
# step alone, from the records, without playing anything).
if [ "$OUT" = benchmarks/results/classic ]; then README=; else README=--no-readme; fi
python benchmarks/leaderboard_readme.py --output "$OUT" $README
