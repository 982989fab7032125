"""Exact planning for the toy-text envs: Blackjack by dynamic programming, tabular envs
(FrozenLake, Taxi, CliffWalking) by value iteration on ``env.unwrapped.P``, and exact
evaluation of a tabular policy under a time limit (no Monte Carlo noise).

Example:
    >>> round(blackjack_solution().start_value, 4)
    -0.0431
    >>> import gymnasium as gym
    >>> lake = gym.make("FrozenLake-v1").unwrapped
    >>> policy, value = solve_tabular(lake.P, lake.initial_state_distrib, horizon=100)
    >>> round(value, 4)
    0.7402

The best *stationary* policy on FrozenLake 4x4 (slippery, 100 steps) succeeds with probability
0.7402; the often-quoted 0.744 is the optimum of a time-aware policy that also sees the step
count, which a Markov agent cannot.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

#: Gymnasium's Blackjack draws with replacement from 1-10 with four 10-valued ranks.
CARD_PROBS: dict[int, float] = {**{c: 1 / 13 for c in range(1, 10)}, 10: 4 / 13}
_NATURAL = -1  # dealer outcome key for a two-card 21 (ace + ten)


def _total(hard: int, ace: bool) -> int:
    return hard + 10 if ace and hard + 10 <= 21 else hard


@cache
def _dealer_final(hard: int, ace: bool) -> dict[int, float]:
    """Distribution of the dealer's final score (0 = bust) from a hand, drawing below 17."""
    total = _total(hard, ace)
    if total >= 17:
        return {total if total <= 21 else 0: 1.0}
    out: dict[int, float] = {}
    for card, p in CARD_PROBS.items():
        for score, q in _dealer_final(hard + card, ace or card == 1).items():
            out[score] = out.get(score, 0.0) + p * q
    return out


@cache
def _dealer_outcomes(shown: int) -> dict[int, float]:
    """Dealer outcome given the shown card: final score, or ``_NATURAL`` for ace + ten."""
    out: dict[int, float] = {}
    for hidden, p in CARD_PROBS.items():
        if {shown, hidden} == {1, 10}:
            out[_NATURAL] = out.get(_NATURAL, 0.0) + p
            continue
        for score, q in _dealer_final(shown + hidden, 1 in (shown, hidden)).items():
            out[score] = out.get(score, 0.0) + p * q
    return out


def _cmp(a: int, b: int) -> float:
    return float(a > b) - float(a < b)


def _stick_reward(total: int, is_natural: bool, score: int, sab: bool, natural: bool) -> float:
    """The player's reward for sticking on ``total`` against the dealer's final ``score``."""
    if score == _NATURAL:
        return _cmp(total, 21)
    reward = _cmp(total, score)
    if is_natural and sab:
        return 1.0
    if is_natural and natural and reward == 1.0:
        return 1.5
    return reward


@dataclass(frozen=True)
class BlackjackSolution:
    """Optimal Blackjack play: ``policy[(player_sum, dealer_card, usable_ace)]`` is 0 (stick)
    or 1 (hit); ``start_value`` is the exact expected return of a hand under it."""

    policy: dict[tuple[int, int, int], int]
    start_value: float


def blackjack_solution(sab: bool = True, natural: bool = False) -> BlackjackSolution:
    """Solve Gymnasium's ``Blackjack-v1`` (infinite deck) exactly by dynamic programming.

    The state ``(sum, dealer card, usable ace)`` is Markov for the player; a natural (ace + ten
    dealt) only changes the payout of sticking at the start, where sticking is optimal.
    """

    def stick(total: int, dealer: int, is_natural: bool) -> float:
        return sum(
            p * _stick_reward(total, is_natural, score, sab, natural)
            for score, p in _dealer_outcomes(dealer).items()
        )

    @cache
    def hit(total: int, usable: bool, dealer: int) -> float:
        value = 0.0
        for card, p in CARD_PROBS.items():
            hard = total - 10 * usable + card
            ace = usable or (card == 1)
            new_total = _total(hard, ace)
            value += p * (-1.0 if new_total > 21 else best(new_total, new_total != hard, dealer))
        return value

    @cache
    def best(total: int, usable: bool, dealer: int) -> float:
        return max(stick(total, dealer, False), hit(total, usable, dealer))

    policy = {
        (total, dealer, int(usable)): int(hit(total, usable, dealer) > stick(total, dealer, False))
        for total in range(4, 22)
        for dealer in range(1, 11)
        for usable in (False, True)
        if not usable or total >= 12
    }
    start = 0.0
    for c1, p1 in CARD_PROBS.items():
        for c2, p2 in CARD_PROBS.items():
            for dealer, pd in CARD_PROBS.items():
                ace = 1 in (c1, c2)
                total = _total(c1 + c2, ace)
                if {c1, c2} == {1, 10}:
                    value = stick(21, dealer, True)
                else:
                    value = best(total, total != c1 + c2, dealer)
                start += p1 * p2 * pd * value
    return BlackjackSolution(policy, start)


Transitions = dict[int, dict[int, list[tuple[float, int, float, bool]]]]


@dataclass(frozen=True)
class BlackjackMDP:
    """Blackjack (infinite deck) as a tabular MDP in Gymnasium's ``P`` format.

    State ``i`` is the hand ``keys[i] = (player_sum, dealer_card, usable_ace, natural)``;
    ``natural`` marks the dealt ace + ten, which the player sees as ``(21, card, 1)`` but which
    pays differently when sticking. The last state is the absorbing end of the hand (key
    ``None``). ``start`` is the distribution of the dealt hands.
    """

    P: Transitions
    start: np.ndarray
    keys: list[tuple[int, int, int, bool] | None]

    def observation(self, state: int) -> tuple[int, int, int] | None:
        """What ``Blackjack-v1`` shows in ``state``: ``(player_sum, dealer_card, usable_ace)``."""
        key = self.keys[state]
        return None if key is None else key[:3]


def blackjack_mdp(sab: bool = True, natural: bool = False) -> BlackjackMDP:
    """Build ``BlackjackMDP`` for Gymnasium's ``Blackjack-v1`` with these rule flags.

    Example:
        >>> mdp = blackjack_mdp()
        >>> len(mdp.keys), round(float(mdp.start.sum()), 6)
        (291, 1.0)
    """
    starts: dict[tuple[int, int, int, bool], float] = {}
    for c1, p1 in CARD_PROBS.items():
        for c2, p2 in CARD_PROBS.items():
            for dealer, pd in CARD_PROBS.items():
                total = _total(c1 + c2, 1 in (c1, c2))
                key = (total, dealer, int(total != c1 + c2), {c1, c2} == {1, 10})
                starts[key] = starts.get(key, 0.0) + p1 * p2 * pd
    todo = list(starts)
    transitions: dict[tuple[int, int, int, bool], dict[int, list]] = {}
    while todo:
        key = todo.pop()
        if key in transitions:
            continue
        total, dealer, usable, is_natural = key
        stick = [
            (p, -1, _stick_reward(total, is_natural, score, sab, natural), True)
            for score, p in _dealer_outcomes(dealer).items()
        ]
        hit = []
        for card, p in CARD_PROBS.items():
            hard = total - 10 * usable + card
            new_total = _total(hard, bool(usable) or card == 1)
            if new_total > 21:
                hit.append((p, -1, -1.0, True))
                continue
            nxt = (new_total, dealer, int(new_total != hard), False)
            hit.append((p, nxt, 0.0, False))
            todo.append(nxt)
        transitions[key] = {0: stick, 1: hit}
    keys: list[tuple[int, int, int, bool] | None] = sorted(transitions)
    index = {key: i for i, key in enumerate(keys)}
    end = len(keys)
    P: Transitions = {
        index[key]: {
            a: [(p, end if nxt == -1 else index[nxt], r, done) for p, nxt, r, done in outcomes]
            for a, outcomes in actions.items()
        }
        for key, actions in transitions.items()
    }
    P[end] = {a: [(1.0, end, 0.0, True)] for a in (0, 1)}
    start = np.zeros(end + 1)
    for key, p in starts.items():
        start[index[key]] += p
    return BlackjackMDP(P, start, [*keys, None])


def _arrays(P: Transitions) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Dense ``(S, A, S)`` transition probabilities, expected rewards ``(S, A)`` and the
    probability of continuing (not terminating) into each next state ``(S, A, S)``."""
    n_states, n_actions = len(P), len(P[0])
    prob = np.zeros((n_states, n_actions, n_states))
    cont = np.zeros((n_states, n_actions, n_states))
    reward = np.zeros((n_states, n_actions))
    for s, actions in P.items():
        for a, outcomes in actions.items():
            for p, nxt, r, done in outcomes:
                prob[s, a, nxt] += p
                cont[s, a, nxt] += 0.0 if done else p
                reward[s, a] += p * r
    return prob, reward, cont


def value_iteration(
    P: Transitions, gamma: float = 0.99, tol: float = 1e-10, max_iter: int = 100_000
) -> tuple[np.ndarray, np.ndarray]:
    """Optimal state values and a greedy deterministic policy of a tabular MDP given as
    Gymnasium's ``P[s][a] = [(prob, next_state, reward, terminated), ...]``."""
    _, reward, cont = _arrays(P)
    values = np.zeros(len(P))
    for _ in range(max_iter):
        q = reward + gamma * cont @ values
        new = q.max(axis=1)
        done = np.max(np.abs(new - values)) < tol
        values = new
        if done:
            break
    return values, (reward + gamma * cont @ values).argmax(axis=1)


def evaluate_tabular(
    P: Transitions,
    policy: np.ndarray,
    start: Any,
    horizon: int,
    extra_reward: np.ndarray | None = None,
) -> float:
    """Exact expected undiscounted return of a deterministic ``policy`` within ``horizon``
    steps, from the start-state distribution ``start``; ``extra_reward[s]`` is added to every
    step taken in state ``s`` (an invalid-answer penalty)."""
    _, reward, cont = _arrays(P)
    states = np.arange(len(P))
    step_reward, step_cont = reward[states, policy], cont[states, policy]
    if extra_reward is not None:
        step_reward = step_reward + extra_reward
    dist, total = np.asarray(start, dtype=float), 0.0
    for _ in range(horizon):
        total += float(dist @ step_reward)
        dist = dist @ step_cont
    return total


#: Discounts tried by ``solve_tabular``: a smaller one favours shorter paths, which matters
#: under a time limit (FrozenLake 8x8: 0.886 at 0.999, 0.894 at 0.995).
GAMMAS = (0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 0.9999)


def solve_tabular(P: Transitions, start: Any, horizon: int | None) -> tuple[np.ndarray, float]:
    """A deterministic policy by value iteration, with the discount from ``GAMMAS`` that
    maximizes the exact return within ``horizon`` steps (0.99 without a horizon), and that
    return (``nan`` without a horizon)."""
    if horizon is None:
        return value_iteration(P, 0.99)[1], float("nan")
    candidates = [value_iteration(P, gamma)[1] for gamma in GAMMAS]
    scored = [(evaluate_tabular(P, pi, start, horizon), i) for i, pi in enumerate(candidates)]
    value, best = max(scored)
    return candidates[best], value
