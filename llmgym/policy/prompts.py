"""What the model reads and how an answer is written, independent of any inference engine:
chat messages, the answer start (prefill) and the token ids of each valid action's answer.

Example:
    >>> [m["role"] for m in build_messages("S", "o2", [("o1", "a1")])]
    ['system', 'user', 'assistant', 'user']
    >>> PREFILL + completion_text("hit", prefilled=True)
    '{"action": "hit"}'
    >>> completion_text("hit", prefilled=False)
    '{"action": "hit"}'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

Message = dict[str, str]
#: The answer start written for the model in score mode (and in generate mode by default).
PREFILL = '{"action": "'
THINK_SUFFIX = (
    "\n\nFirst think step by step in at most three short sentences, then end your reply with "
    "the JSON answer on its own line."
)


def build_messages(
    system_prompt: str,
    observation: str,
    turns: Sequence[tuple[str, str]] = (),
    *,
    think: bool = False,
    system_role: bool = True,
) -> list[Message]:
    """Chat messages: system prompt, past (observation, answer) turns, the observation.

    Example:
        >>> build_messages("S", "o", system_role=False)
        [{'role': 'user', 'content': 'S\\n\\no'}]
    """
    system = system_prompt + (THINK_SUFFIX if think else "")
    messages = [{"role": "system", "content": system}]
    for obs, answer in turns:
        messages += [{"role": "user", "content": obs}, {"role": "assistant", "content": answer}]
    messages.append({"role": "user", "content": observation})
    return messages if system_role else without_system_role(messages)


def without_system_role(messages: list[Message]) -> list[Message]:
    """``messages`` for a model without a system role: the system prompt opens the first user
    message (see :func:`build_messages`)."""
    if len(messages) < 2 or messages[0]["role"] != "system":
        return messages
    system, first = messages[0]["content"], messages[1]["content"]
    return [{"role": "user", "content": f"{system}\n\n{first}"}, *messages[2:]]


def completion_text(action: str, prefilled: bool) -> str:
    """The answer naming ``action``, as it continues the prompt: after the prefill, or whole."""
    return f'{action}"}}' if prefilled else f'{{"action": "{action}"}}'


def encode(tokenizer: Any, text: str) -> list[int]:
    """Token ids of ``text`` without special tokens."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def encode_many(tokenizer: Any, texts: Sequence[str]) -> list[list[int]]:
    """Token ids of each of ``texts`` without special tokens, in one tokenizer call (a fast
    tokenizer's batch: the ids :func:`encode` gives each text alone)."""
    if not texts:
        return []
    return [list(ids) for ids in tokenizer(list(texts), add_special_tokens=False)["input_ids"]]


def prompt_and_candidate_ids(
    tokenizer: Any, prompts: Sequence[str], actions: Sequence[Sequence[str]], prefilled: bool
) -> tuple[list[list[int]], list[list[list[int]]]]:
    """Every prompt's ids and, per prompt, each action's answer ids as :func:`candidate_ids`
    gives them, from one tokenizer call over the prompts and the prompt + answer texts (a
    second call only for answers whose joint tokenization changes the prompt's ids).

    Example:
        >>> from llmgym.policy.testing import tiny_tokenizer
        >>> tok = tiny_tokenizer()
        >>> ids, cands = prompt_and_candidate_ids(tok, ["Go: ", "Hi"], [["a", "bc"], []], True)
        >>> ids == [encode(tok, "Go: "), encode(tok, "Hi")]
        True
        >>> cands == [[candidate_ids(tok, "Go: ", ids[0], a, True) for a in ["a", "bc"]], []]
        True
    """
    answers = [[completion_text(a, prefilled) for a in acts] for acts in actions]
    joints = [p + c for p, cs in zip(prompts, answers) for c in cs]
    encoded = encode_many(tokenizer, [*prompts, *joints])
    prompt_ids, joint_ids = encoded[: len(prompts)], iter(encoded[len(prompts) :])
    candidates: list[list[list[int]]] = []
    alone: list[tuple[int, int, str]] = []  # (prompt, answer, text) tokenized on their own
    for b, (ids, cs) in enumerate(zip(prompt_ids, answers)):
        row = []
        for k, completion in enumerate(cs):
            joint = next(joint_ids)
            if joint[: len(ids)] == ids and len(joint) > len(ids):
                row.append(joint[len(ids) :])
            else:
                row.append([])
                alone.append((b, k, completion))
        candidates.append(row)
    for (b, k, _), ids in zip(alone, encode_many(tokenizer, [c for _, _, c in alone])):
        candidates[b][k] = ids
    return prompt_ids, candidates


def candidate_ids(
    tokenizer: Any, prompt: str, prompt_ids: list[int], action: str, prefilled: bool
) -> list[int]:
    """Token ids of the answer naming ``action``, as they continue ``prompt``: tokenized
    together with the prompt when that keeps the prompt's ids, else on their own."""
    completion = completion_text(action, prefilled)
    joint = encode(tokenizer, prompt + completion)
    if joint[: len(prompt_ids)] == prompt_ids and len(joint) > len(prompt_ids):
        return joint[len(prompt_ids) :]
    return encode(tokenizer, completion)


def split_infos(infos: dict[str, Any] | Sequence[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """Per-env info dicts from a vector env's info (a dict of arrays with ``_key`` masks).

    Example:
        >>> infos = {"a": np.array(["x", "y"], dtype=object), "_a": np.array([True, False])}
        >>> split_infos(infos, 2)
        [{'a': 'x'}, {}]
    """
    if not isinstance(infos, dict):
        return list(infos)
    out: list[dict[str, Any]] = [{} for _ in range(n)]
    for key, value in infos.items():
        if key.startswith("_"):
            continue
        mask = infos.get(f"_{key}", np.ones(n, dtype=bool))
        parts = split_infos(value, n) if isinstance(value, dict) else value
        for i in range(n):
            if mask[i]:
                out[i][key] = parts[i]
    return out


__all__ = [
    "split_infos",
    "PREFILL",
    "THINK_SUFFIX",
    "Message",
    "build_messages",
    "candidate_ids",
    "completion_text",
    "encode",
    "encode_many",
    "prompt_and_candidate_ids",
    "without_system_role",
]
