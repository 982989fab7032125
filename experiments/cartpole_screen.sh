#!/usr/bin/env bash
# CartPole recipe screen (issue 9): ten PPO runs of the head-only CartPole recipe at once, on one
# GPU, each cut after LIMIT seconds. It compares critics early in training (the committed runs
# need hours each on this project's CPU); the committed results stay the CPU runs of
# benchmarks/rl_from_scratch.sh. Each run's curve lands in OUTDIR/NAME/metrics.csv.
#
#   anneal-s*    cartpole-ppo-anneal-s0's recipe (the plain critic), seeds 0-2
#   critic-s0    the same with value_lr 0.03 (cartpole-ppo-critic-s0)
#   vnorm-s*     the same with value_norm (cartpole-ppo-vnorm-s0), seeds 0-2
#   vnorm-t1-s*  value_norm, sampling at temperature 1 instead of 2, seeds 0-2
#
# Usage: LIMIT=400 bash experiments/cartpole_screen.sh OUTDIR
# On an H200 (16 cores, float32) the ten runs reached 4,178-5,406 env steps in 400 s each
# (benchmarks/results/rl/cartpole_screen/NAME.csv are those curves).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: LIMIT=400 bash experiments/cartpole_screen.sh OUTDIR}
LIMIT=${LIMIT:-400}
PYTHON=${PYTHON:-python3}
mkdir -p "$out"
COMMON="--algo ppo --steps 20000 --num-envs 8 --episodes-per-update 8 --eval-every 5
 --eval-episodes 4 --final-eval-episodes 20 --set train_backbone=false --set head_optimizer=adamw
 --set head_lr=0.003 --set anneal_lr=true --set gamma=0.99 --set update_epochs=4
 --set eval_method=sampled --set checkpoint_every=0 --device cuda --dtype float32 --threads 1
 --no-progress"
run() {  # run NAME SEED ARGS...
  local name=$1 seed=$2; shift 2
  OMP_NUM_THREADS=1 timeout "$LIMIT" "$PYTHON" -m llmgym train Text-CartPole-v1 $COMMON \
    --seed "$seed" --output "$out/$name" "$@" > "$out/$name.log" 2>&1 &
}
T2="--set temperature=2.0"
for seed in 0 1 2; do run "anneal-s$seed" "$seed" $T2; done
run critic-s0 0 $T2 --set value_lr=0.03
for seed in 0 1 2; do run "vnorm-s$seed" "$seed" $T2 --set value_norm=true; done
for seed in 0 1 2; do run "vnorm-t1-s$seed" "$seed" --set temperature=1.0 --set value_norm=true; done
wait
echo "curves in $out/*/metrics.csv"
