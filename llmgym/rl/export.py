"""``llmgym export RUN DIR [--merge]``: a trained run as files other tools load.

- Default: a standard PEFT adapter directory (``adapter_config.json`` +
  ``adapter_model.safetensors``) for the run's base model, loadable by
  ``peft.PeftModel.from_pretrained(base, DIR)`` and by vLLM's ``/v1/load_lora_adapter``.
  Adapters that were merged into the weights during training (a KL reference refreshed
  after the SFT warm start, or REINFORCE's refreshes) are folded in exactly: ``k`` adapters of
  rank ``r`` become one of rank ``k * r`` (their A matrices stacked, their B matrices side by
  side, ``lora_alpha`` scaled by ``k`` so the scale ``alpha / r`` is unchanged).
- ``merge=True``: a merged Hugging Face model directory (``config.json``, ``model.safetensors``,
  the tokenizer) that ``AutoModelForCausalLM.from_pretrained`` and ``vllm serve`` load; the only
  form of a full fine-tune.

Either way ``llmgym_export.json`` records the source run and the policy settings (mode,
prefill, normalization) that make the exported model act as the trained policy did.

A policy with an action head (a learned score on the hidden state, added to the LM's) is
not a language model any more: it cannot be exported, and ``export_run`` says so in one
sentence naming ``--set action_head=false``.

The adapter writer and the folding live in ``llmgym.rl.adapters`` (a trainer acting
through vLLM writes the same adapter after each update).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from llmgym.errors import ExportError
from llmgym.files import atomic_dir

#: Written beside the weights: where they come from and how to act with them.
INFO_FILE = "llmgym_export.json"


def export_run(
    run: str | Path, out: str | Path, *, merge: bool = False, local_base: bool = False
) -> Path:
    """Write run ``run`` (a ``llmgym train`` run directory, checkpoint or policy directory) to
    the new directory ``out``: a PEFT adapter, or with ``merge`` a merged model. Returns ``out``.
    The adapter names its base model by Hub id (loadable on any machine), or with
    ``local_base`` by where it loads from here (the embedded model's converted copy).
    The files are written beside ``out`` and moved in once all are complete: a full disk or a
    read-only folder raises ``OutputError`` and leaves no partial file.
    """
    from llmgym.rl import restore_trainer
    from llmgym.rl.adapters import base_model_hub_id, base_model_path, write_adapter

    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ExportError(f"{out} already exists and is not an empty directory; pass a new one.")
    trainer = restore_trainer(str(run), device="cpu")
    config = trainer.config
    if trainer.policy.head is not None:
        raise ExportError(
            "The run's policy adds an action head on the hidden state to the language model's "
            "scores, which no PEFT adapter or Hugging Face model can hold, so it is not "
            "exportable; train with `--set action_head=false` to get an exportable policy."
        )
    if not merge and not config.optim.train_backbone:
        raise ExportError(
            "The run did not train the language model, so there is no adapter to export; "
            "pass --merge to write the (unchanged) model."
        )
    if not merge and not config.lora.enabled:
        raise ExportError(
            "The run fine-tuned all weights, which no adapter can hold; pass --merge to write "
            "the whole model."
        )
    info = {
        "kind": "merged" if merge else "peft_adapter",
        "run": str(Path(run).resolve()),
        "base_model": config.policy.model,
        "algo": trainer.algo,
        "iteration": trainer.state.iteration,
        "env_steps": trainer.state.env_steps,
        "env_id": config.run.env_id,
        "policy": _acting_fields(config.policy.acting()),
    }
    with atomic_dir(out) as tmp:  # all files or none (OutputError on a full disk)
        if merge:
            _write_merged(trainer, tmp)
        else:
            name = config.policy.model
            base = base_model_path(name) if local_base else base_model_hub_id(name)
            write_adapter(trainer, tmp, base)
        (tmp / INFO_FILE).write_text(json.dumps(info, indent=2))
    return out


def _acting_fields(policy_config: Any) -> dict[str, Any]:
    """How the trained policy acts (its ``PolicyConfig`` without the per-call greedy/seed)."""
    values = dataclasses.asdict(policy_config)
    return {k: v for k, v in values.items() if k not in ("greedy", "seed")}


def _write_merged(trainer: Any, out: Path) -> None:
    model = trainer.model
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()
    out.mkdir(parents=True, exist_ok=True)
    model.eval().save_pretrained(str(out), safe_serialization=True)
    trainer.tokenizer.save_pretrained(str(out))


__all__ = ["INFO_FILE", "ExportError", "export_run"]
