"""The numbers a training iteration logs about its rollouts and its update: returns, lengths,
parse rate, the action histogram (collapse diagnostics), the sampled log-probs, the mean of an
update's per-step stats, and the gap between the log-probs a vLLM server acted with and those
recomputed for the update.

Example:
    >>> mean_stats([{"losses/policy": 1.0}, {"losses/policy": 3.0, "losses/kl": 0.5}])
    {'losses/policy': 2.0, 'losses/kl': 0.5}
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from llmgym.rl.weights import as_list
from llmgym.rollout import Episode

#: Returns varying less than this leave nothing to explain (e.g. a batch of failures whose
#: only non-zero returns are tiny bootstrapped values).
MIN_RETURN_VARIANCE = 1e-8


def explained_variance(returns: Any, values: Any) -> float:
    """``1 - Var(returns - values) / Var(returns)``: 1 for a perfect value function, 0 for a
    constant one, and 0 where the returns do not vary (``MIN_RETURN_VARIANCE``): there is
    nothing to explain, and the ratio would be 0/0 or a float's noise.

    >>> import torch
    >>> round(explained_variance(torch.tensor([0.0, 1.0, 2.0]), torch.tensor([0.0, 1.0, 1.0])), 3)
    0.667
    >>> explained_variance(torch.tensor([0.0, 1e-17, 0.0]), torch.tensor([0.5, 0.5, 0.5]))
    0.0
    """
    var_y = float(returns.var())
    if not var_y > MIN_RETURN_VARIANCE:
        return 0.0
    return 1.0 - float((returns - values).var()) / var_y


def rollout_metrics(episodes: list[Episode]) -> dict[str, Any]:
    """Return, length, parse rate, entropy and the action histogram of a batch of episodes."""
    steps = [s for e in episodes for s in e.steps]
    returns = [e.ret for e in episodes if math.isfinite(e.ret)]
    names: Counter[str] = Counter(s.action for s in steps)
    n_valid = max((s.num_actions for s in steps), default=0)
    top, top_n = names.most_common(1)[0] if names else ("", 0)
    metrics: dict[str, Any] = {
        "charts/episodic_return": float(np.mean(returns)) if returns else float("nan"),
        "charts/episodic_length": float(np.mean([e.length for e in episodes])) if episodes else 0.0,
        "charts/success_rate": float(np.mean([r > 0 for r in returns])) if returns else 0.0,
        "llmgym/parse_rate": float(np.mean([s.parse_ok for s in steps])) if steps else float("nan"),
        "diagnostics/top_action_frac": top_n / max(len(steps), 1),
        "diagnostics/top_action": top,
        "diagnostics/num_valid_actions": n_valid,
    }
    logprobs = [sample_logprob(s.sample) for s in steps]
    logprobs = [lp for lp in logprobs if lp is not None]
    if logprobs:
        metrics["charts/sample_nll"] = -float(np.mean(logprobs))
    return metrics


def eval_metrics(summary: dict[str, Any]) -> dict[str, float]:
    """An evaluation's summary (``EvalResult.summary``) as ``eval/*`` metrics."""
    keys = ("mean_return", "ci95", "success_rate", "parse_rate", "mean_length")
    return {f"eval/{k}": summary[k] for k in keys}


@dataclass
class LoggedSample:
    """What the metrics read of a sample that another process played."""

    logprob: float | None


def sample_logprob(sample: Any) -> float | None:
    """The sampled log-prob of a turn: the chosen candidate's (score mode), the completion's
    summed token log-probs (generate mode), None for a text answer."""
    lp = getattr(sample, "logprob", None)
    if lp is None:
        lps = getattr(sample, "logprobs", None)
        if lps is None:
            return None
        lp = sum(as_list(lps)) if getattr(sample, "candidate_ids", None) is None else None
    return float(lp) if lp is not None else None


def light_copies(episodes: list[Episode]) -> list[Episode]:
    """Copies that keep each step's action, reward, parse result and sampled log-prob, to
    gather from other processes for the metrics."""
    return [
        dataclasses.replace(
            e,
            steps=[
                dataclasses.replace(s, sample=LoggedSample(sample_logprob(s.sample)), info={})
                for s in e.steps
            ],
            final_info={},
        )
        for e in episodes
    ]


def mean_stats(history: list[dict[str, float]]) -> dict[str, float]:
    """Average each stat over the optimizer steps that reported it."""
    keys: list[str] = []
    for h in history:
        keys += [k for k in h if k not in keys]
    return {k: float(np.mean([h[k] for h in history if k in h])) for k in keys}


def logprob_gap(samples: Sequence[Any], outs: Sequence[Any]) -> tuple[float, float]:
    """Mean and largest |acted - recomputed| log-prob over the action tokens of ``samples``:
    per completion token in generate mode, per action (log pi of the chosen candidate) in
    score mode. ``outs``: the trainer's ``recompute(samples)`` (one output per chunk).

    Example:
        >>> import torch
        >>> from types import SimpleNamespace as NS
        >>> samples = [NS(logprobs=[-1.0, -2.0]), NS(logprobs=[-0.5])]
        >>> outs = [NS(logprob=None, token_logprobs=[torch.tensor([-1.1, -2.0]),
        ...                                          torch.tensor([-0.2])])]
        >>> [round(x, 4) for x in logprob_gap(samples, outs)]
        [0.1333, 0.3]
    """
    tokens = [t for out in outs for t in (getattr(out, "token_logprobs", None) or [])]
    if tokens:
        recomputed = [as_list(t.detach().float().cpu()) for t in tokens]
    else:
        recomputed = [[v] for out in outs for v in as_list(out.logprob.detach().float().cpu())]
    gaps = [
        abs(float(a) - float(b))
        for sample, row in zip(samples, recomputed, strict=True)
        for a, b in zip(as_list(sample.logprobs), row, strict=True)
    ]
    return (float(np.mean(gaps)), float(np.max(gaps))) if gaps else (0.0, 0.0)


def collapse_warnings(metrics: dict[str, Any], episodes: list[Episode], kl_warn: float) -> dict:
    """Collapse diagnostics: ``{key: message}`` for one action chosen > 98 % of the time
    (with 30 turns or more; when nothing parses, the fallback action is named as the cause),
    entropy ~0 and a KL to the reference above ``kl_warn``; sets ``diagnostics/collapsed`` in
    ``metrics``.

    Example:
        >>> collapse_warnings({"charts/entropy": 0.001}, [], kl_warn=2.0)
        {'entropy': 'policy entropy fell to 0.0010: exploration has stopped'}
    """
    out = {}
    top = metrics.get("diagnostics/top_action_frac", 0.0)
    n_actions = metrics.get("diagnostics/num_valid_actions", 0)
    collapsed = n_actions > 1 and top > 0.98 and metrics.get("charts/episodic_length", 0) > 0
    metrics["diagnostics/collapsed"] = float(collapsed)
    parse_rate = metrics.get("llmgym/parse_rate")
    if collapsed and sum(e.length for e in episodes) >= 30:
        action = metrics.get("diagnostics/top_action")
        if parse_rate is not None and parse_rate < 0.02:  # the env's fallback, not a choice
            out["collapse"] = (
                f"almost no answer parses (parse rate {parse_rate:.2f}): the env plays its "
                f"fallback {action!r} every turn (raise max_new_tokens, keep the prefill, or "
                "warm start with --sft auto)"
            )
        else:
            out["collapse"] = (
                f"action distribution collapsed: {action!r} is chosen {top:.0%} of the time "
                "(raise the entropy bonus or KL coefficient, or lower the learning rate)"
            )
    entropy = metrics.get("charts/entropy")
    if entropy is not None and entropy < 0.01:
        out["entropy"] = f"policy entropy fell to {entropy:.4f}: exploration has stopped"
    kl = metrics.get("losses/kl")
    if kl is not None and kl > kl_warn:
        out["kl"] = f"KL to the reference ran away ({kl:.2f} > {kl_warn})"
    return out


def eval_line(ev: dict[str, Any]) -> str:
    """One evaluation as a line: ``eval return -0.069 (exact)`` or ``... ± CI (N episodes)``."""
    if ev.get("method") == "exact":
        return f"eval return {ev['mean_return']:.4f} (exact)"
    return f"eval return {ev['mean_return']:.3f} ± {ev['ci95']:.3f} ({ev['episodes']} episodes)"


def progress_bar(enabled: bool, total: int, initial: int) -> Any:
    """The training progress bar (tqdm), or None when off or tqdm is missing."""
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, initial=initial, unit="", desc="training", dynamic_ncols=True)


__all__ = [
    "eval_line",
    "progress_bar",
    "collapse_warnings",
    "eval_metrics",
    "light_copies",
    "logprob_gap",
    "mean_stats",
    "rollout_metrics",
    "sample_logprob",
]
