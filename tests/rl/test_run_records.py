"""Every record exactly once, whatever was killed when (issue 13, item 7)."""

from __future__ import annotations

import csv
import json
import os
import sys
from collections import Counter
from pathlib import Path

import pytest

from llmgym.rl import checkpoints

sys.path.insert(0, str(Path(__file__).parents[1] / "support"))


def _ckpt(root: Path, i: int) -> Path:
    tmp = root / f"iter_{i:06d}.tmp"
    tmp.mkdir(parents=True)
    (tmp / checkpoints.STATE_FILE).write_text(json.dumps({"iteration": i}))
    checkpoints.commit(tmp, root / f"iter_{i:06d}")
    return root / f"iter_{i:06d}"


@pytest.mark.parametrize("pointer", ["", "iter_00", "iter_000009", "../../etc", "\x00\xff"])
def test_a_broken_pointer_falls_back_to_the_newest_complete_checkpoint(tmp_path, pointer):
    _ckpt(tmp_path, 1)
    _ckpt(tmp_path, 2)
    (tmp_path / "iter_000003.tmp").mkdir()  # a checkpoint killed while being written
    (tmp_path / "latest").write_text(pointer)
    assert checkpoints.latest(tmp_path) == tmp_path / "iter_000002"


def test_the_pointer_is_replaced_atomically(tmp_path, monkeypatch):
    _ckpt(tmp_path, 1)
    calls = []
    real = os.replace
    monkeypatch.setattr(os, "replace", lambda a, b: calls.append((Path(a), Path(b))) or real(a, b))
    _ckpt(tmp_path, 2)
    # a temporary beside the pointer (llmgym.files names it) renamed over it
    assert any(b == tmp_path / "latest" and a.parent == tmp_path for a, b in calls), calls
    assert (tmp_path / "latest").read_text() == "iter_000002"


def test_a_kill_between_aside_and_replace_keeps_the_checkpoint(tmp_path):
    path = _ckpt(tmp_path, 4)
    os.replace(path, path.with_name(path.name + ".old"))  # killed right after the rename aside
    (tmp_path / "iter_000004.tmp").mkdir()
    assert checkpoints.latest(tmp_path) == path
    assert json.loads((path / checkpoints.STATE_FILE).read_text()) == {"iteration": 4}


def test_replacing_a_checkpoint_goes_through_a_rename_aside(tmp_path, monkeypatch):
    path = _ckpt(tmp_path, 4)
    calls = []
    real = os.replace
    monkeypatch.setattr(os, "replace", lambda a, b: calls.append((Path(a), Path(b))) or real(a, b))
    _ckpt(tmp_path, 4)
    assert calls[0] == (path, path.with_name(path.name + ".old"))
    assert not path.with_name(path.name + ".old").exists() and checkpoints.complete(path)


# --- with a trainer (tiny model) ----------------------------------------------------------

pytest.importorskip("torch")
pytest.importorskip("peft")

from bandit import register  # noqa: E402

from llmgym.errors import TrainingError  # noqa: E402
from llmgym.rl import make_trainer  # noqa: E402

CFG = dict(
    model="tiny",
    env_id=register("a"),
    num_envs=16,
    episodes_per_update=16,
    minibatch_size=16,
    eval_episodes=8,
    eval_every=0,
    checkpoint_every=1,
    progress=False,
    num_threads=1,
    total_episodes=16,
)


def _rows(run: Path) -> list[dict]:
    with (run / "metrics.csv").open() as f:
        return list(csv.DictReader(f))


def _keys(rows: list[dict]) -> Counter:
    return Counter((r["env_steps"], frozenset(k for k, v in r.items() if v)) for r in rows)


def test_fresh_run_resume_and_damage(tmp_path):
    run = tmp_path / "run"
    make_trainer("reinforce", output_dir=str(run), **CFG).train()
    first = _rows(run)
    assert max(_keys(first).values()) == 1

    make_trainer("reinforce", output_dir=str(run), **CFG).train()  # fresh run, same --output
    assert len(_rows(run)) == len(first)

    make_trainer("reinforce", output_dir=str(run), **CFG).train(resume=True)  # already done
    assert len(_rows(run)) == len(first) and max(_keys(_rows(run)).values()) == 1

    (run / "checkpoints" / "latest").write_text("iter_0")  # a pointer cut by a kill
    make_trainer("reinforce", output_dir=str(run), **CFG).train(resume=True)
    assert max(_keys(_rows(run)).values()) == 1

    for name in ("model.safetensors", "optimizer.pt", "rng.pt", "trainer_state.json"):
        target = checkpoints.latest(run / "checkpoints") / name
        saved = target.read_bytes()
        target.write_bytes(saved[: len(saved) // 2])
        with pytest.raises(TrainingError) as info:
            make_trainer("reinforce", output_dir=str(run), **CFG).train(resume=True)
        assert "\n" not in str(info.value)
        target.write_bytes(saved)
