"""How well the frozen model's hidden state encodes the size of each CartPole variable, for
three ways of writing the observation (issue 9).

The action head reads the hidden state at the answer position. A policy that reaches 195 must
use the size of theta (or theta_dot), not only the describer's side words ("leaning right",
"rotating left"). This probe fits ridge regressions from the raw hidden states to each state
variable over random near-upright states and reports the held-out R^2 over all of them and
within one side (the variable above a small positive value: the words are then constant, so
only the size is left to read). The texts compared: the shipped describer (``words``), the same
without the side words (``numbers``), and with theta_dot also in degrees per second
(``degrees``: the ``cartpole-degrees`` describer). ``--layers``: the same for each of the
model's hidden states at that position (the shipped text; 0 the embeddings, i after decoder
layer i, the last normalised), which ``--set head_layers=[...]`` lets the head read.

    python experiments/cartpole_readable.py benchmarks/weights/rl/cartpole-ppo-vnorm-s0
    python experiments/cartpole_readable.py benchmarks/weights/rl/cartpole-ppo-vnorm-s0 --layers
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np
import torch
from cartpole_failures import ENV, NAMES, ridge_r2

import llmgym  # noqa: F401  (registers the Text-* envs)
from llmgym.agents.registry import make_agent
from llmgym.envs.classic import CARTPOLE, CARTPOLE_DEGREES

BOUNDS = np.array([1.0, 1.0, 0.1, 1.0])  # x, x_dot, theta, theta_dot: near upright
ONE_SIDE = np.array([0.05, 0.05, 0.005, 0.05])  # "one side": the variable above this
RIDGES = (1.0, 10.0, 100.0, 1000.0)  # the best held-out R^2 over these penalties is reported


def words(state: np.ndarray) -> str:
    """The shipped describer's text."""
    return CARTPOLE.describe(state, None)


def numbers(state: np.ndarray) -> str:
    """The shipped text without "leaning ..." and "rotating ..."."""
    lines = words(state).split("\n")
    for side in ("leaning left; ", "leaning right; ", "steady; "):
        lines[2] = lines[2].replace(side, "")
    lines[3] = lines[3].split(" (")[0]
    return "\n".join(lines)


def degrees(state: np.ndarray) -> str:
    """The ``cartpole-degrees`` describer's text: theta_dot also in degrees per second."""
    return CARTPOLE_DEGREES.describe(state, None)


TEXTS = {"words": words, "numbers": numbers, "degrees": degrees}


def hidden_states(policy, texts: list[str], info: dict, batch: int = 50) -> np.ndarray:
    """The policy's hidden state at the answer position for each observation text."""
    out = []
    for start in range(0, len(texts), batch):
        chunk = texts[start : start + batch]
        samples = policy.act(chunk, [info] * len(chunk))
        out.append(torch.stack([s.hidden for s in samples]).float().numpy())
    return np.concatenate(out)


def every_layer(policy, texts: list[str], info: dict, batch: int = 50) -> np.ndarray:
    """[N, layers + 1, H]: each of the model's hidden states at the answer position."""
    layers = range(policy.model.config.num_hidden_layers + 1)
    prompts = [policy.encode(policy.prompt_text(policy.messages_for(0, t, info))) for t in texts]
    out = []
    with torch.no_grad():
        for start in range(0, len(prompts), batch):
            chunk = prompts[start : start + batch]
            hidden = policy.backend.hidden_states(chunk, shared=False, layers=layers)
            out.append(hidden.float().reshape(len(chunk), len(layers), -1).numpy())
    return np.concatenate(out)


def readability(hidden: np.ndarray, states: np.ndarray) -> list[tuple[float, float]]:
    """(held-out R^2 over all states, within one side) for each state variable."""
    z = (hidden - hidden.mean(0)) / (hidden.std(0) + 1e-6)
    rows = []
    for j in range(states.shape[1]):
        side = states[:, j] > ONE_SIDE[j]
        both = [(z, states[:, j]), (z[side], states[side, j])]
        rows.append(
            tuple(max(ridge_r2(f, y, int(0.75 * len(y)), lam) for lam in RIDGES) for f, y in both)
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("policy", help="a policy directory with an action head")
    parser.add_argument("--states", type=int, default=240, help="random states to probe")
    parser.add_argument("--model", default="smollm2-135m", help="the policy's model")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--layers", action="store_true", help="probe every hidden state")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    policy = make_agent(f"llm:{args.model}@{args.policy}", ENV, seed=0, greedy=True).policy
    _, info = gym.make(ENV).reset(seed=0)
    states = np.random.default_rng(0).uniform(-BOUNDS, BOUNDS, size=(args.states, 4))
    print(f"held-out R^2 of ridge probes on the hidden state, {args.states} states: all / one side")
    if args.layers:
        hidden = every_layer(policy, [words(s.astype(np.float32)) for s in states], info)
        print("  layer    " + "".join(f"{name:>14s}" for name in NAMES))
        for layer in range(hidden.shape[1]):
            rows = readability(hidden[:, layer], states)
            print(f"  {layer:<8d} " + "".join(f"   {a:5.2f} / {b:4.2f}" for a, b in rows))
        return
    print("  text     " + "".join(f"{name:>14s}" for name in NAMES))
    for name, render in TEXTS.items():
        texts = [render(s.astype(np.float32)) for s in states]
        rows = readability(hidden_states(policy, texts, info), states)
        print(f"  {name:8s} " + "".join(f"   {a:5.2f} / {b:4.2f}" for a, b in rows))


if __name__ == "__main__":
    main()
