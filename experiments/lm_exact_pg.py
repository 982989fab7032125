"""Policy gradient on Blackjack with the exact gradient: no sampling noise at all. Each step
computes the current policy's probabilities in every state, its exact Q-values and state
visitation from the transition model, and makes one pass over the (state, action) pairs with
the run's LoRA and optimizer along ``--direction`` (by default the policy gradient, sum_s d(s)
sum_a pi(a|s) A(s,a) grad log pi(a|s)): one full-batch step with ``--set minibatch_size=560``,
SFT-like small steps with a small one. Tells apart the two reasons RL on the language model
alone can stall (issue 35, item 3): the gradient's noise at a given episode budget, or how the
parameters let the scores of different states move apart.

    .venv/bin/python experiments/lm_exact_pg.py --steps 30 --json OUT [--set key=value ...]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

import numpy as np

import llmgym  # noqa: F401  (registers the Text- envs)
from llmgym.baselines.planning import _arrays, evaluate_tabular
from llmgym.evaluation.exact import _find, _make, _tables
from llmgym.rl import make_trainer
from llmgym.wrappers.text_action import TextAction

ENV = "Text-Blackjack-v1"


def exact_tables(P, start, pi: np.ndarray, sweeps: int = 60):
    """(Q [S, A], visitation d [S]) of the stochastic policy ``pi`` [S, A] (undiscounted)."""
    prob, reward, cont = _arrays(P)
    values = np.zeros(len(P))
    for _ in range(sweeps):
        q = reward + cont @ values
        values = (pi * q).sum(1)
    d, visits = start.copy(), start.copy()
    for _ in range(sweeps):
        d = np.einsum("s,sa,sat->t", d, pi, cont)
        visits += d
    return q, visits


def greedy_map(obs_of, states, greedy) -> dict[int, str]:
    """The greedy action (Blackjack's base action 1 is hit) on every hard hand:
    ``{sum: "HH.."}`` over dealer ace, 2-10."""
    cells = {}
    for s in states:
        raw = obs_of(s)
        if raw is not None and not raw[2]:
            cells[(raw[0], raw[1])] = "H" if greedy[s] == 1 else "."
    return {p: "".join(cells.get((p, d), " ") for d in range(1, 11)) for p in range(4, 22)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--json", help="write the curve here")
    parser.add_argument(
        "--direction",
        choices=["pg", "logits", "greedy"],
        default="pg",
        help="pg: d(s) pi(a|s) A(s,a) on log pi (the policy gradient); logits: d(s) times the "
        "advantage centred over the actions, which moves each state's scores by its Q-values "
        "alone (the tabular natural gradient's direction) however unlikely an action has become; "
        "greedy: d(s) times the Q gap on log pi of the better action (cross-entropy to the greedy "
        "action of Q: stops once a state has decided, does not vanish where it decided wrong)",
    )
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    settings = dict(
        env_id=ENV,
        action_head=False,
        eval_start=False,
        checkpoint_every=0,
        progress=False,
        num_threads=1,
        output_dir="runs/lm/exact-pg",
    )
    for item in args.set:
        key, value = item.split("=", 1)
        try:
            settings[key] = json.loads(value)
        except json.JSONDecodeError:
            settings[key] = value
    trainer = make_trainer("ppo", **settings)
    policy = trainer.policy
    env, _ = _make(ENV, None)
    table = _tables(env)[0]  # Blackjack: one table
    rows, states = list(table.rows.values()), table.states
    P, start, obs_of = table.P, table.start, table.obs_of
    parse = _find(env, TextAction)
    texts, infos = [t for _, t, _ in rows], [i for *_, i in rows]
    row_of = {raw: k for k, (raw, _, _) in enumerate(rows)}
    names = infos[0]["valid_actions"]
    base = [int(parse.parser(json.dumps({"action": a})).action) for a in names]
    policy.reset()
    acted = policy.act(texts, infos)
    samples = [dataclasses.replace(s, action_index=k) for s in acted for k in range(len(names))]
    torch = trainer.torch
    curve = []
    for step in range(args.steps + 1):
        t0 = time.time()
        with torch.no_grad():
            logp = torch.cat([o.logprob.float() for o in trainer.learner.recompute(samples)])
        pi_rows = logp.view(len(rows), len(names)).exp().cpu().numpy()
        pi = np.full((len(P), 2), 0.5)
        for s in states:
            pi[s, base] = pi_rows[row_of[obs_of(s)]]
        q, visits = exact_tables(P, start, pi)
        greedy = pi.argmax(1)
        value = evaluate_tabular(P, greedy, start, 200)
        expected = float(start @ (pi * q).sum(1))
        adv_rows = np.zeros((len(rows), len(names)))
        weight_rows = np.zeros(len(rows))
        for s in states:
            r = row_of[obs_of(s)]
            adv_rows[r] = q[s, base] - (pi[s] * q[s]).sum()
            weight_rows[r] += visits[s]
        if args.direction == "pg":
            coef = weight_rows[:, None] * pi_rows * adv_rows  # d(s) pi(a|s) A(s,a)
        elif args.direction == "logits":
            coef = weight_rows[:, None] * (adv_rows - adv_rows.mean(1, keepdims=True))
        else:
            gap = adv_rows.max(1) - adv_rows.min(1)
            coef = np.zeros_like(adv_rows)
            coef[np.arange(len(rows)), adv_rows.argmax(1)] = weight_rows * gap
        coef = coef / (np.abs(coef).sum() + 1e-12)  # the step size is the optimizer's
        curve.append(
            {"step": step, "greedy_exact": round(value, 4), "expected": round(expected, 4)}
        )
        print(f"step {step:3d} greedy {value:+.4f} stochastic {expected:+.4f}", flush=True)
        hard = greedy_map(obs_of, states, greedy)
        if args.json:  # after every step: an interrupted run keeps its curve
            with open(args.json, "w") as f:
                json.dump({"settings": settings, "curve": curve, "greedy_hard": hard}, f, indent=1)
        if step == args.steps:
            break
        weights = torch.tensor(coef.reshape(-1), dtype=torch.float32, device=trainer.learner.device)

        def loss_fn(idx, weights=weights):
            out = trainer.learner.evaluate_samples([samples[i] for i in idx])
            loss = -(weights[idx] * out.logprob.float()).sum() * len(samples) / len(idx)
            return loss, {}

        trainer.learner.run_epochs(len(samples), loss_fn, 1)
        print(f"  {time.time() - t0:.0f} s", flush=True)
    print("greedy action on hard hands (H hit, . stick), rows: sums 4-21, columns: dealer A-10")
    print("\n".join(f"{p:>3} {row}" for p, row in hard.items()))


if __name__ == "__main__":
    main()
