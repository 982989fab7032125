import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmgym.parsing import parse_box, parse_discrete

NAMES = ["LEFT", "RIGHT"]
BJ = ["stick", "hit"]


@pytest.mark.parametrize(
    ("text", "names", "method", "action"),
    [
        ('{"action": "RIGHT"}', NAMES, "json", 1),
        ('{"Action": "right"}', NAMES, "json", 1),
        ('{"move": "LEFT"}', NAMES, "json", 0),
        ('{"command": "hit"}', BJ, "json", 1),
        ('{"action": 1}', NAMES, "json", 1),
        ('{"action": "1"}', NAMES, "json", 1),
        ('```json\n{"action": "hit"}\n```', BJ, "json", 1),
        ('I will stick. Final: {"action": "hit"} done', BJ, "json", 1),
        ('{"action": "LEFT"} then {"action": "RIGHT"}', NAMES, "json", 1),
        ('{"action": 3}', ["1", "2", "3"], "json", 2),  # an integer that is a name
        ("Action: stick", BJ, "regex", 0),
        ("action = RIGHT", NAMES, "regex", 1),
        ("**Action:** hit", BJ, "regex", 1),
        ("I think LEFT is risky, so RIGHT.", NAMES, "regex", 1),  # last mention wins
        ("right", NAMES, "regex", 1),
        ("RIGHTT", NAMES, "fuzzy", 1),
        ("stik", BJ, "fuzzy", 0),
    ],
)
def test_discrete_layers(text, names, method, action):
    result = parse_discrete(text, names)
    assert (result.ok, result.method, result.action) == (True, method, action)


def test_json_value_not_a_name_falls_through_to_regex():
    result = parse_discrete('{"action": "jump"} ... ok then, Action: hit', BJ)
    assert (result.method, result.action) == ("regex", 1)


def test_word_boundaries_do_not_match_inside_words():
    # "hit" inside "white" and "stick" inside "sticky" are not mentions.
    result = parse_discrete("a white sticky note", BJ)
    assert result.method != "regex"


@pytest.mark.parametrize("text", ["", "   ", "banana", "{", '{"action": null}', "42"])
def test_discrete_fallback(text):
    result = parse_discrete(text, BJ)
    assert (result.ok, result.method, result.action) == (False, "fallback", 0)
    assert result.error


def test_box_formats_and_clipping():
    assert parse_box('{"action": [0.5]}', [-1.0], [1.0]).action.tolist() == [0.5]
    assert parse_box('{"action": 0.25}', [-1.0], [1.0]).method == "json"
    assert parse_box("Action: -0.75", [-1.0], [1.0]).action.tolist() == [-0.75]
    prose = parse_box("I'd apply a torque of about 1.5 here", [-2.0], [2.0])
    assert (prose.method, prose.action.tolist()) == ("regex", [1.5])
    clipped = parse_box("[9, -9]", [-2.0, -2.0], [2.0, 2.0])
    assert clipped.clipped and clipped.action.tolist() == [2.0, -2.0] and clipped.ok
    assert parse_box("[1e999]", [-1.0], [1.0]).method == "fallback"  # inf is not a number
    assert parse_box("[2.6, 0.4]", [0, 0], [3, 1], integer=True).action.tolist() == [3.0, 0.0]


def test_box_wrong_arity_falls_back():
    result = parse_box('{"action": [1, 2, 3]}', [-1.0, -1.0], [1.0, 1.0])
    assert result.method in {"regex", "fallback"}
    assert result.action.shape == (2,)


def _deep(n: int) -> str:
    return "[" * n + "]" * n


@pytest.mark.parametrize(
    "text",
    [
        _deep(100_000),
        '{"action": ' * 50_000,
        "{" * 100_000,
        "LEFT" * 100_000,
        "x" * 1_000_000 + "RIGHT",
        "\x00\ud7ff\uffff" * 1000,
        "9" * 10_000,
        json.dumps({"action": {"nested": [1, 2, {"a": "RIGHT"}]}}),
    ],
)
def test_pathological_inputs_never_raise(text):
    result = parse_discrete(text, NAMES)
    assert result.action in (0, 1)
    box = parse_box(text, [-1.0], [1.0])
    assert -1.0 <= float(box.action[0]) <= 1.0


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=2000))
def test_fuzz_discrete_always_valid(text):
    result = parse_discrete(text, ["stick", "hit", "double down"])
    assert result.action in (0, 1, 2)
    assert result.method in {"json", "regex", "fuzzy", "fallback"}
    assert result.ok == (result.method != "fallback")


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.floats() | st.text(max_size=20),
        lambda inner: (
            st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
        ),
        max_leaves=30,
    )
)
def test_fuzz_json_values(value):
    text = json.dumps({"action": value}, allow_nan=True)
    assert parse_discrete(text, NAMES).action in (0, 1)
    action = parse_box(text, np.array([-2.0, 0.0]), np.array([2.0, 1.0])).action
    assert action.shape == (2,) and np.all(np.isfinite(action))
    assert np.all(action >= [-2.0, 0.0]) and np.all(action <= [2.0, 1.0])
