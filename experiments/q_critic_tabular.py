"""The ``q_window`` critic of PPO's ``q_critic`` on Blackjack, without the language model's
actor: (1) how well a ridge map from one hidden state of the model (at each of the 280 states'
prompts) represents the exact Q-values (5-fold cross-validated R^2), and (2) the whole loop with
a tabular actor: 40 sampled episodes per update, the critic fitted by ridge least squares to the
last ``--window`` updates' returns on those features, and each visited state's logits set to
``log pi_old + q_step * c`` exactly (``c`` the centred Q-values at unit scale over the batch).
What (2) reaches is what the critic allows when the actor follows it perfectly (issue 35,
item 3; docs/results/research-notes.md).

    .venv/bin/python experiments/q_critic_tabular.py --layer 22 --ridge 1 0 --window 10 \
        --q-step 3 --seeds 3 --json OUT
"""

from __future__ import annotations

import argparse
import itertools
import json

import gymnasium as gym
import numpy as np
import torch

import llmgym  # noqa: F401  (registers the Text- envs)
from llmgym.baselines.planning import _arrays, evaluate_tabular
from llmgym.evaluation.exact import _find, _make, _tables
from llmgym.rl import make_trainer
from llmgym.rl.qcritic import ridge_fit
from llmgym.wrappers.text_action import TextAction

ENV = "Text-Blackjack-v1"


def features(model: str, layer: int, texts, infos) -> np.ndarray:
    """[rows, F] the model's hidden state ``layer`` at each prompt's answer position, whitened
    as the critic's whitener does (ridge 0.3 of the mean variance), with a constant column."""
    trainer = make_trainer(
        "ppo",
        env_id=ENV,
        model=model,
        action_head=False,
        eval_start=False,
        checkpoint_every=0,
        progress=False,
        num_threads=1,
        output_dir="runs/lm/q-critic-tabular",
        head_layers=[layer],
    )
    trainer.policy.reset()
    acted = trainer.policy.act(texts, infos)
    with torch.no_grad():
        chunks = [acted[i : i + 32] for i in range(0, len(acted), 32)]
        parts = [trainer.learner.evaluate_samples(chunk).hidden for chunk in chunks]
    hidden = torch.cat(parts).double().numpy()
    cov = np.cov(hidden.T)
    eps = 0.3 * np.trace(cov) / len(cov)
    w, v = np.linalg.eigh(cov + eps * np.eye(len(cov)))
    x = (hidden - hidden.mean(0)) @ (v / np.sqrt(w))
    return np.c_[x, np.ones(len(x))]


def fit(x: np.ndarray, y: np.ndarray, ridge: float) -> np.ndarray:
    return ridge_fit(torch.from_numpy(x), torch.from_numpy(y), ridge).numpy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--layer", type=int, default=22)
    parser.add_argument("--ridge", type=float, nargs="+", default=[1.0, 0.0])
    parser.add_argument("--window", type=int, nargs="+", default=[10])
    parser.add_argument("--q-step", type=float, nargs="+", default=[3.0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--updates", type=int, default=100)
    parser.add_argument("--episodes-per-update", type=int, default=40)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    env, _ = _make(ENV, None)
    table = _tables(env)[0]  # Blackjack: one table
    rows, states = list(table.rows.values()), table.states
    P, start, obs_of = table.P, table.start, table.obs_of
    texts, infos = [t for _, t, _ in rows], [i for *_, i in rows]
    row_of = {raw: k for k, (raw, _, _) in enumerate(rows)}
    parse = _find(env, TextAction)
    base = [int(parse.parser(json.dumps({"action": a})).action) for a in infos[0]["valid_actions"]]
    srow = np.array([row_of.get(obs_of(s), -1) for s in range(len(P))])
    x = features(args.model, args.layer, texts, infos)
    _, reward, cont = _arrays(P)

    # (1) the exact Q-values of two policies, fitted across states
    values = np.zeros(len(P))
    for _ in range(60):
        q = reward + cont @ values
        values = q.max(1)
    optimal = np.eye(2)[q.argmax(1)]
    stick = np.zeros((len(P), 2))
    stick[:, 0] = 1.0
    fold = np.random.default_rng(0).integers(0, 5, len(rows))
    representation = {}
    for name, pi in (("optimal", optimal), ("always_stick", stick)):
        values = np.zeros(len(P))
        for _ in range(60):
            q = reward + cont @ values
            values = (pi * q).sum(1)
        for k, action in enumerate(base):
            y = np.zeros(len(rows))
            for s in states:
                y[srow[s]] = q[s, action]
            pred = np.zeros(len(rows))
            for f in range(5):
                pred[fold == f] = x[fold == f] @ fit(x[fold != f], y[fold != f], 1.0)
            r2 = 1 - ((pred - y) ** 2).sum() / ((y - y.mean()) ** 2).sum()
            representation[f"{name}/{infos[0]['valid_actions'][k]}"] = round(float(r2), 3)
    print("cross-validated R^2 of the exact Q-values:", representation, flush=True)

    # (2) the loop with a tabular actor
    def greedy_value(logits: np.ndarray) -> float:
        greedy = np.zeros(len(P), dtype=int)
        for s in states:
            greedy[s] = base[int(logits[srow[s]].argmax())]
        return evaluate_tabular(P, greedy, start, 200)

    def run(seed: int, ridge: float, window: int, q_step: float) -> list[float]:
        rng = np.random.default_rng(seed)
        game = gym.make("Blackjack-v1")
        logits = np.zeros((len(rows), 2))
        memory, curve = [], []
        for update in range(1, args.updates + 1):
            visited, taken, returns = [], [], []
            for _ in range(args.episodes_per_update):
                obs, _ = game.reset(seed=int(rng.integers(1 << 30)))
                trajectory, total, done = [], 0.0, False
                while not done:
                    r = row_of[obs]
                    p = np.exp(logits[r] - logits[r].max())
                    a = rng.choice(2, p=p / p.sum())
                    trajectory.append((r, a))
                    obs, reward_, term, trunc, _ = game.step(base[a])
                    total, done = total + reward_, term or trunc
                visited += [r for r, _ in trajectory]
                taken += [a for _, a in trajectory]
                returns += [total] * len(trajectory)
            memory = (memory + [(visited, taken, returns)])[-window:]
            s_all = np.concatenate([m[0] for m in memory])
            a_all = np.concatenate([m[1] for m in memory])
            y_all = np.concatenate([m[2] for m in memory]).astype(float)
            y_all = (y_all - y_all.mean()) / (y_all.std() + 1e-8)
            q_hat = np.zeros((len(rows), 2))
            for a in range(2):
                if (a_all == a).any():
                    q_hat[:, a] = x @ fit(x[s_all[a_all == a]], y_all[a_all == a], ridge)
            v = np.array(visited)
            c = q_hat[v] - q_hat[v].mean(1, keepdims=True)
            c = c / (np.sqrt((c**2).mean()) + 1e-8)
            log_pi = logits - np.log(np.exp(logits).sum(1, keepdims=True))
            for r in np.unique(v):
                logits[r] = log_pi[r] + q_step * c[v == r][0]
            if update % 5 == 0:
                curve.append(round(greedy_value(logits), 4))
        return curve

    results = []
    for ridge, window, q_step in itertools.product(args.ridge, args.window, args.q_step):
        curves = [run(seed, ridge, window, q_step) for seed in range(args.seeds)]
        results.append({"ridge": ridge, "window": window, "q_step": q_step, "curves": curves})
        print(
            f"ridge {ridge:g} window {window} q_step {q_step:g}: finals "
            f"{[c[-1] for c in curves]}, best {[max(c) for c in curves]}",
            flush=True,
        )
    if args.json:
        record = {"args": vars(args), "representation_r2": representation, "loops": results}
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
