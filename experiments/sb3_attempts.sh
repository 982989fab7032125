#!/usr/bin/env bash
# The attempts to make SB3 PPO and A2C solve Taxi and CliffWalking (issue 12), each a committed
# learning curve in benchmarks/results/classic/sb3_curves/ (exact value of the deterministic
# policy at each evaluation; the recipe, its overrides and the command inside). The catalog's
# recipes loop to the 200-step cap (-200) on both envs; each attempt trains 2-3x the catalog's
# budget with more entropy (and, for one, longer rollouts). About 7 min on one CPU thread.
# Usage: bash experiments/sb3_attempts.sh [NAME ...]   (default: all of them, in this order)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
OUT=benchmarks/results/classic/sb3_curves

attempt() {  # attempt NAME ENV ALGO BUDGET EVERY [--set K=V ...]
  local name=$1 env=$2 algo=$3 budget=$4 every=$5; shift 5
  OMP_NUM_THREADS=1 $PY experiments/sb3_curve.py "$env" "$algo" --budget "$budget" \
    --every "$every" --output "$OUT/$name.json" "$@"
}

ALL=(Taxi-v4-ppo-300000-ent0.05 Taxi-v4-a2c-200000-ent0.05 Taxi-v4-a2c-200000-nsteps64-ent0.05
     CliffWalking-v1-ppo-100000-ent0.1 CliffWalking-v1-a2c-100000-ent0.1)
for name in "${@:-${ALL[@]}}"; do
  case $name in
    Taxi-v4-ppo-300000-ent0.05) attempt "$name" Taxi-v4 ppo 300000 50000 --set ent_coef=0.05 ;;
    Taxi-v4-a2c-200000-ent0.05) attempt "$name" Taxi-v4 a2c 200000 25000 --set ent_coef=0.05 ;;
    Taxi-v4-a2c-200000-nsteps64-ent0.05)
      attempt "$name" Taxi-v4 a2c 200000 25000 --set n_steps=64 --set ent_coef=0.05 ;;
    CliffWalking-v1-ppo-100000-ent0.1)
      attempt "$name" CliffWalking-v1 ppo 100000 10000 --set ent_coef=0.1 ;;
    CliffWalking-v1-a2c-100000-ent0.1)
      attempt "$name" CliffWalking-v1 a2c 100000 10000 --set ent_coef=0.1 ;;
    *) echo "unknown attempt $name" >&2; exit 2 ;;
  esac
done
