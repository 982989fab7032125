#!/usr/bin/env bash
# Rebuild benchmarks/results/classic: reference rows, then smollm2-135m rows (zero-shot, and the
# policies RL trained from scratch). Finished episodes are skipped, so rerunning resumes;
# delete the output folder to start over. The SB3 agents play the committed policies in
# benchmarks/results/classic/sb3/ (bash benchmarks/train_sb3_policies.sh trains any missing).
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
  echo "usage: [OUT=DIR] bash benchmarks/classic_leaderboard.sh"
  sed -n '2,/^set /s/^# \{0,1\}//p' "$0"  # the header above
  exit 0
fi
set -euo pipefail
OUT=${OUT:-benchmarks/results/classic}
B="llmgym bench --seed 1000 --output $OUT"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

SB3="env LLMGYM_CACHE=benchmarks/results/classic/sb3"
$SB3 $B --suite classic --agents random,optimal,sb3-ppo,sb3-dqn,sb3-a2c

# SmolLM2 rows, greedy (the bench's default for LLM agents). Score mode memoises each distinct
# prompt's scores, so the grid and card games (whose exact values the bench also computes) cost
# little; the envs with continuous observations cost a forward pass per step (~3 env-steps/s on
# one core): 500 episodes on CartPole (~10 steps each zero-shot), 30 on the long-horizon envs in
# score mode (it needs discrete actions: not Pendulum or MountainCarContinuous) and 30 in
# generate mode. --batch-size 10 on the long ones, so that an interruption loses at most 10
# episodes. The long-horizon cells take hours (MountainCarContinuous's took three sessions: "The
# long cells" in docs/results/leaderboard.md): rerun to resume.
source "$(dirname "$0")/leaderboard_agents.sh"
$B --envs Text-Blackjack-v1 --agents "$ZS" --episodes 500
# (Blackjack's zero-shot rows are the 500 above: a bench refuses another count into its folder)
$B --envs "${EXACT_ENVS#Text-Blackjack-v1,}" --agents "$ZS" --episodes 100
$B --envs $EXACT_ENVS --agents "$GEN" --episodes 30
$B --envs Text-CartPole-v1 --agents "$ZS" --episodes 500
$B --envs Text-CartPole-v1 --agents "$GEN" --episodes 30

# Policies trained from scratch by benchmarks/rl_from_scratch.sh ($BJ, $BJ_LM, $LAKE, $CARTPOLE).
$B --envs Text-Blackjack-v1 --agents "$BJ,$BJ_LM" --episodes 500
$B --envs Text-FrozenLake-v1 --agents "$LAKE" --episodes 100
$B --envs Text-CartPole-v1 --agents "$CARTPOLE" --episodes 30 --batch-size 10

$B --envs $LONG_DISCRETE --agents "$ZS" --episodes 30 --batch-size 10
$B --envs $LONG_ENVS --agents "$GEN" --episodes 30 --batch-size 10

# One leaderboard over every recorded row: leaderboard.md, the two charts and, for the committed
# folder, the README's leaderboard block (python benchmarks/leaderboard_readme.py redoes this
# step alone, from the records, without playing anything).
if [ "$OUT" = benchmarks/results/classic ]; then README=; else README=--no-readme; fi
python benchmarks/leaderboard_readme.py --output "$OUT" $README
