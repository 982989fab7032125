"""Resume is exact (issue 52, item 5): a run killed after a checkpoint and resumed logs the
same metrics, digit for digit, as the run that was never interrupted. Kept states (the frozen
trunk's, the cached prefix, memoised features) hold floats that depend on the batches they were
computed in; the newest checkpoint holds them (``LLMPolicy.kept_state``, ``memo_state``) and a
resumed run reads them back, so a checkpoint changes nothing in the run either."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

pytest.importorskip("peft")

from llmgym.rl import make_trainer  # noqa: E402

#: The Q-critic LM-alone recipe's shape on the tiny model: LoRA on the top layer only, so
#: the frozen trunk's states are kept across calls.
QAC = dict(
    model="tiny", env_id="Text-Blackjack-v1", num_envs=8, episodes_per_update=16,
    minibatch_size=8, learning_rate=3e-3, eval_episodes=8, eval_every=0, checkpoint_every=1,
    progress=False, num_threads=1, total_episodes=48, total_env_steps=10**6,
    action_head=False, q_window=40, q_step=3.0, q_ridge=0.0, head_layers=[1],
    update_epochs=1, gae_lambda=1.0, lora_layers=1, anneal_lr=True, average_decay=0.9,
    target_kl=None,
)  # fmt: skip


def _rows(run: Path) -> list[dict[str, str]]:
    with (run / "metrics.csv").open() as f:
        rows = [r for r in csv.DictReader(f) if r.get("iteration")]
    return [{k: v for k, v in r.items() if not k.startswith("perf/")} for r in rows]


def test_a_run_killed_after_a_checkpoint_resumes_to_the_same_metrics(tmp_path):
    full = make_trainer("qac", output_dir=str(tmp_path / "full"), **{"eval.start": False}, **QAC)
    full.train()
    killed = make_trainer(
        "qac", output_dir=str(tmp_path / "killed"), **{"eval.start": False}, **QAC
    )
    run_iteration = killed.run_iteration

    def then_killed(pbar=None):
        run_iteration(pbar)  # the update and its checkpoint
        raise KeyboardInterrupt

    killed.run_iteration = then_killed
    with pytest.raises(KeyboardInterrupt):
        killed.train()
    resumed = make_trainer(
        "qac", output_dir=str(tmp_path / "killed"), **{"eval.start": False}, **QAC
    )
    assert resumed.policy.backend.trunk is not None
    resumed.train(resume=True)
    assert resumed.policy.backend.trunk.store.entries, "the frozen trunk's fast path ran"
    assert _rows(tmp_path / "killed") == _rows(tmp_path / "full")


#: A head on the frozen tiny model (its features memoised), checkpointed after every update.
HEAD = dict(
    model="tiny", env_id="Text-FrozenLake-v1", num_envs=8, episodes_per_update=8,
    eval_episodes=8, eval_every=0, checkpoint_every=1, progress=False, num_threads=1,
    total_episodes=24, total_env_steps=10**6, action_head=True, train_backbone=False,
    update_epochs=2,
)  # fmt: skip


def test_a_head_run_resumes_with_its_memoised_features_to_the_same_metrics(tmp_path):
    """The memoised features survive a checkpoint (the newest checkpoint holds them) instead
    of being computed again in other batches, so the resumed run logs the same metrics."""
    from llmgym.rl.checkpointing import MEMO_FILE

    full = make_trainer("ppo", output_dir=str(tmp_path / "full"), **{"eval.start": False}, **HEAD)
    full.train()
    killed = make_trainer(
        "ppo", output_dir=str(tmp_path / "killed"), **{"eval.start": False}, **HEAD
    )
    run_iteration = killed.run_iteration
    calls = []

    def then_killed(pbar=None):
        run_iteration(pbar)
        calls.append(1)
        if len(calls) == 2:  # two updates and their checkpoints
            raise KeyboardInterrupt

    killed.run_iteration = then_killed
    with pytest.raises(KeyboardInterrupt):
        killed.train()
    saved = sorted((tmp_path / "killed" / "checkpoints").glob(f"iter_*/{MEMO_FILE}"))
    assert [p.parent.name for p in saved] == ["iter_000002"], "the newest checkpoint only"
    resumed = make_trainer(
        "ppo", output_dir=str(tmp_path / "killed"), **{"eval.start": False}, **HEAD
    )
    assert resumed.policy.memoize
    resumed.load_checkpoint()
    kept = len(resumed.policy._memo)
    assert kept == len(killed.policy._memo) > 0
    resumed = make_trainer(
        "ppo", output_dir=str(tmp_path / "killed"), **{"eval.start": False}, **HEAD
    )
    resumed.train(resume=True)
    assert _rows(tmp_path / "killed") == _rows(tmp_path / "full")


@pytest.mark.parametrize("eval_every", [0, 1])
@pytest.mark.parametrize("algo", ["qac", "ppo"])
def test_checkpoints_change_nothing_in_a_run(tmp_path, algo, eval_every):
    """The same run with a checkpoint after every update and with none logs the same metrics:
    LoRA over the frozen trunk (``qac``) and a head on the frozen model (``ppo``), with an
    exact evaluation after every update or none (acting reuses its rows under the same
    weights). Before the checkpoint held the kept states, each checkpoint made the run forget
    them, and the arithmetic changed with ``checkpoint_every`` (issue 51, item 5)."""
    from llmgym.rl.checkpointing import KEPT_FILE

    config = (QAC if algo == "qac" else HEAD) | {"eval_every": eval_every}
    config |= {"total_episodes": 4 * config["episodes_per_update"]}
    config.pop("checkpoint_every")
    runs = {}
    for every in (1, 0):
        run = tmp_path / f"every{every}"
        trainer = make_trainer(
            algo, output_dir=str(run), checkpoint_every=every, **{"eval.start": False}, **config
        )
        trainer.train()
        runs[every] = _rows(run)
    saved = sorted((tmp_path / "every1" / "checkpoints").glob(f"iter_*/{KEPT_FILE}"))
    assert [p.parent.name for p in saved] == ["iter_000004"], "the newest checkpoint only"
    assert len(runs[1]) == 5  # 4 updates and the final evaluation
    assert runs[1] == runs[0]
