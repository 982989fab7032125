"""Run-directory bookkeeping that survives a kill at any point: checkpoints, the ``latest``
pointer and metrics rows, each recorded exactly once.

- A checkpoint is written into ``iter_N.tmp`` and renamed into place. Replacing an existing
  ``iter_N`` renames it aside to ``iter_N.old`` first, so some complete copy exists at every
  instant; ``recover`` puts an orphaned ``.old`` back.
- ``checkpoints/latest`` is written to a temporary file and renamed over the old pointer. A
  pointer that is missing, garbled or names an incomplete checkpoint falls back to the newest
  complete one.
- Metrics rows are appended to ``metrics.jsonl`` one whole line at a time (``metrics.csv`` is
  derived from it); a line cut by a kill is dropped on read and cut off before the next append.
  Rows are logged before the checkpoint of their step, and a resume drops the rows past its
  checkpoint (``MetricsLogger.truncate``).
- A fresh run into an existing directory starts new metrics files and moves old
  checkpoints to ``checkpoints.previous``; ``log_once`` replaces a row that a resumed run logs
  again (same env step, same columns) instead of appending a duplicate, in one atomic rewrite.

Example:
    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> for i in (1, 2):
    ...     tmp = root / f"iter_{i:06d}.tmp"; tmp.mkdir()
    ...     _ = (tmp / STATE_FILE).write_text("{}")
    ...     commit(tmp, root / f"iter_{i:06d}")
    >>> latest(root).name
    'iter_000002'
    >>> _ = (root / "latest").write_text("iter_0000")  # a pointer cut short by a kill
    >>> latest(root).name
    'iter_000002'
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

from llmgym.errors import TrainingError
from llmgym.files import write_text

#: Written last into every checkpoint; a folder without a readable one is incomplete.
STATE_FILE = "trainer_state.json"
POINTER = "latest"
BEST_POLICY = "best_policy"  # the run's best-evaluated policy (Checkpointer.keep_if_best)
_ITER = re.compile(r"iter_(\d+)")


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that a reader sees the old or the new content, never
    part of it (``llmgym.files.write_text``: ``OutputError`` on a full disk, nothing left)."""
    write_text(path, text)


def check_contained(folder: Path, root: Path | None = None) -> None:
    """Raise ``TrainingError`` unless what llmgym would load from the checkpoint or policy
    folder ``folder`` lies inside it: no entry may be a symbolic link that leads out of the
    folder (weights swapped in from elsewhere), and with ``root`` (the run directory it was
    found in) the folder itself must lie inside ``root``.

    Example:
        >>> import tempfile
        >>> folder, outside = Path(tempfile.mkdtemp()), Path(tempfile.mkdtemp())
        >>> _ = (outside / "model.safetensors").write_text("x")
        >>> (folder / "model.safetensors").symlink_to(outside / "model.safetensors")
        >>> try:
        ...     check_contained(folder)
        ... except TrainingError as error:
        ...     print("links outside its folder" in str(error))
        True
    """
    real = folder.resolve()
    if root is not None and not real.is_relative_to(root.resolve()):
        raise TrainingError(
            f"{folder} leads outside its run directory {root} (to {real}); llmgym loads only "
            "checkpoints inside the run: copy it in."
        )
    if not folder.is_dir():
        return
    for entry in folder.iterdir():
        if entry.is_symlink() and not entry.resolve().is_relative_to(real):
            raise TrainingError(
                f"{entry} links outside its folder (to {entry.resolve()}); llmgym loads only "
                "files inside a checkpoint or policy directory: copy the file in."
            )


def complete(path: Path) -> bool:
    """Whether ``path`` is a whole checkpoint (its state file parses)."""
    try:
        json.loads((path / STATE_FILE).read_text())
    except (OSError, ValueError):
        return False
    return _ITER.fullmatch(path.name) is not None


def recover(ckpt_dir: Path) -> None:
    """Finish what a kill interrupted: put back an ``iter_N.old`` whose replacement never
    arrived, drop one whose replacement did, and drop half-written ``.tmp`` folders."""
    if not ckpt_dir.is_dir():
        return
    for old in ckpt_dir.glob("iter_*.old"):
        target = old.with_suffix("")
        if complete(target):
            shutil.rmtree(old, ignore_errors=True)
        else:
            if target.exists():
                shutil.rmtree(target, ignore_errors=True)
            os.replace(old, target)


def commit(tmp: Path, path: Path) -> None:
    """Move the finished checkpoint ``tmp`` to ``path`` (replacing it by rename-aside) and
    point ``latest`` at it."""
    old = path.with_name(path.name + ".old")
    if path.exists():
        if old.exists():
            shutil.rmtree(old)
        os.replace(path, old)
    os.replace(tmp, path)
    if old.exists():
        shutil.rmtree(old)
    write_atomic(path.parent / POINTER, path.name)


def latest(ckpt_dir: Path) -> Path | None:
    """The checkpoint ``latest`` names if it is complete, else the newest complete one."""
    recover(ckpt_dir)
    try:
        named = ckpt_dir / (ckpt_dir / POINTER).read_text().strip()
        if named.parent == ckpt_dir and complete(named):
            return named
    except (OSError, ValueError):
        pass
    found = [p for p in ckpt_dir.glob("iter_*") if complete(p)] if ckpt_dir.is_dir() else []
    return max(found, key=lambda p: int(p.name[5:]), default=None)


def start_fresh(run_dir: Path) -> None:
    """A new run in ``run_dir``: no old metrics rows or best policy, old checkpoints moved
    aside (to ``checkpoints.previous``) so that ``--resume`` cannot pick them up."""
    (run_dir / "metrics.csv").unlink(missing_ok=True)
    (run_dir / "metrics.jsonl").unlink(missing_ok=True)  # the record; metrics.csv is its view
    shutil.rmtree(run_dir / BEST_POLICY, ignore_errors=True)
    ckpts = run_dir / "checkpoints"
    if ckpts.exists():
        previous = run_dir / "checkpoints.previous"
        if previous.exists():
            shutil.rmtree(previous)
        os.replace(ckpts, previous)


def log_once(logger: Any, metrics: dict[str, Any], step: int) -> None:
    """``logger.log`` unless a row with the same env step and columns exists (a resumed run
    logging its final evaluation again): then that row is replaced, in the same atomic rewrite
    that records the new one."""
    columns = {"env_steps", *metrics}
    for i, row in enumerate(logger.rows):
        same_step = str(row.get("env_steps")) == str(step)
        if same_step and {k for k, v in row.items() if v not in ("", None)} == columns:
            logger.log(metrics, step, replaces=i)
            return
    logger.log(metrics, step)


#: What a resume keeps from the run and refuses to change: key of ``flat_view`` -> its option.
RUN_IDENTITY = {"env_id": "env", "env_kwargs": "--env-kwarg", "model": "--model"}


def saved_config(run_dir: str | Path) -> dict[str, Any] | None:
    """The config run ``run_dir`` trained with, ``algo`` included: its ``run.json``'s, else its
    newest checkpoint's ``config.json`` (None where it has neither). Raises ``TrainingError``
    when the file is damaged."""
    from llmgym.rl.algorithms import legacy_algo

    run_dir = Path(run_dir)
    path = run_dir / "run.json"
    if not path.exists():
        ckpt = latest(run_dir / "checkpoints")
        path = ckpt / "config.json" if ckpt is not None else path
    if not path.exists():
        return None
    try:
        info = json.loads(path.read_text())
        config = info["config"] if path.name == "run.json" else info
        if not isinstance(config, dict):
            raise TypeError(type(config).__name__)
        algo = info.get("algo") or config.get("algo")
        if algo:  # a run of PPO with q_critic=true is a run of qac
            algo, config = legacy_algo(algo, config)
        return config | ({"algo": algo} if algo else {})
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        raise TrainingError(f"{path} is damaged; resume another run or start afresh.") from None


def check_resume(run_dir: str | Path, saved: dict[str, Any], asked: dict[str, Any]) -> None:
    """Refuse, in one sentence naming the difference, to resume run ``run_dir`` (which trained
    with config ``saved``) as another env, env keywords, model or algorithm: ``asked`` holds
    what the user gave (``env_id``, ``env_kwargs``, ``model``, ``algo``; absent: the run's own).

    Example:
        >>> saved = {"run": {"env_id": "Text-Blackjack-v1"}, "policy": {"model": "tiny"}}
        >>> check_resume("runs/bj", saved, {"env_id": "Text-Blackjack-v1", "model": "tiny"})
        >>> try:
        ...     check_resume("runs/bj", saved, {"env_id": "Text-FrozenLake-v1"})
        ... except TrainingError as error:
        ...     print(error)  # doctest: +NORMALIZE_WHITESPACE
        The run in runs/bj trained in Text-Blackjack-v1, not Text-FrozenLake-v1; resume it as
        `llmgym train Text-Blackjack-v1 ... --resume`, or pass another --output to start a new
        run.
    """
    from llmgym.rl.config import flat_view

    flat = flat_view({k: v for k, v in saved.items() if k != "algo"})
    was = {key: flat.get(key) for key in RUN_IDENTITY} | {"algo": saved.get("algo")}
    was["env_kwargs"] = was["env_kwargs"] or {}
    for key, option in (RUN_IDENTITY | {"algo": "--algo"}).items():
        if key not in asked or was[key] is None:  # a run saved without it
            continue
        if asked[key] != was[key] and (key != "env_kwargs" or asked[key]):
            own = f"as `llmgym train {was[key]} ... --resume`"
            if key != "env_id":
                own = f"without {option} (it keeps its own)"
            raise TrainingError(
                f"The run in {run_dir} trained {_label(key)} {_shown(was[key])}, not "
                f"{_shown(asked[key])}; resume it {own}, or pass another --output to start a "
                "new run."
            )


def not_applied(saved: dict[str, Any], asked: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The settings in ``asked`` (keys flat or dotted) that differ from run ``saved``'s own,
    which a resume keeps: key -> (asked, the run's).

    Example:
        >>> saved = {"optim": {"learning_rate": 0.003}, "gamma": 0.99}
        >>> not_applied(saved, {"optim.learning_rate": 1e-4, "gamma": 0.99})
        {'optim.learning_rate': (0.0001, 0.003)}
    """
    from llmgym.rl.config import canonical_key, flat_view

    own = {canonical_key(k): v for k, v in flat_view(saved).items()}
    return {
        key: (value, own[canonical_key(key)])
        for key, value in asked.items()
        if own.get(canonical_key(key), value) != value
    }


def _label(key: str) -> str:
    return {"env_id": "in", "env_kwargs": "with env kwargs", "algo": "with"}.get(key, key)


def _shown(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={json.dumps(v)}" for k, v in value.items()) or "none"
    return str(value)
