"""How a trained CartPole policy fails, and what its action head reads (issue 9).

Plays greedy episodes of a policy on the evaluation seeds and prints how each ended: the cart
beyond +-2.4 or the pole beyond 12 degrees. Then, over random states, it fits the policy's
preference ``score(RIGHT) - score(LEFT)`` as a linear function of the four state variables
(next to the expert controller's weights: push right when ``theta + 0.5 theta_dot + 0.05 x
+ 0.1 x_dot > 0``) and asks how well the head's features encode each variable (held-out R^2
of a ridge probe): whether a failure is one of what the policy learned or of what it can see.
The preference is also split into the language model's candidate scores and the action head's
addition, each fitted the same way: which of the two carries each weight. And it is fitted on
the describer's words alone (the pole "leaning" and "rotating" left or right), tabulated over
both words and their magnitudes, and set next to what rules of those words return on the same
evaluation seeds: how much of the policy is the words.

    python experiments/cartpole_failures.py benchmarks/weights/rl/cartpole-ppo-vnorm-s0
"""

from __future__ import annotations

import argparse
import math

import gymnasium as gym
import numpy as np
import torch

import llmgym  # noqa: F401  (registers the Text-* envs)
from llmgym.agents.registry import make_agent
from llmgym.wrappers.text_observation import text_wrapper

ENV = "Text-CartPole-v1"
NAMES = ["x", "x_dot", "theta", "theta_dot"]
EXPERT = {"x": 0.05, "x_dot": 0.1, "theta": 1.0, "theta_dot": 0.5}
RULE_EPISODES = 20  # as many as the final evaluation of a training run
STEADY = 1e-3  # the describer writes "steady" below this, else "leaning/rotating left/right"
GRID_THETA = (-0.05, -0.02, -0.005, 0.005, 0.02, 0.05)  # the preference over both words' signs
GRID_THETA_DOT = (-0.5, -0.2, -0.05, 0.05, 0.2, 0.5)  # and over their magnitudes
GRID = np.array([[0.01, 0.01, t, td] for t in GRID_THETA for td in GRID_THETA_DOT])


def word(value: float) -> float:
    """+1 for the describer's "right", -1 for "left", 0 for "steady"."""
    return 0.0 if abs(value) <= STEADY else math.copysign(1.0, value)


#: Push RIGHT when ... (else LEFT; "steady" counts as LEFT), played on the raw env's seeds.
RULES = {
    'the pole is "leaning right"': lambda s: word(s[2]) > 0,
    'it is "rotating right"': lambda s: word(s[3]) > 0,
    "both words say right": lambda s: word(s[2]) > 0 and word(s[3]) > 0,
    "theta + 0.02 rotation word > 0": lambda s: s[2] + 0.02 * word(s[3]) > 0,
    "theta + 0.05 theta_dot > 0": lambda s: s[2] + 0.05 * s[3] > 0,
    "the expert's sum > 0": lambda s: sum(EXPERT[n] * v for n, v in zip(NAMES, s)) > 0,
}


def play(policy, episodes: int, seed: int) -> list[tuple[int, np.ndarray]]:
    """(length, final state) of greedy episodes on seeds ``seed, seed + 1, ...``, batched."""
    if episodes < 1:  # --episodes 0: only the probe
        return []
    envs = [gym.make(ENV) for _ in range(episodes)]
    obs, infos = map(list, zip(*[e.reset(seed=seed + i) for i, e in enumerate(envs)]))
    steps, ended = [0] * episodes, [None] * episodes
    while any(e is None for e in ended):
        live = [i for i in range(episodes) if ended[i] is None]
        samples = policy.act([obs[i] for i in live], [infos[i] for i in live])
        for i, sample in zip(live, samples):
            obs[i], _, term, trunc, infos[i] = envs[i].step(sample.text)
            steps[i] += 1
            if term or trunc:
                ended[i] = np.array(envs[i].unwrapped.state, dtype=float)
    return list(zip(steps, ended))


def rule_return(rule, episodes: int, seed: int) -> tuple[float, float]:
    """Mean return and 95 % half-width of a rule ``state -> push right?`` on CartPole-v1.

    Example:
        >>> rule_return(lambda s: s[3] > 0, 2, 0)[0] > rule_return(lambda s: False, 2, 0)[0]
        True
    """
    returns = []
    env = gym.make("CartPole-v1")
    for i in range(episodes):
        state, _ = env.reset(seed=seed + i)
        done, total = False, 0.0
        while not done:
            state, reward, term, trunc, _ = env.step(int(rule(state)))
            total, done = total + reward, term or trunc
        returns.append(total)
    return float(np.mean(returns)), 1.96 * float(np.std(returns)) / math.sqrt(len(returns))


def probe(policy, states: np.ndarray, batch: int = 50) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the head's features, score(RIGHT) - score(LEFT), the language model's part of it) in
    each state."""
    env = gym.make(ENV)
    _, info = env.reset(seed=0)
    text = text_wrapper(env)
    features, preference, lm_preference = [], [], []
    for start in range(0, len(states), batch):
        rows = states[start : start + batch].astype(np.float32)
        observations = [text.observation(s) for s in rows]
        infos = [dict(info, raw_obs=s) for s in rows]
        samples = policy.act(observations, infos)
        hidden = torch.stack([s.hidden for s in samples])
        features.append(policy.features(hidden).float().numpy())
        preference.append(log_odds(policy, observations, infos))
        head, policy.head = policy.head, None  # the candidate scores without the head's part
        try:
            lm_preference.append(log_odds(policy, observations, infos))
        finally:
            policy.head = head
    return tuple(np.concatenate(parts) for parts in (features, preference, lm_preference))


def log_odds(policy, observations: list[str], infos: list[dict]) -> np.ndarray:
    """score(RIGHT) - score(LEFT) in each state."""
    scores = np.array(policy.action_scores(observations, infos))
    return scores[:, 1] - scores[:, 0]


def linear_fit(states: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, float]:
    """Least-squares weights of ``target`` on the state variables and a bias, and the R^2."""
    design = np.c_[states, np.ones(len(states))]
    coef, *_ = np.linalg.lstsq(design, target, rcond=None)
    return coef, r_squared(design @ coef, target)


def r_squared(prediction: np.ndarray, truth: np.ndarray) -> float:
    """The share of ``truth``'s variance that ``prediction`` explains."""
    return float(1 - ((prediction - truth) ** 2).sum() / ((truth - truth.mean()) ** 2).sum())


def ridge_r2(features: np.ndarray, target: np.ndarray, train: int, lam: float = 1.0) -> float:
    """Held-out R^2 of a ridge regression fitted on the first ``train`` rows."""
    a, y = features[:train], target[:train]
    w = np.linalg.solve(a.T @ a + lam * np.eye(a.shape[1]), a.T @ (y - y.mean()))
    return r_squared(features[train:] @ w + y.mean(), target[train:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("policy", help="a policy directory, e.g. benchmarks/weights/rl/NAME")
    parser.add_argument("--episodes", type=int, default=10, help="greedy episodes to play")
    parser.add_argument("--seed", type=int, default=1_000_000, help="first evaluation seed")
    parser.add_argument("--states", type=int, default=600, help="random states to probe")
    parser.add_argument(
        "--model", default="smollm2-135m", help="the model the policy was trained on"
    )
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    agent = make_agent(f"llm:{args.model}@{args.policy}", ENV, seed=0, greedy=True)
    policy = agent.policy

    print(f"{args.episodes} greedy episodes of {args.policy} from seed {args.seed}:")
    for i, (length, (x, x_dot, theta, theta_dot)) in enumerate(
        play(policy, args.episodes, args.seed)
    ):
        why = "cart off the track" if abs(x) > 2.4 else "pole fell"
        why = "truncated at 500" if length >= 500 else why
        print(
            f"  seed {args.seed + i}: {length} steps, {why} (x {x:+.2f}, x_dot {x_dot:+.2f}, "
            f"theta {math.degrees(theta):+.1f} deg, theta_dot {theta_dot:+.2f})"
        )

    rng = np.random.default_rng(0)
    bounds = np.array([2.4, 2.0, 0.2, 2.0])
    states = rng.uniform(-bounds, bounds, size=(args.states, 4))
    features, preference, lm_preference = probe(policy, states)
    coef, r2 = linear_fit(states, preference)
    print(f"\nscore(RIGHT) - score(LEFT) over {args.states} uniform random states, linear fit")
    print(f"(R^2 {r2:.2f}), weights relative to theta's, against the expert controller's:")
    for j, name in enumerate(NAMES):
        print(f"  {name:9s} {coef[j] / coef[2]:+8.3f}   expert {EXPERT[name]:+.3f}")
    print(f"  bias      {coef[4] / coef[2]:+8.3f}   expert +0.000")
    parts = {"head": (coef, r2)}  # lm_prior=false: the head's score is the whole policy's
    if policy.head.lm_prior:
        parts = {
            "LM": linear_fit(states, lm_preference),
            "head": linear_fit(states, preference - lm_preference),
        }
    print("\nthe same score split into its parts, absolute weights (per unit of each variable):")
    print("  part   R^2 " + "".join(f"{name:>11s}" for name in [*NAMES, "bias"]))
    for part, (c, fit_r2) in parts.items():
        print(f"  {part:5s} {fit_r2:4.2f} " + "".join(f"{w:+11.3f}" for w in c))
    print(f"  total {r2:4.2f} " + "".join(f"{w:+11.3f}" for w in coef))
    words = np.vectorize(word)(states[:, 2:])
    _, words_r2 = linear_fit(words, preference)
    _, both_r2 = linear_fit(np.c_[words, states], preference)
    print(
        f"\nthe same score fitted on the words alone (leaning, rotating: -1 left, +1 right): "
        f"R^2 {words_r2:.2f}; on the words and the four numbers: R^2 {both_r2:.2f}"
    )
    _, grid, _ = probe(policy, GRID)
    print("score(RIGHT) - score(LEFT) at x = x_dot = 0.01 (rows theta, columns theta_dot):")
    print("          " + "".join(f"{v:+8.2f}" for v in GRID_THETA_DOT))
    for theta, row in zip(GRID_THETA, grid.reshape(len(GRID_THETA), -1)):
        print(f"  {theta:+.3f}  " + "".join(f"{v:+8.1f}" for v in row))
    print(f"rules of the state, push right when ... ({RULE_EPISODES} episodes from {args.seed}):")
    for name, rule in RULES.items():
        mean, ci = rule_return(rule, RULE_EPISODES, args.seed)
        print(f"  {name:32s} {mean:7.2f} +- {ci:.2f}")
    train = int(0.75 * len(states))
    print(f"\nheld-out R^2 of a ridge probe on the head's features ({train} states to fit):")
    for j, name in enumerate(NAMES):
        print(f"  {name:9s} {ridge_r2(features, states[:, j], train):.3f}")


if __name__ == "__main__":
    main()
