"""The tracked tree fits the GPU machine: at most 64 MiB travel with a call there, tree and
``make gpu-carry``'s payload together; this keeps 8 MiB of headroom (56 MiB), so new weights
and records must fit within it (non-headline seeds keep their records, not their weights)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 56 * 2**20
#: ``make gpu-carry``: the gymnasium and farama-notifications wheels (~1 MB) and the embedded
#: model's config and tokenizer (tokenizer.json 3.5 MB), rounded up.
CARRY = 5 * 2**20


def test_the_tracked_tree_and_the_gpu_carry_fit_in_56_mib():
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    paths = [ROOT / p for p in listed.stdout.decode().split("\0") if p]
    size = sum(p.stat().st_size for p in paths if p.is_file())
    assert size + CARRY <= LIMIT, f"{size / 2**20:.1f} MiB tracked + 5 MiB carry > 56 MiB"
