"""Training in several processes with Accelerate: each process plays its share of the episodes,
the update sums gradients over all of them, and one process writes logs, checkpoints and results.

Launch the same ``llmgym train`` command once per process:

    torchrun --nproc_per_node 2 -m llmgym train Text-Blackjack-v1 ...    # CPU (gloo)
    accelerate launch --num_processes 4 -m llmgym train Text-Blackjack-v1 ...  # 4 GPUs

Every process builds the same model from the same seed and takes the same optimizer steps, so
the weights stay equal without being sent around. What the processes share:

- the episodes of an iteration: seed ``i`` of the global list goes to process ``i mod N``
  (GRPO: whole groups), so ``episodes_per_update`` counts all processes together;
- the statistics of the update, over the global batch: advantage normalization, REINFORCE's
  baseline, GRPO's group means and stds, the action head's feature whitening, the env-step and
  episode counters, and the logged rollout metrics;
- the gradients: each process's loss is its samples' sum divided by the global minibatch size,
  and the gradients are summed, so a step equals the one-process step on the whole minibatch
  (minibatches are cut into the same number of pieces in every process).

One process is the identity of all of this and does not import Accelerate.

Example:
    >>> one = Processes()
    >>> one.num, one.is_main, one.shard([10, 11, 12]), one.sum([2.0, 3.0])
    (1, True, [10, 11, 12], [2.0, 3.0])
    >>> one.mean_std([1.0, 3.0], ddof=1)
    (2.0, 1.4142135623730951)
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from llmgym.errors import TrainingError

#: Accelerate's sharded engines: the trainer keeps a whole model per process instead.
SHARDED = ("DEEPSPEED", "FSDP", "MEGATRON_LM")


def check_data_parallel(accelerator: Any) -> Any:
    """``accelerator``, unless its config asks for a sharded engine (DeepSpeed, FSDP, Megatron),
    which the trainer does not use: it would run as plain data parallelism and the memory the
    user planned for would not be saved, so it is refused in one sentence.

    Example:
        >>> from types import SimpleNamespace
        >>> check_data_parallel(SimpleNamespace(distributed_type="MULTI_GPU")).distributed_type
        'MULTI_GPU'
        >>> check_data_parallel(SimpleNamespace(distributed_type="FSDP"))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        llmgym.errors.TrainingError: Accelerate's FSDP is not supported: llmgym keeps a whole ...
    """
    kind = str(getattr(accelerator.distributed_type, "value", accelerator.distributed_type))
    if kind in SHARDED:
        raise TrainingError(
            f"Accelerate's {kind} is not supported: llmgym keeps a whole model in every process "
            "and sums the gradients itself; launch with a MULTI_GPU or MULTI_CPU config "
            "(accelerate config, or --multi_gpu)."
        )
    return accelerator


class Processes:
    """This process's rank among the training processes and the collective operations the
    trainers need (over ``accelerator``; None: one process, every operation local)."""

    def __init__(self, accelerator: Any = None) -> None:
        self.accelerator = accelerator
        self.num = accelerator.num_processes if accelerator is not None else 1
        self.rank = accelerator.process_index if accelerator is not None else 0

    @classmethod
    def from_environment(cls, cpu: bool) -> Processes:
        """Several processes when launched by ``torchrun`` or ``accelerate launch``
        (``WORLD_SIZE`` > 1), else one."""
        if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
            return cls()
        from accelerate import Accelerator

        return cls(check_data_parallel(Accelerator(cpu=cpu)))

    @property
    def is_main(self) -> bool:
        """Whether this process writes logs, checkpoints and results."""
        return self.rank == 0

    def shard(self, items: Sequence[Any]) -> list[Any]:
        """This process's items: every ``num``-th, starting at its rank."""
        return list(items)[self.rank :: self.num]

    def sum(self, values: Sequence[float]) -> list[float]:
        """Element-wise sums over the processes."""
        if self.num == 1:
            return [float(v) for v in values]
        import torch

        local = torch.tensor([float(v) for v in values], dtype=torch.float64)
        return self.accelerator.reduce(local.to(self.accelerator.device), "sum").tolist()

    def gather(self, items: Sequence[Any]) -> list[Any]:
        """Every process's (picklable) items, in rank order."""
        if self.num == 1:
            return list(items)
        from accelerate.utils import gather_object

        return gather_object(list(items))

    def mean_std(self, values: Sequence[float], ddof: int = 0) -> tuple[float, float]:
        """Mean and standard deviation of the values of all processes together."""
        local = np.asarray(values, dtype=float)
        n, total, squares = self.sum([local.size, local.sum(), np.square(local).sum()])
        if n == 0:
            return math.nan, math.nan
        mean = total / n
        var = max(squares - n * mean * mean, 0.0) / (n - ddof) if n > ddof else math.nan
        return mean, math.sqrt(var)

    def minibatches(self, n: int, size: int, rng: np.random.Generator) -> list[list[int]]:
        """Shuffled minibatches of this process's ``n`` samples. One process: pieces of
        ``size``; several: as many pieces in every process as the global batch has minibatches
        of ``size`` (a piece may be empty), so that every process takes the same steps."""
        order = rng.permutation(n).tolist()
        if self.num == 1:
            return [order[i : i + size] for i in range(0, n, max(1, size))]
        pieces = max(1, math.ceil(self.sum([n])[0] / max(1, size)))
        return [part.tolist() for part in np.array_split(np.asarray(order, dtype=int), pieces)]

    def sum_gradients(self, params: Sequence[Any]) -> None:
        """Replace each parameter's gradient by its sum over the processes (one all-reduce)."""
        if self.num == 1:
            return
        import torch

        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = self.accelerator.reduce(torch.cat([g.reshape(-1) for g in grads]), "sum")
        offset = 0
        for p in params:
            p.grad = flat[offset : offset + p.numel()].view_as(p).clone()
            offset += p.numel()

    def wait(self) -> None:
        """Block until every process gets here (e.g. the main one has written a checkpoint)."""
        if self.num > 1:
            self.accelerator.wait_for_everyone()


__all__ = ["Processes"]
