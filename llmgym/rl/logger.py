"""What a run writes as it goes: one ``metrics.csv`` row per iteration (wide format; columns
grow as new metrics appear), TensorBoard event files, W&B when ``WANDB_PROJECT`` is set, and the
library versions saved with every run.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> run = Path(tempfile.mkdtemp())
    >>> logger = MetricsLogger(run, {}, tensorboard=False)
    >>> logger.log({"charts/episodic_return": 0.123456789}, step=40)
    >>> logger.log({"eval/mean_return": 1.0}, step=80)
    >>> print((run / "metrics.csv").read_text().strip())
    env_steps,charts/episodic_return,eval/mean_return
    40,0.123457,
    80,,1.0
"""

from __future__ import annotations

import csv
import math
import os
import platform
import warnings
from pathlib import Path
from typing import Any


class MetricsLogger:
    """Writes one row per iteration to ``metrics.csv`` (wide format, columns grow as new
    metrics appear), TensorBoard event files, and W&B when ``WANDB_PROJECT`` is set."""

    def __init__(self, run_dir: Path, config: dict[str, Any], tensorboard: bool = True):
        self.path = run_dir / "metrics.csv"
        self.rows: list[dict[str, Any]] = []
        if self.path.exists():
            with self.path.open() as f:
                self.rows = list(csv.DictReader(f))
        self.tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.tb = SummaryWriter(str(run_dir / "tb"))
            except ImportError:  # tensorboard not installed: CSV only
                self.tb = None
        self.wandb = None
        if os.environ.get("WANDB_PROJECT"):
            try:
                import wandb

                self.wandb = wandb.init(
                    project=os.environ["WANDB_PROJECT"], config=config, dir=str(run_dir)
                )
            except ImportError:
                warnings.warn("WANDB_PROJECT is set but wandb is not installed", stacklevel=2)

    def truncate(self, env_steps: int) -> None:
        """Drop rows logged after ``env_steps`` (resuming from an earlier checkpoint)."""
        self.rows = [r for r in self.rows if float(r.get("env_steps", 0)) <= env_steps]
        self._write()

    def log(self, metrics: dict[str, Any], step: int) -> None:
        row = {"env_steps": step} | {k: _scalar(v) for k, v in metrics.items()}
        self.rows.append(row)
        self._write()
        if self.tb is not None:
            for k, v in row.items():
                if k != "env_steps" and isinstance(v, (int, float)) and math.isfinite(v):
                    self.tb.add_scalar(k, v, step)
            self.tb.flush()
        if self.wandb is not None:
            self.wandb.log(row, step=step)

    def _write(self) -> None:
        columns: list[str] = []
        for row in self.rows:
            columns += [k for k in row if k not in columns]
        tmp = self.path.with_suffix(".tmp")
        with tmp.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=columns)
            writer.writeheader()
            writer.writerows(self.rows)
        os.replace(tmp, self.path)

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
        if self.wandb is not None:
            self.wandb.finish()


def _scalar(v: Any) -> Any:
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float):
        return round(v, 6)
    return v


def library_versions() -> dict[str, str]:
    """Versions of the libraries a run depends on (saved with every run)."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version(), "platform": platform.platform()}
    for name in ("llmgym", "torch", "transformers", "peft", "gymnasium", "numpy"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


def machine_description(device: Any = None) -> str:
    """What a run's wall time was measured on: CPU architecture and cores, and the GPU when
    ``device`` is a CUDA device.

    Example:
        >>> "CPU" in machine_description()
        True
    """
    text = f"{platform.machine()} CPU, {os.cpu_count()} cores"
    if device is not None and str(device).startswith("cuda"):
        import torch

        text += f", {torch.cuda.get_device_name(device)}"
    return text


__all__ = ["MetricsLogger", "library_versions", "machine_description"]
