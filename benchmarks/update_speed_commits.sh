#!/usr/bin/env bash
# The update's speed at two commits, on one update of the language-model-alone recipes
# (rl_from_scratch.sh's LM_ALONE: CartPole with the critic on hidden state 8, Blackjack on 22),
# old and new in turn (PAIRS times), so a shared machine's load falls on both alike. Each
# commit is checked out in a temporary worktree and runs with this checkout's .venv. Prints
# each run's rollout, update and iteration seconds (metrics.csv's perf/ columns) and the
# median ratios, and writes them to OUTPUT (default benchmarks/results/update_speed_commits.json).
#
#   bash benchmarks/update_speed_commits.sh 33688ce 22952ac      # ~25 min here, 2 pairs
set -euo pipefail
if [[ "${1:-}" == -h || "${1:-}" == --help || $# -lt 2 ]]; then
  echo "usage: [PAIRS=2] [OUTPUT=FILE] bash benchmarks/update_speed_commits.sh OLD_COMMIT NEW_COMMIT"
  sed -n '2,/^set /s/^# \{0,1\}//p' "$0"  # the header above
  [[ $# -lt 2 && "${1:-}" != -h && "${1:-}" != --help ]] && exit 2
  exit 0
fi
cd "$(dirname "$0")/.."
ROOT=$PWD OLD=$1 NEW=$2 PAIRS=${PAIRS:-2}
OUTPUT=${OUTPUT:-benchmarks/results/update_speed_commits.json}
WORK=$(mktemp -d)
trap 'for w in old new; do git worktree remove --force "$WORK/$w" 2>/dev/null || true; done; rm -rf "$WORK"' EXIT
for w in old new; do
  commit=$OLD; [ $w = new ] && commit=$NEW
  git worktree add -q --detach "$WORK/$w" "$commit"
done
LM=(--set action_head=false --no-start-eval --set q_critic=true --set q_step=3.0
    --set minibatch_size=8 --lr 3e-3 --set update_epochs=1 --set target_kl=null
    --set ent_coef=0.01 --set gae_lambda=1.0 --set q_window=10 --set q_ridge=0
    --set anneal_lr=true --set average_decay=0.9)
declare -A ARGS=(
  [Text-CartPole-v1]="--steps 100 --num-envs 8 --episodes-per-update 8 --final-eval-episodes 1
    --set temperature=2.0 --set eval_method=sampled --set head_layers=[8] --set gamma=0.995"
  [Text-Blackjack-v1]="--episodes 40 --steps 1000000 --episodes-per-update 40
    --set head_layers=[22] --set q_window=40"
)
ROWS=$WORK/rows.tsv
set -f  # ARGS' words hold brackets: no globbing
for pair in $(seq "$PAIRS"); do
  for env in Text-CartPole-v1 Text-Blackjack-v1; do
    for w in old new; do
      out=$WORK/run-$w-$env-$pair
      # shellcheck disable=SC2086  # ARGS holds words
      (cd "$WORK/$w" && OMP_NUM_THREADS=1 PYTHONPATH=$WORK/$w "$ROOT/.venv/bin/python" -m llmgym \
        train "$env" --threads 1 --no-progress --output "$out" --algo ppo --seed 0 \
        --eval-every 1000 "${LM[@]}" ${ARGS[$env]} > "$out.log" 2>&1)
      perf=$("$ROOT/.venv/bin/python" - "$out/metrics.csv" <<'EOF'
import csv, sys
row = next(csv.DictReader(open(sys.argv[1])))
print("\t".join(row[k] for k in ("env_steps", "perf/rollout_s", "perf/update_s", "perf/iteration_s")))
EOF
)
      printf '%s\t%s\t%s\t%s\n' "$env" "$w" "$pair" "$perf" | tee -a "$ROWS"
    done
  done
done
"$ROOT/.venv/bin/python" - "$ROWS" "$OUTPUT" "$OLD" "$NEW" <<'EOF'
import json, os, platform, statistics, sys
rows_file, output, old, new = sys.argv[1:]
rows = [line.split("\t") for line in open(rows_file).read().splitlines()]
runs = [dict(env=e, commit=old if w == "old" else new, which=w, pair=int(p), env_steps=int(s),
             rollout_s=float(r), update_s=float(u), iteration_s=float(i))
        for e, w, p, s, r, u, i in rows]
ratios = {}
for env in sorted({r["env"] for r in runs}):
    pick = lambda w, k: [r[k] for r in runs if r["env"] == env and r["which"] == w]
    ratios[env] = {k: statistics.median(pick("old", k)) / statistics.median(pick("new", k))
                   for k in ("update_s", "iteration_s")}
    print(f"{env}: update {ratios[env]['update_s']:.2f}x faster, "
          f"iteration {ratios[env]['iteration_s']:.2f}x (median old / median new)")
machine = (f"{platform.processor() or platform.machine()}, {os.cpu_count()} logical CPUs, "
           f"1 torch thread; load average {os.getloadavg()[0]:.1f} at the end (shared machine)")
record = {"old": old, "new": new, "machine": machine, "runs": runs, "speedups": ratios}
json.dump(record, open(output, "w"), indent=1)
print(f"Wrote {output}")
EOF
