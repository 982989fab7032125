"""Math and reasoning problems from reasoning-gym's procedural generators (offline).

``ReasoningEnv(dataset, config, max_turns)`` serves one problem per episode from any
reasoning-gym dataset (``Text-Arithmetic-v0``: ``basic_arithmetic`` with 2-3 terms of 1-2
digits; ``Text-GSM-v0``: ``gsm_symbolic`` grade-school word problems). The problem is drawn
with the env's ``np_random``, so the same seed gives the same problem.

**Answer formats** (``info["parse"]["method"]``), tried in this order, the last occurrence
winning within each:

- ``json``: a JSON object with an ``answer`` key (or ``action``...), or a bare JSON value;
- ``boxed``: ``\\boxed{...}``;
- ``prose``: a final "the answer is X" / "final answer: X";
- ``fallback``: no answer found; ``ok`` is False and the reward is 0.

When the reference answer is a number, the first number of the extracted text is taken
("42 apples" -> "42"; "1,234" -> "1234"; "20.0" -> "20"). The generator's own verifier then
scores it; the reward is 1.0 for a fully correct answer and 0.0 otherwise (partial credit is
reported in ``info["verifier_score"]``; a verifier that raises scores 0, with the reason in
``info["verifier_error"]``). Nothing is ever evaluated as code: only datasets
whose verifiers never evaluate text are offered (``SAFE_DATASETS``); any other name is
refused with a ``ConfigError`` (a ``ValueError``).

With ``max_turns=1`` (single-step) every answer ends the episode. With ``max_turns > 1``
(``Text-GSM-Stepwise-v0``: 8 turns) a turn without a final answer is an intermediate step
(``method`` is ``"step"``, reward 0): the next observation repeats the problem with the steps
so far; the episode ends at the first answer or, with reward 0, after ``max_turns`` turns.
A turn's text is capped: only its first 3,200 characters can become a step (kept to 800
after collapsing whitespace) and only its last ``MAX_ANSWER_CHARS`` (100,000) are read at
all, the final answer being searched in the last 8,000; so a huge answer costs no more than a
short one.
``info["answer"]`` holds the reference answer from reset on; ``valid_actions`` is ``[]``.
``split="train"`` / ``"test"`` draws only problems of one side of a fixed partition by problem
text (``TEST_SHARE``, 20 %, by a hash of the text): training on ``train`` and evaluating on
``test`` never shows the model an evaluation problem, even where the generator's problem
space is small (``llmgym train`` evaluates a ``split="train"`` run on ``test`` by itself).
Single-step envs name the start of their JSON answer in ``info["answer_prefill"]``
(``{"answer": `` for numbers): a policy that prefills its reply writes it for the model,
which then only has to produce the answer.

Example:
    >>> import pytest; _ = pytest.importorskip("reasoning_gym")
    >>> import gymnasium as gym, llmgym
    >>> env = gym.make("Text-Arithmetic-v0")
    >>> obs, info = env.reset(seed=0)
    >>> *_, reward, terminated, truncated, info = env.step(f"The answer is {info['answer']}.")
    >>> reward, terminated, info["parse"]["method"]
    (1.0, True, 'prose')
"""

from __future__ import annotations

import math
import re
import unicodedata
import zlib
from fractions import Fraction
from typing import Any, SupportsFloat

import gymnasium as gym
from gymnasium import spaces

from llmgym.describers import CHARSET
from llmgym.errors import ConfigError
from llmgym.parsing import MAX_SCAN_CHARS, json_values
from llmgym.wrappers.text_action import MAX_ACTION_CHARS
from llmgym.wrappers.text_observation import MAX_OBSERVATION_CHARS, TextSpace, sanitize

_NUMBER = re.compile(r"[-+]?\d{1,30}(?:\.\d{1,30})?(?:\s*/\s*\d{1,30})?")
_BOXED = re.compile(r"\\boxed\s*\{")
# ``[\s:]*`` rather than ``\s*:?\s*``: adjacent whitespace quantifiers backtrack
# quadratically on a long run of newlines.
_PROSE = re.compile(r"\banswer\s*(?:is|:|=)[\s:]*([^\n]{1,120})", re.IGNORECASE)
_TO_ASCII = {"£": "GBP ", "€": "EUR ", "¥": "JPY ", "×": "*", "÷": "/", "−": "-", "…": "..."}
_STEP_CHARS = 800
#: Share of problem texts on the ``test`` side of the train/test partition.
TEST_SHARE = 0.2
SPLITS = ("all", "train", "test")
#: Longest answer read in full. Longer answers are cut before any work: the final answer is
#: looked for in the last ``MAX_SCAN_CHARS`` characters, a stepwise turn keeps its first
#: ``_STEP_CHARS`` (after collapsing whitespace), so a step costs the same for 4 KB or 1 GB.
MAX_ANSWER_CHARS = 100_000
_ANSWER_FORMAT = (
    'Give the final answer as a JSON object, {"answer": <number>}, or as \\boxed{<number>}, '
    'or end with "The answer is <number>." Answer with a number only, without units.'
)


def to_ascii(text: str) -> str:
    """Problem text in the ASCII charset that observations declare.

    Example:
        >>> to_ascii("He earns £195 “per day” — 3×5")
        'He earns GBP 195 "per day" - 3*5'
    """
    text = "".join(_TO_ASCII.get(c, c) for c in text)
    text = unicodedata.normalize("NFKD", text)
    return "".join(c for c in text if not unicodedata.combining(c)).translate(
        {0x2018: "'", 0x2019: "'", 0x201C: '"', 0x201D: '"', 0x2013: "-", 0x2014: "-"}
    )


def _boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}``, with nested braces."""
    found = None
    for match in _BOXED.finditer(text):
        depth, start = 1, match.end()
        for i in range(start, min(len(text), start + 500)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                found = text[start:i]
                break
    return found


def canonical_number(text: str) -> str | None:
    """A number written in ``text`` (its first), as its shortest exact form; None if none.

    Example:
        >>> canonical_number("about 1,234.50 dollars"), canonical_number("-6/3")
        ('1234.5', '-2')
        >>> canonical_number("none") is None
        True
    """
    match = _NUMBER.search(re.sub(r"(?<=\d),(?=\d{3}\b)", "", text))
    if match is None:
        return None
    try:
        value = Fraction(re.sub(r"\s", "", match.group(0)))
    except ZeroDivisionError:
        return None
    if value.denominator == 1:
        return str(value.numerator)
    as_float = float(value)
    return repr(as_float) if Fraction(repr(as_float)) == value else f"{value}"


def extract_answer(text: str, numeric: bool = True) -> tuple[str | None, str]:
    """The final answer in a model's text and the format it came in (see the module docstring).

    Example:
        >>> extract_answer('so {"answer": "1,024"}')
        ('1024', 'json')
        >>> extract_answer("x = 3 and \\\\boxed{\\\\frac{1}{2}}", numeric=False)
        ('\\\\frac{1}{2}', 'boxed')
        >>> extract_answer("First 3 + 4 = 7. So the answer is 7 apples.")
        ('7', 'prose')
        >>> extract_answer("I am not sure.")
        (None, 'fallback')
    """
    text = text[-MAX_SCAN_CHARS:] if isinstance(text, str) else str(text)
    candidates: list[tuple[str, str]] = [
        (str(value), "json")
        for value in reversed(json_values(text))
        if isinstance(value, (str, int, float)) and not isinstance(value, bool)
    ]
    boxed = _boxed(text)
    if boxed is not None:
        candidates.append((boxed, "boxed"))
    candidates += [(m.group(1), "prose") for m in reversed(list(_PROSE.finditer(text)))]
    for raw, method in candidates:
        answer = canonical_number(raw) if numeric else raw.strip().strip("$*`").rstrip(".").strip()
        if answer:
            return answer, method
    return None, "fallback"


#: reasoning-gym datasets offered by ``ReasoningEnv``: those whose verifier (``score_answer``
#: and everything it calls) never reaches ``eval``, ``exec``, ``compile``, sympy's
#: ``parse_expr``/``sympify`` or ``__import__``, audited on reasoning-gym 0.1.19 by
#: ``verifier_audit.audit`` (93 of 106). Left out: ``binary_matrix``, ``bitwise_arithmetic``,
#: ``countdown``, ``intermediate_integration``, ``n_queens``, ``number_sorting``,
#: ``polynomial_multiplication``, ``propositional_logic``, ``puzzle24``, ``simple_integration``,
#: ``spiral_matrix``, ``string_insertion`` (their verifiers evaluate the answer) and
#: ``composite`` (it delegates to any dataset). A test re-audits the installed version.
SAFE_DATASETS = frozenset(
    {
        "ab",
        "acre",
        "advanced_geometry",
        "aiw",
        "arc_1d",
        "arc_agi",
        "base_conversion",
        "basic_arithmetic",
        "bf",
        "binary_alternation",
        "boxnet",
        "caesar_cipher",
        "calendar_arithmetic",
        "chain_sum",
        "circuit_logic",
        "codeio",
        "coin_flip",
        "color_cube_rotation",
        "complex_arithmetic",
        "count_bits",
        "count_primes",
        "course_schedule",
        "cryptarithm",
        "decimal_arithmetic",
        "decimal_chain_sum",
        "dice",
        "emoji_mystery",
        "family_relationships",
        "figlet_font",
        "fraction_simplification",
        "futoshiki",
        "game_of_life",
        "game_of_life_halting",
        "gcd",
        "graph_color",
        "group_anagrams",
        "gsm_symbolic",
        "isomorphic_strings",
        "jugs",
        "kakurasu",
        "knight_swap",
        "knights_knaves",
        "largest_island",
        "lcm",
        "leg_counting",
        "letter_counting",
        "letter_jumble",
        "list_functions",
        "mahjong_puzzle",
        "manipulate_matrix",
        "maze",
        "mini_sudoku",
        "modulo_grid",
        "needle_haystack",
        "number_filtering",
        "number_format",
        "number_sequence",
        "palindrome_generation",
        "palindrome_partitioning",
        "path_star",
        "polynomial_equations",
        "pool_matrix",
        "power_function",
        "prime_factorization",
        "products",
        "quantum_lock",
        "ransom_note",
        "rearc",
        "rectangle_count",
        "rotate_matrix",
        "rotten_oranges",
        "rubiks_cube",
        "rush_hour",
        "self_reference",
        "sentence_reordering",
        "shortest_path",
        "simple_equations",
        "simple_geometry",
        "sokoban",
        "spell_backward",
        "string_manipulation",
        "string_splitting",
        "string_synthesis",
        "sudoku",
        "survo",
        "syllogism",
        "time_intervals",
        "tower_of_hanoi",
        "tsumego",
        "word_ladder",
        "word_sequence_reversal",
        "word_sorting",
        "zebra_puzzles",
    }
)


def check_dataset(dataset: str) -> None:
    """Raise ``ConfigError`` unless ``dataset`` is in ``SAFE_DATASETS``.

    Example:
        >>> check_dataset("intermediate_integration")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        llmgym.errors.ConfigError: Dataset 'intermediate_integration' is not offered: ...
    """
    if dataset not in SAFE_DATASETS:
        raise ConfigError(
            f"Dataset {dataset!r} is not offered: its reasoning-gym verifier can run answer text "
            "as code; pick one of llmgym.envs.language.math_env.SAFE_DATASETS."
        )


def split_of(problem: str) -> str:
    """The side of the fixed train/test partition a problem text is on (a CRC-32 hash).

    Example:
        >>> split_of("Calculate 0 + 3."), split_of("Calculate 2 + 4.")
        ('test', 'train')
    """
    return "test" if zlib.crc32(problem.encode()) % 1000 < TEST_SHARE * 1000 else "train"


def make_dataset(dataset: str, config: dict[str, Any] | None, seed: int, size: int) -> Any:
    """A reasoning-gym dataset; its items are generated lazily from ``seed`` and the index.
    Only ``SAFE_DATASETS`` are made."""
    check_dataset(dataset)
    import reasoning_gym

    return reasoning_gym.create_dataset(dataset, seed=seed, size=size, **(config or {}))


class ReasoningEnv(gym.Env):
    """One reasoning-gym problem per episode, answered in text (see the module docstring).

    ``dataset_seed`` and ``size`` fix the pool of problems (items 0..size-1 of the dataset
    generated with that seed). ``split`` (``all``, ``train`` or ``test``) keeps only the problems
    on one side of the train/test partition of :func:`split_of`.
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        dataset: str = "basic_arithmetic",
        config: dict[str, Any] | None = None,
        max_turns: int = 1,
        dataset_seed: int = 0,
        size: int = 100_000,
        split: str = "all",
    ) -> None:
        if max_turns < 1:
            raise ConfigError(f"max_turns must be at least 1, not {max_turns}.")
        if split not in SPLITS:
            raise ConfigError(f"split must be one of {', '.join(SPLITS)}, not {split!r}.")
        self.split = split
        self.dataset_name = dataset
        self.max_turns = max_turns
        self.data = make_dataset(dataset, config, dataset_seed, size)
        self.observation_space = TextSpace(MAX_OBSERVATION_CHARS)
        self.action_space = spaces.Text(max_length=MAX_ACTION_CHARS, min_length=0, charset=CHARSET)
        if max_turns == 1:
            task = "Solve the problem. You may reason step by step before answering."
        else:
            task = (
                f"Solve the problem over at most {max_turns} turns. In each turn write the next "
                "step of your solution; a turn that contains a final answer ends the episode, "
                "so give it only when you are done."
            )
        self.system_prompt = f"{task}\n\n{_ANSWER_FORMAT}"
        self._entry: dict[str, Any] = {}
        self._steps: list[str] = []

    @property
    def _numeric(self) -> bool:
        return canonical_number(str(self._entry["answer"])) is not None

    def _info(self) -> dict[str, Any]:
        info = {
            "system_prompt": self.system_prompt,
            "valid_actions": [],
            "raw_obs": self._entry["question"],
            "answer": str(self._entry["answer"]),
            "dataset": self.dataset_name,
        }
        if self.max_turns == 1:  # a stepwise turn must be free to be a step
            info["answer_prefill"] = '{"answer": ' if self._numeric else '{"answer": "'
        return info

    def _problem_text(self) -> str:
        text = to_ascii(self._entry["question"])
        if self.max_turns == 1:
            return sanitize(text)
        lines = [text, ""]
        lines += [f"Step {i}: {step}" for i, step in enumerate(self._steps, 1)]
        turn = len(self._steps) + 1
        lines.append(f"Turn {turn} of {self.max_turns}.")
        return sanitize("\n".join(lines))

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        for _ in range(10_000):  # about 1 / TEST_SHARE draws on the test side
            self._entry = self.data[int(self.np_random.integers(len(self.data)))]
            if self.split in ("all", split_of(self._entry["question"])):
                break
        else:
            raise RuntimeError(f"No {self.split} problem in 10,000 draws: is the pool that small?")
        self._steps = []
        return self._problem_text(), self._info()

    def _score(self, answer: str) -> tuple[float, str | None]:
        """The dataset verifier's score of ``answer`` and, where the verifier raised or gave
        no finite number, why it counts 0 instead (a third-party verifier may choke on text
        it never expected, as boxnet's does on a bare number)."""
        try:
            score = float(self.data.score_answer(answer, self._entry))
        except Exception as error:  # noqa: BLE001 (any verifier bug scores 0, never raises)
            why = " ".join(str(error).split())[:200]
            return 0.0, f"the {self.dataset_name} verifier raised {type(error).__name__}: {why}"
        if not math.isfinite(score):
            return 0.0, f"the {self.dataset_name} verifier gave a non-finite score ({score})"
        return score, None

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        if not self._entry:
            raise RuntimeError("Call reset() before step() on a reasoning env.")
        text = action if isinstance(action, str) else str(action)
        head = text[: 4 * _STEP_CHARS]  # enough for a step of _STEP_CHARS after collapsing
        text = text[-MAX_ANSWER_CHARS:]
        answer, method = extract_answer(text, numeric=self._numeric)
        info = self._info()
        if answer is None and len(self._steps) + 1 < self.max_turns:
            self._steps.append(to_ascii(" ".join(head.split()))[:_STEP_CHARS])
            info["parse"] = {"ok": True, "method": "step", "action": None, "error": None}
            return self._problem_text(), 0.0, False, False, info
        score, why = self._score(answer) if answer is not None else (0.0, None)
        if why is not None:
            info["verifier_error"] = why
        correct = score >= 1.0
        error = None if answer is not None else "no final answer (JSON, \\boxed{} or prose) found"
        info["parse"] = {
            "ok": answer is not None,
            "method": method,
            "action": answer,
            "error": error,
        }
        info["correct"], info["verifier_score"] = correct, score
        if answer is None:
            obs = f"No final answer found. The answer is {info['answer']}."
        elif correct:
            obs = f"Your answer {answer} is correct."
        else:
            obs = f"Your answer {answer} is wrong. The answer is {info['answer']}."
        obs = sanitize(to_ascii(obs))
        return obs, 1.0 if correct else 0.0, True, False, info
