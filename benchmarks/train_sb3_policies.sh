#!/usr/bin/env bash
# Train every SB3 baseline of the classic leaderboard once, with the catalog's recipes, into
# benchmarks/results/classic/sb3/ (the committed policies: safetensors weights, VecNormalize
# statistics where the recipe uses it, and a .json record of the training). A policy already
# there is kept, so rerunning resumes; delete a file pair to retrain it. One at a time on one
# thread; the committed 28 took 1.8 h of train_seconds in all on this project's shared 2-core CPU
# (their .json records; the longest: Taxi DQN 20.5 min, Acrobot DQN 13.9 min).
#
#   bash benchmarks/train_sb3_policies.sh [ENV:ALGO ...]    # default: every cell, broken ones first
#
# The classic leaderboard plays them (benchmarks/classic_leaderboard.sh points LLMGYM_CACHE here).
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
  echo "usage: bash benchmarks/train_sb3_policies.sh [ENV:ALGO ...]"
  sed -n '2,/^set /s/^# \{0,1\}//p' "$0"  # the header above
  exit 0
fi
set -euo pipefail
cd "$(dirname "$0")/.."
export LLMGYM_CACHE=benchmarks/results/classic/sb3 OMP_NUM_THREADS=1
LLMGYM=${LLMGYM:-.venv/bin/llmgym}
CELLS=(MountainCarContinuous-v0:ppo Pendulum-v1:a2c MountainCar-v0:ppo
       CartPole-v1:ppo CartPole-v1:dqn CartPole-v1:a2c Acrobot-v1:ppo Acrobot-v1:dqn Acrobot-v1:a2c
       MountainCar-v0:dqn Pendulum-v1:ppo Blackjack-v1:ppo Blackjack-v1:dqn
       FrozenLake-v1:ppo FrozenLake-v1:dqn FrozenLake8x8-v1:ppo FrozenLake8x8-v1:dqn
       Taxi-v4:ppo Taxi-v4:dqn CliffWalking-v1:ppo CliffWalking-v1:dqn
       MountainCar-v0:a2c MountainCarContinuous-v0:a2c Blackjack-v1:a2c FrozenLake-v1:a2c
       FrozenLake8x8-v1:a2c Taxi-v4:a2c CliffWalking-v1:a2c)
for cell in "${@:-${CELLS[@]}}"; do
  env=${cell%%:*} algo=${cell##*:}
  echo "== $env $algo ($(date +%H:%M))"
  $LLMGYM baselines train "$env" --algo "$algo"
done

# The leaderboard's "trained on" column reads sb3_models.json: bring it up to date with the
# training records of the policies now committed (same env and algorithm: replaced). A policy
# of an older recipe (its file name is not the catalog's now) is skipped and named: delete it.
.venv/bin/python - <<'PY'
import json
from pathlib import Path

from llmgym.baselines.sb3 import model_path

records_path = Path("benchmarks/results/classic/sb3_models.json")
records = json.loads(records_path.read_text())
keys = ("env_id", "algo", "seed", "timesteps", "train_seconds", "stable_baselines3")
for path in sorted(Path("benchmarks/results/classic/sb3").glob("*.json")):
    new = json.loads(path.read_text())
    current = model_path(
        new["env_id"], new["algo"], new["seed"], new["timesteps"], **new.get("env_kwargs", {})
    )
    if current.stem != path.stem:
        print(f"{path} is an older recipe's policy (now {current.name}): not synced")
        continue
    entry = {k: new[k] for k in keys} | {"source": new["config"]["source"]}
    records = [r for r in records if (r["env_id"], r["algo"]) != (new["env_id"], new["algo"])]
    records.append(entry)
records.sort(key=lambda r: (r["env_id"], r["algo"]))
records_path.write_text(json.dumps(records, indent=1) + "\n")
print(f"{records_path}: {len(records)} training records")
PY
