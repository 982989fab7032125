"""A critic of every valid action, and the actor step it gives (``--algo qac``).

The clipped surrogate moves a state's scores by ``pi(a|s) A(s,a)``: once an action has become
unlikely in a state, nothing moves it back, however good it is there. On Blackjack with the
language model alone (no action head) even the *exact* policy gradient, with no sampling
noise, drove every state to "stick" within 6 full-batch AdamW steps and stayed there
(``experiments/lm_exact_pg.py``; docs/results/research-notes.md). The Q-critic instead scores
every valid action of a visited state, ``Q(s, a)``, so the actor can be moved by each state's
Q-values themselves: in each visited state it is fitted by cross-entropy to
``softmax(log pi_old + step * c)``, ``c`` the critic's Q-values centred over the state's actions
and scaled over the batch. That is the tabular natural policy gradient's step (Kakade 2001;
Agarwal et al. 2021), as MPO and MDPO take it: it moves an unlikely action as much as a likely
one, and it is bounded, however many epochs fit it. (Moving the scores by ``c`` alone, with no
bound, collapsed Blackjack to "stick" in 15 updates.)

The critic is bilinear in whitened state features and the actions' fixed embeddings, as the
action head is, so it takes any number of actions per state::

    >>> import torch
    >>> critic = QCritic(hidden_size=4, embed_size=3)
    >>> critic(torch.randn(2, 4), torch.randn(2, 2, 3)).shape  # zero-initialised
    torch.Size([2, 2])
    >>> q = [torch.tensor([1.0, 3.0]), torch.tensor([0.0, 0.0, 3.0])]
    >>> [[round(c, 2) for c in row.tolist()] for row in centred_q(q)]
    [[-0.79, 0.79], [-0.79, -0.79, 1.58]]
    >>> uniform = [torch.log(torch.full((2,), 0.5)), torch.log(torch.full((3,), 1 / 3))]
    >>> [[round(p, 2) for p in row.tolist()] for row in actor_targets(q, uniform, step=1.0)]
    [[0.17, 0.83], [0.08, 0.08, 0.84]]
"""

from __future__ import annotations

import torch

from llmgym.policy.action_head import ActionHead


class QCritic(ActionHead):
    """``Q(s, a)`` for each candidate: the action head's bilinear form on its own whitened
    features (``forward(hidden [B, H], action_embeddings [B, K, E]) -> [B, K]``)."""

    def __init__(self, hidden_size: int, embed_size: int, whiten_eps: float = 0.3) -> None:
        super().__init__(hidden_size, embed_size, whiten_eps, lm_prior=False)

    def forward(self, hidden: torch.Tensor, action_embeddings: torch.Tensor) -> torch.Tensor:
        return super().forward(self.whitener(hidden), action_embeddings)


def fit_least_squares(
    critic: QCritic,
    features: torch.Tensor,
    actions: list[str],
    targets: torch.Tensor,
    embeddings: dict[str, torch.Tensor],
    ridge: float = 1.0,
) -> None:
    """Set ``critic`` to the ridge least-squares fit of ``targets`` [N] (the returns of the
    actions taken) on its whitened ``features`` [N, F], one linear map per action, then the one
    bilinear weight that gives each action's map through its embedding (exact while the
    actions' embeddings are linearly independent).

    >>> critic = QCritic(hidden_size=3, embed_size=2)
    >>> critic.whitener.update(torch.eye(3)); critic.whitener.refresh()
    >>> x = torch.eye(3).repeat(20, 1)
    >>> acts = ["a", "b", "a"] * 20
    >>> emb = {"a": torch.tensor([1.0, 0.0]), "b": torch.tensor([0.0, 1.0])}
    >>> fit_least_squares(critic, x, acts, torch.tensor([1.0, -1.0, 0.0] * 20), emb, ridge=1e-4)
    >>> q = critic(x[:3], torch.stack([emb["a"], emb["b"]])[None].expand(3, 2, 2))
    >>> [round(q[s, k].item(), 2) for s, k in ((0, 0), (2, 0), (1, 1))]  # the pairs taken
    [1.0, 0.0, -1.0]
    """
    with torch.no_grad():
        x = critic.whitener(features.to(critic.weight.device))
        x = torch.cat([x, torch.ones_like(x[:, :1])], dim=-1).double()
        y = targets.to(x.device).double()
        names = sorted(set(actions))
        maps = []
        for name in names:
            rows = torch.tensor([a == name for a in actions], device=x.device)
            maps.append(ridge_fit(x[rows], y[rows], ridge))
        per_action = torch.stack(maps, dim=1)  # [F + 1, A]
        emb = torch.stack([embeddings[name] for name in names]).double().to(x.device)  # [A, E]
        critic.weight.copy_((per_action @ torch.linalg.pinv(emb.T)).to(critic.weight.dtype))


#: The penalties ``ridge_fit`` chooses among with ``ridge=0``.
RIDGE_GRID = (1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0, 3000.0)


def ridge_fit(x: torch.Tensor, y: torch.Tensor, ridge: float) -> torch.Tensor:
    """The ridge regression weights [F] of ``y`` [N] on ``x`` [N, F]; ``ridge=0`` takes the
    penalty in ``RIDGE_GRID`` of least generalized cross-validation error (Golub, Heath and
    Wahba 1979: leave-one-out's closed-form approximation), as scikit-learn's ``RidgeCV`` does.
    On Blackjack's noisy returns a fixed small penalty overfits a few hundred samples.

    >>> x = torch.randn(200, 50, dtype=torch.float64)
    >>> y = x[:, 0] + torch.randn(200, dtype=torch.float64)
    >>> w_auto, w_1 = ridge_fit(x, y, 0.0), ridge_fit(x, y, 1.0)
    >>> bool(w_auto[1:].norm() < w_1[1:].norm())  # shrinks the noise harder
    True
    """
    if ridge > 0:
        eye = ridge * torch.eye(x.shape[1], dtype=x.dtype, device=x.device)
        return torch.linalg.solve(x.T @ x + eye, x.T @ y)
    u, s, _ = torch.linalg.svd(x, full_matrices=False)
    uy = u.T @ y
    best = None
    for penalty in RIDGE_GRID:
        shrink = s**2 / (s**2 + penalty)
        residual = (y - u @ (shrink * uy)).pow(2).mean()
        gcv = float(residual / (1 - shrink.sum() / len(y)).clamp(min=1e-6) ** 2)
        if best is None or gcv < best[0]:
            best = (gcv, penalty)
    return ridge_fit(x, y, best[1])


def centred_q(q_rows: list[torch.Tensor], scale: float | None = None) -> list[torch.Tensor]:
    """Per state, the critic's Q-values centred over its actions, all divided by their root
    mean square over the batch (scale-free, as normalised advantages are), or by ``scale``
    (the whole batch's, where several processes each hold a share); zeros while the critic is
    flat."""
    centred = [q.float() - q.float().mean() for q in q_rows]
    if scale is None:
        entries = torch.cat(centred) if centred else torch.zeros(0)
        scale = float(entries.pow(2).mean().sqrt()) if len(entries) else 0.0
    return [c / scale if scale > 1e-8 else torch.zeros_like(c) for c in centred]


def centred_squares(q_rows: list[torch.Tensor]) -> tuple[int, float]:
    """(the number of entries, the sum of their squares) of the centred Q-values: a share of
    the batch's root mean square that processes add up."""
    centred = [q.float() - q.float().mean() for q in q_rows]
    return sum(len(c) for c in centred), float(sum(c.pow(2).sum() for c in centred))


def actor_targets(
    q_rows: list[torch.Tensor],
    old_logprobs: list[torch.Tensor],
    step: float,
    kind: str = "mirror",
    scale: float | None = None,
) -> list[torch.Tensor]:
    """Per state, the distribution the actor is fitted to (by cross-entropy). ``mirror``:
    ``softmax(log pi_old + step * centred_q)``, the mirror-descent step of the policy in each
    state (the tabular natural gradient's; MPO's and MDPO's improved policy), bounded however
    long the actor trains on it, and moving an unlikely action as much as a likely one.
    ``softmax``: ``softmax(step * centred_q)``, the critic's own Boltzmann policy, which a
    state's policy reaches and then stays at, whatever the rollout policy was. ``scale``: see
    :func:`centred_q`.

    >>> q, old = [torch.tensor([0.0, 1.0])], [torch.log(torch.tensor([0.9, 0.1]))]
    >>> [round(p, 2) for p in actor_targets(q, old, step=1.0)[0].tolist()]
    [0.55, 0.45]
    >>> [round(p, 2) for p in actor_targets(q, old, step=1.0, kind="softmax")[0].tolist()]
    [0.12, 0.88]
    """
    rows = centred_q(q_rows, scale)
    if kind == "softmax":
        return [torch.softmax(step * c.to(lp.device), -1) for lp, c in zip(old_logprobs, rows)]
    return [
        torch.softmax(lp.float() + step * c.to(lp.device), -1) for lp, c in zip(old_logprobs, rows)
    ]


__all__ = [
    "RIDGE_GRID",
    "QCritic",
    "actor_targets",
    "centred_q",
    "centred_squares",
    "fit_least_squares",
    "ridge_fit",
]
