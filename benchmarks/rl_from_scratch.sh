#!/usr/bin/env bash
# RL from scratch on the embedded SmolLM2-135M: every committed run is a recipe and a seed
# (llmgym/rl/recipes/*.toml, the results table's rows; experiments/recipes/*.toml, the research
# variants), run one at a time on one CPU thread (THREADS=N for more). Run NAME-sSEED trains
# recipe NAME with seed SEED; NAME-random-sSEED is its control, the same recipe on a random-init
# backbone of the same architecture and tokenizer (its policy is written but not committed).
# Each run writes
#   benchmarks/results/rl/NAME-sSEED.json   the record (recipe and its hash, values, command)
#   benchmarks/results/rl/NAME-sSEED.csv    its learning curve (metrics.csv of the run)
#   benchmarks/results/rl/NAME-sSEED.png    the plot
#   benchmarks/weights/rl/NAME-sSEED/       the policy: restore it with
#                                     llmgym eval ENV --exact --agent "llm:smollm2-135m@benchmarks/weights/rl/NAME-sSEED"
# Usage: bash benchmarks/rl_from_scratch.sh [NAME-sSEED ...]   (default: every recipe's seeds;
# about 10 h). `llmgym recipes --experiments` lists the recipes, their seeds and their cost.
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
  echo "usage: [THREADS=N] [RESUME=1|SNAPSHOT=1] bash benchmarks/rl_from_scratch.sh [NAME-sSEED ...]"
  sed -n '2,/^set /s/^# \{0,1\}//p' "$0"  # the header above
  exit 0
fi
set -euo pipefail
cd "$(dirname "$0")/.."
LLMGYM=${LLMGYM:-.venv/bin/llmgym}
PYTHON=${PYTHON:-.venv/bin/python}
THREADS=${THREADS:-1}  # CPU threads per run (THREADS=2 when nothing else needs the second core)

# A run longer than a session: `SNAPSHOT=1 bash benchmarks/rl_from_scratch.sh NAME` (from another
# shell, while it runs) copies its newest checkpoint to benchmarks/run_snapshots/NAME, small enough to
# commit; `RESUME=1 bash benchmarks/rl_from_scratch.sh NAME` continues from runs/rl/NAME, or else
# from that committed snapshot, with the same command. A finished run's snapshot is removed: its
# record and policy stay.
snapshot() {  # snapshot NAME: the run's config, curve and newest checkpoint (no TensorBoard)
  local src=runs/rl/$1 dst=benchmarks/run_snapshots/$1
  local latest; latest=$(cat "$src/checkpoints/latest")
  rm -rf "$dst" && mkdir -p "$dst/checkpoints"
  cp "$src/run.json" "$src/metrics.csv" "$src/start_eval.json" "$dst/"
  cp -r "$src/checkpoints/$latest" "$dst/checkpoints/" && echo "$latest" > "$dst/checkpoints/latest"
  echo "snapshot of $src ($latest) in $dst"
}

recipe_env() {  # recipe_env RECIPE: its env id (exit 2 for an unknown recipe)
  $PYTHON -c "import sys; from llmgym import recipes; print(recipes.get(sys.argv[1]).env)" "$1" \
    2>/dev/null || { echo "unknown run: no recipe $1 (llmgym recipes --experiments)" >&2; exit 2; }
}

run() {  # run NAME-sSEED or NAME-random-sSEED
  local name=$1 seed=${1##*-s} recipe=${1%-s*} control=()
  if [[ $recipe == *-random ]]; then recipe=${recipe%-random}; control=(--set policy.backbone=random-init); fi
  local env; env=$(recipe_env "$recipe")
  local out=runs/rl/$name resume=()
  if [ -n "${RESUME:-}" ]; then
    if [ ! -d "$out" ]; then mkdir -p runs/rl && cp -r "benchmarks/run_snapshots/$name" "$out"; fi
    resume=(--resume)
  fi
  OMP_NUM_THREADS=$THREADS $LLMGYM train "$env" --recipe "$recipe" --seed "$seed" \
    --threads "$THREADS" --no-progress --output "$out" --policy-out "benchmarks/weights/rl/$name" \
    --result-json "benchmarks/results/rl/$name.json" "${resume[@]}" "${control[@]}"
  cp "$out/metrics.csv" "benchmarks/results/rl/$name.csv"
  cp "$out/learning_curve.png" "benchmarks/results/rl/$name.png"
}

if [ -n "${SNAPSHOT:-}" ]; then
  for name in "$@"; do snapshot "$name"; done
  exit 0
fi
if [ $# -eq 0 ]; then  # every recipe's seeds, the package's first
  mapfile -t ALL < <($PYTHON -c "from llmgym import recipes
for r in recipes.all_recipes(package_only=False): print(*r.record_names(), sep='\n')")
  set -- "${ALL[@]}"
fi
for name in "$@"; do
  [[ $name == *-s[0-9]* ]] || { echo "unknown run $name: runs are NAME-sSEED" >&2; exit 2; }
  run "$name"
done
