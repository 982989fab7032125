"""The results tables of README.md and the documentation site, made from the committed records.

Each table lives in a Markdown file between ``<!-- results:NAME:start -->`` and
``<!-- results:NAME:end -->``; this script rewrites every such block in README.md and docs/
from the records below, so no page can drift from them. Nothing is played or trained here; it
takes a second. ``make docs`` runs ``--check`` before it builds the site, and
tests/benchmarks/test_docs_results.py does too.

    python benchmarks/docs_results.py            # rewrite the blocks
    python benchmarks/docs_results.py --check    # exit 1 if a block is out of date

The blocks (NAME: what it shows, from which records):

    headline             each RL-from-scratch goal: its seeds, start and final values, the
                         same recipe on a random-init backbone (NAME-random-sN) where run,
                         the random and expert players on the same seeds (results/rl/*.json)
    rl-runs              every RL run, one row each (results/rl/*.json, as rl_table.py prints)
    sample-efficiency    env steps to each target, LLM against SB3 (sample_efficiency.json)
    acting-throughput    env steps/s of three ways of acting (throughput.json)
    training-throughput  whole PPO iterations per env step (train_throughput_configs.json,
                         train_throughput_layer8.json)
    transfer             committed policies on held-out text variants, no training
                         (transfer.json, as benchmarks/transfer.py prints it)
    maps-sb3             SB3 PPO given the map, trained on FrozenLake's train maps, on the
                         held-out maps (maps_sb3.json, as benchmarks/maps_sb3.py prints it)
    maps-curve           the text policies' held-out-map curves so far, beside SB3's and the
                         best map-blind path (maps_curve.json, as benchmarks/maps_curve.py
                         prints it)

Figures that prose repeats from the headline come from here too, as inline fields
``<!-- r:FIELD:RECIPE -->TEXT<!-- /r -->`` (on one line; TEXT is rewritten, the comments do not
show on the site), so a sentence beside a table cannot disagree with it. RECIPE is one of the
headline's recipes; FIELD is one of (values as the table prints them):

    finals               the final value of every seed, "-0.0726, -0.0886, -0.0765"
    final-sN             seed N's final value
    start                the zero-shot (start) value of its first seed
    reached              on how many seeds the goal was reached, "2 of 3"
    control              the random-init control's finals (NAME-random-sN)
    control-sN           seed N's final value in the control
    control-reached      on how many of those the goal was reached, "0 of 3"

and the sample-efficiency page's ``se:WHAT:ENV:AGENT`` (``se_field``): the env steps to the
target of an agent's seeds, as the sample-efficiency table shows them.

The leaderboard has its own script, benchmarks/leaderboard_readme.py.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
RL = RESULTS / "rl"
PAGES = ["README.md", "docs/**/*.md"]
BLOCK = re.compile(
    r"<!-- results:(?P<name>[\w-]+):start -->\n.*?<!-- results:(?P=name):end -->", re.S
)


def _script(name: str) -> object:
    """The sibling script ``benchmarks/NAME.py`` as a module (its table makers)."""
    path = Path(__file__).with_name(f"{name}.py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def records(prefix: str = "") -> dict[str, dict]:
    """The RL records whose name starts with ``prefix``, by name, in name order."""
    return {
        path.stem: json.loads(path.read_text())
        for path in sorted(RL.glob(f"{prefix}*.json"))
        if not path.name.endswith(".checkpoints.json")
    }


# --------------------------------------------------------------------------- headline
class Goal(NamedTuple):
    """One RL-from-scratch goal: a package recipe's runs (``prefix`` + seed) and its test."""

    task: str
    prefix: str
    goal: str
    reached: Callable[[dict], bool]
    recipe: str


#: The headline's rows, in the order the pages show them: the package's recipes
#: (llmgym/rl/recipes/*.toml), which hold each goal and its test.
ORDER = [
    "blackjack-ppo", "blackjack-grpo", "blackjack-sft-grpo", "blackjack-lm-ppo",
    "blackjack-lm-ppo-ema", "blackjack-lm-gen", "frozenlake-noslip-ppo", "frozenlake-lm-ppo-g08",
    "frozenlake-slippery-ppo-t1g", "cartpole-ppo-layer8g", "cartpole-lm-ppo",
    "arithmetic-reinforce",
]  # fmt: skip


def _goal(name: str) -> Goal:
    from llmgym.rl import recipes

    recipe = recipes.get(name)
    task = recipe.title + (" (`--algo qac`)" if recipe.algo == "qac" else "")
    prefix = recipe.records.removesuffix("{seed}")
    return Goal(task, prefix, recipe.goal["text"], recipe.reached, recipe.name)


GOALS = [_goal(name) for name in ORDER]

LEARNS = {
    "head": "a head on the frozen LM",
    "lm": "the LM (LoRA)",
}


def value(record: dict, key: str = "eval_value") -> str:
    """A record's value as the pages print it: exact to 4 decimals, sampled with its CI.

    Example:
        >>> value({"eval_method": "exact", "eval_value": -0.068623})
        '-0.0686'
        >>> value({"eval_method": "sampled", "eval_value": 295.75, "eval_ci95": 57.703})
        '295.75 ± 57.70'
        >>> value({"eval_method": "sampled", "eval_value": 0.354, "eval_ci95": 0.042})
        '0.354 ± 0.042'
    """
    v = record[key]
    if v is None:  # a start value of a run trained with --no-start-eval
        return "not evaluated"
    if record["eval_method"] == "exact":
        return f"{v:.4f}"
    digits = 2 if abs(v) >= 1 else 3
    text = f"{v:.{digits}f}"
    return text + (f" ± {record['eval_ci95']:.{digits}f}" if key == "eval_value" else "")


def same_seeds(record: dict) -> str:
    """The random and expert players on the record's evaluation seeds, or its start value."""
    base = record.get("baselines_same_seeds") or {}
    parts = [f"{who} {base[who]['mean_return']:g}" for who in ("random", "expert") if who in base]
    if parts:
        episodes = base.get("expert", base.get("random", {})).get("episodes")
        return ", ".join(parts) + (f" ({episodes:,} episodes)" if episodes else "")
    return f"zero-shot {value(record, 'start_value')} on the same held-out set"


def control(goal: Goal) -> str:
    """The goal's recipe on a randomly initialised backbone of the same architecture
    (``NAME-random-sN``): what the pretrained weights add, or "-" where none was run."""
    prefix = goal.prefix.removesuffix("-s") + "-random-s"
    runs = [r for r in records(prefix).values() if r.get("backbone") == "random-init"]
    if not runs:
        return "-"
    hit = sum(goal.reached(r) for r in runs)
    return f"{', '.join(value(r) for r in runs)} ({hit} of {len(runs)} reached)"


def headline() -> str:
    lines = [
        "| task (recipe) | what learns | zero-shot -> after RL, per seed | goal | reached "
        "| control: random-init LM | same seeds: random, expert |",
        "|---|---|---|---|---|---|---|",
    ]
    for goal in GOALS:
        runs = records(goal.prefix)
        if not runs:
            raise SystemExit(f"no records benchmarks/results/rl/{goal.prefix}*.json")
        first = next(iter(runs.values()))
        start = value(first, "start_value")
        if first.get("sft_value") is not None:
            start += f" (SFT {first['sft_value']:.4f})"
        finals = ", ".join(value(r) for r in runs.values())
        method = " (exact)" if first["eval_method"] == "exact" else ""
        hit = sum(goal.reached(r) for r in runs.values())
        names = f"`--recipe {goal.recipe}`"
        lines.append(
            f"| {goal.task} ({names}) | {LEARNS[first['policy']]} | {start} -> {finals}{method} "
            f"| {goal.goal} | **{hit} of {len(runs)}** | {control(goal)} | {same_seeds(first)} |"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------- the other blocks
def rl_runs() -> str:
    table = _script("rl_table")
    lines = [
        "| env | algo | SFT | training | start -> final (greedy) | evaluation | record |",
        "|---|---|---|---|---|---|---|",
    ]
    return "\n".join(lines + [table.row(name, r) for name, r in records().items()])


def _env_label(env_id: str, kwargs: dict) -> str:
    extra = ", ".join(f"{k}={v}" for k, v in kwargs.items())
    return env_id + (f" ({extra})" if extra else "")


class Reach(NamedTuple):
    """One seed's curve against its env's target: the env steps of the first evaluation at or
    above it and of the first from which every later one is (None: never), its last value."""

    first: int | None
    stays: int | None
    final: float
    budget: int


def reaches(env_id: str, agent: str) -> list[Reach]:
    """Each seed's :class:`Reach` of ``agent`` on ``env_id`` (sample_efficiency.json)."""
    data = json.loads((RESULTS / "sample_efficiency.json").read_text())
    target = data["settings"][env_id]["target"]
    out = []
    for c in (c for c in data["curves"] if c["env_id"] == env_id and c["agent"] == agent):
        steps, values = c["env_steps"], c["values"]
        hits = [i for i, v in enumerate(values) if v >= target]
        stay = next((i for i in range(len(values)) if all(v >= target for v in values[i:])), None)
        first = steps[hits[0]] if hits else None
        out.append(Reach(first, None if stay is None else steps[stay], values[-1], steps[-1]))
    return out


def sample_efficiency() -> str:
    data = json.loads((RESULTS / "sample_efficiency.json").read_text())
    agents = sorted(
        {c["agent"] for c in data["curves"]}, key=lambda a: (not a.startswith("llm"), a)
    )
    header = {
        "llm-ppo": "llm-ppo (head, frozen LM)",
        "sb3-dqn": "sb3-dqn (catalog recipe)",
        "sb3-ppo": "sb3-ppo (catalog recipe)",
        "sb3-dqn-tuned": "sb3-dqn (sweep's best)",
        "sb3-ppo-tuned": "sb3-ppo (sweep's best)",
    }
    lines = [
        "| env | target | " + " | ".join(header.get(a, a) for a in agents) + " |",
        "|---|---|" + "---|" * len(agents),
    ]
    for env_id, setting in data["settings"].items():
        cells = []
        for agent in agents:
            parts = [
                f">{r.budget:,} ({r.final:.3g})"
                if r.first is None
                else f"{r.first:,}/{'-' if r.stays is None else f'{r.stays:,}'}"
                for r in reaches(env_id, agent)
            ]
            cells.append(", ".join(parts) or "-")
        label = _env_label(env_id, setting["env_kwargs"])
        lines.append(f"| {label} | {setting['target']:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _span(values: list[int]) -> str:
    """``1,600-2,400`` (``4,200`` when all are equal; ``-`` when none)."""
    if not values:
        return "-"
    low, high = min(values), max(values)
    return f"{low:,}" if low == high else f"{low:,}-{high:,}"


#: The envs of sample-efficiency fields, by their short name.
SE_ENVS = {
    "blackjack": "Text-Blackjack-v1",
    "frozenlake": "Text-FrozenLake-v1",
    "cartpole": "Text-CartPole-v1",
}


def se_field(key: str) -> str:
    """The text of a sample-efficiency field ``se:WHAT:ENV:AGENT``: WHAT is ``first`` or
    ``stays`` (the span of those seeds' env steps to the target, as the table's
    ``first/stays``), ``first-mean`` (the mean first, a seed that never reaches it counting
    its budget) or ``finals`` (every seed's last value).

    Example:
        >>> [se_field(f"se:{w}:frozenlake:sb3-ppo-tuned") for w in ("first", "first-mean")]
        ['600-1,800', '1,000']
    """
    _, what, env, agent = (key.split(":") + ["", "", ""])[:4]
    if env not in SE_ENVS:
        raise SystemExit(f"field {key!r}: no env {env!r}; have {', '.join(SE_ENVS)}")
    runs = reaches(SE_ENVS[env], agent)
    if not runs:
        raise SystemExit(f"field {key!r}: no curves of agent {agent!r} on {env}")
    if what == "first":
        return _span([r.first for r in runs if r.first is not None])
    if what == "stays":
        return _span([r.stays for r in runs if r.stays is not None])
    if what == "first-mean":
        return f"{round(sum(r.budget if r.first is None else r.first for r in runs) / len(runs)):,}"
    if what == "finals":
        return ", ".join(f"{r.final:.3g}" for r in runs)
    raise SystemExit(f"field {key!r}: no field {what!r}; have first, stays, first-mean, finals")


def acting_throughput() -> str:
    data = json.loads((RESULTS / "throughput.json").read_text())
    lines = [
        "| way of acting | env-steps/s | tokens/step | GFLOP/s | of GEMM peak | peak RSS |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in data["results"].values():
        lines.append(
            f"| {r['label']} | {r['env_steps_per_s']:.2f} | {r['tokens_per_step']:.0f} "
            f"| {r['model_gflop_per_s']:.1f} | {r['flop_ceiling_fraction']:.0%} "
            f"| {r['peak_rss_mb'] / 1000:.2f} GB |"
        )
    res = data["results"]
    seq = res["sequential"]["env_steps_per_s"]
    lines += [
        "",
        f"Score vs sequential: **{res['score']['env_steps_per_s'] / seq:.1f}x**; batched generate "
        f"vs sequential: **{res['generate']['env_steps_per_s'] / seq:.1f}x**. Machine: "
        f"{data['machine']}; fp32 GEMM peak measured in the same run "
        f"{data['gemm_peak_gflop_per_s']:.0f} GFLOP/s.",
    ]
    return "\n".join(lines)


def training_throughput() -> str:
    out = []
    for name in ("train_throughput_configs.json", "train_throughput_layer8.json"):
        data = json.loads((RESULTS / name).read_text())
        out += [
            f"`benchmarks/results/{name}`: {data['machine']}; fp32 GEMM peak "
            f"{data['gemm_peak_gflop_per_s']:.0f} GFLOP/s in the same run.",
            "",
            data["table"],
            "",
        ]
    return "\n".join(out).rstrip()


def transfer() -> str:
    module = _script("transfer")
    data = json.loads((RESULTS / "transfer.json").read_text())
    done = [c for row in data["policies"].values() for c in row["cells"].values()]
    commit = data.get("commit", "?")
    commit = commit[:10] + ("+dirty" if commit.endswith("+dirty") else "")
    return (
        f"Made by `{data['command']}` (`benchmarks/results/transfer.json`): {len(done)} exact "
        f"evaluations, {sum(c['wall_s'] for c in done) / 60:.0f} min in all, on {data['machine']}"
        f", at commit {commit}.\n\n" + module.markdown_tables(data).rstrip()
    )


def maps_sb3() -> str:
    module = _script("maps_sb3")
    data = json.loads((RESULTS / "maps_sb3.json").read_text())
    settings = ", ".join(f"{k} {v}" for k, v in data["ppo_kwargs"].items())
    return (
        f"Made by `python benchmarks/maps_sb3.py` (`benchmarks/results/maps_sb3.json`; the "
        f"last command: `{data['command']}`) on {data['machine']}; SB3 PPO: {settings}, the "
        "rest SB3's defaults.\n\n" + module.table(data)
    )


def maps_curve() -> str:
    module = _script("maps_curve")
    data = json.loads((RESULTS / "maps_curve.json").read_text())
    return (
        "Gathered by `python benchmarks/maps_curve.py --collect RUN_DIR` from each run's "
        "`metrics.csv` (`benchmarks/results/maps_curve.json`, plotted in "
        "`benchmarks/results/maps_curve.png`); exact success on the 100 held-out maps at each "
        "evaluation, by training episodes.\n\n"
        + module.table(data)
        + "\n\nEach run's own success on the train maps as it trained (sampled, at its "
        "training temperature), per 500 episodes:\n\n" + module.training_table(data)
    )


# --------------------------------------------------------------------------- inline fields
FIELD = re.compile(r"<!-- r:(?P<key>[\w:.-]+) -->(?P<text>[^\n]*?)<!-- /r -->")


def _runs(prefix: str, random_init: bool = False) -> dict[str, dict]:
    if random_init:
        prefix = prefix.removesuffix("-s") + "-random-s"
        return {k: r for k, r in records(prefix).items() if r.get("backbone") == "random-init"}
    return records(prefix)


def field(key: str) -> str:
    """The text of an inline field ``FIELD:RECIPE`` (the module's docstring lists them).

    Example:
        >>> field("reached:blackjack-ppo")
        '3 of 3'
        >>> field("final-s1:blackjack-ppo")
        '-0.0621'
        >>> field("finals:nope")
        Traceback (most recent call last):
        ...
        SystemExit: inline field 'finals:nope': no headline recipe 'nope'; have blackjack-ppo, ...
    """
    if key.startswith("se:"):
        return se_field(key)
    name, _, recipe = key.partition(":")
    goals = {g.recipe: g for g in GOALS}
    if recipe not in goals:
        raise SystemExit(
            f"inline field {key!r}: no headline recipe {recipe!r}; have {', '.join(goals)}"
        )
    goal = goals[recipe]
    control = name.startswith("control")
    runs = _runs(goal.prefix, random_init=control)
    if not runs:
        raise SystemExit(f"inline field {key!r}: no records for it")
    if name in ("finals", "control"):
        return ", ".join(value(r) for r in runs.values())
    if name in ("reached", "control-reached"):
        return f"{sum(goal.reached(r) for r in runs.values())} of {len(runs)}"
    if name == "start":
        return value(next(iter(runs.values())), "start_value")
    if m := re.fullmatch(r"(final|control)-s(\d+)", name):
        stem = goal.prefix.removesuffix("-s") + "-random-s" if control else goal.prefix
        seed = f"{stem}{m.group(2)}"
        if seed not in runs:
            raise SystemExit(f"inline field {key!r}: no record {seed}")
        return value(runs[seed])
    raise SystemExit(
        f"inline field {key!r}: no field {name!r}; have finals, final-sN, start, reached, "
        "control, control-sN, control-reached"
    )


MAKERS: dict[str, Callable[[], str]] = {
    "headline": headline,
    "rl-runs": rl_runs,
    "sample-efficiency": sample_efficiency,
    "acting-throughput": acting_throughput,
    "training-throughput": training_throughput,
    "transfer": transfer,
    "maps-sb3": maps_sb3,
    "maps-curve": maps_curve,
}


def block(name: str) -> str:
    made_by = (
        "<!-- made by `python benchmarks/docs_results.py` from benchmarks/results/: "
        "edit those, not this block -->"
    )
    return (
        f"<!-- results:{name}:start -->\n{made_by}\n\n{MAKERS[name]()}\n\n"
        f"<!-- results:{name}:end -->"
    )


def render(text: str, path: str = "<text>") -> str:
    """``text`` with every results block made anew.

    Example:
        >>> render("a\\n<!-- results:nope:start -->\\nold\\n<!-- results:nope:end -->\\n")
        ... # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        SystemExit: <text>: no results block named 'nope'; have headline, rl-runs, ...
    """

    def make(m: re.Match) -> str:
        if m.group("name") not in MAKERS:
            raise SystemExit(
                f"{path}: no results block named {m.group('name')!r}; have {', '.join(MAKERS)}"
            )
        return block(m.group("name"))

    def fill(m: re.Match) -> str:
        return f"<!-- r:{m.group('key')} -->{field(m.group('key'))}<!-- /r -->"

    return FIELD.sub(fill, BLOCK.sub(make, text))


def pages() -> list[Path]:
    return sorted({p for pattern in PAGES for p in ROOT.glob(pattern)})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n\n".join(__doc__.split("\n\n")[1:]),
    )
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if stale")
    args = parser.parse_args(argv)
    stale, found = [], 0
    for path in pages():
        text = path.read_text()
        found += len(BLOCK.findall(text)) + len(FIELD.findall(text))
        new = render(text, str(path.relative_to(ROOT)))
        if new != text:
            stale.append(path.relative_to(ROOT))
            if not args.check:
                path.write_text(new)
    if args.check:
        for path in stale:
            print(f"{path} is out of date: run python benchmarks/docs_results.py")
        return 1 if stale else 0
    print(
        f"{found} blocks and fields; rewrote {', '.join(map(str, stale)) or 'nothing: up to date'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
