"""Where the time of a PPO iteration goes (issue 51 item 2): the config of
``benchmarks/train_throughput.py`` (``CONFIG``, spelled out there) at one commit, per phase.

Each (model, mode) runs in its own process with ``PYTHONPATH`` on a detached worktree of the
commit (default ``HEAD``: the committed tree). The trainer runs ``--iterations`` iterations;
the first is a warm-up, the others are split by wrappers and module hooks into exclusive
(self) time, wall and CPU seconds, per category:

* ``env step and its text``: the envs' ``step``/``reset`` (base env, describer, wrappers),
  less the action parser;
* ``parsing``: the text action parser (``TextAction.parser``);
* ``tokenization``: the tokenizer's ``__call__``/``encode``/``apply_chat_template``/
  ``decode``/``batch_decode``;
* ``acting forward``: every forward of the model (whole model, decoder, each decoder layer,
  output layer) while collecting episodes;
* ``sampling (generate loop, candidate scoring glue)``: the backend's ``generate``/``score``
  outside the forwards;
* ``weights hashing (cache keys)``: the backend's ``weights_key``;
* ``acting: other Python``: the rest of ``collect`` (prompts, batching, the rollout loop);
* ``update: no-grad forwards (old log-probs, reference, values)``: the update's forwards
  that autograd does not record;
* ``update: forward with grad``, ``update: backward`` (``Tensor.backward``/
  ``torch.autograd.backward``), ``update: optimizer step`` (AdamW/Adam/SGD ``step`` and
  ``clip_grad_norm_``);
* ``update: data preparation (padding, masks, advantages; Python)``: the rest of the update;
* ``logging``: the metrics logger and ``diagnose``;
* ``iteration: other``: the rest of ``run_iteration``.

Host/device copies: none on the CPU (the model, the batch and the optimizer state are all in
host memory), so that row is 0 here. ``--evaluate`` times one evaluation (exact on
Blackjack) after the iterations, split the same way. ``--cprofile separate`` runs one more
iteration under cProfile (so the breakdown is not inflated by it) and keeps the top functions
by own time; ``same`` profiles the timed iterations themselves (cheaper for a large model,
where cProfile's overhead is small against the compute).

    python benchmarks/profile_train.py --models tiny --modes score generate --iterations 3 \\
        --cprofile separate --evaluate score generate --append
    python benchmarks/profile_train.py --models smollm2-135m --modes score \\
        --iterations 2 --cprofile same --append

Prints a markdown table and writes ``benchmarks/results/train_profile.json`` (``--append``
keeps the rows of other (model, mode) pairs already there).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from train_throughput import CONFIG, PYTHON, attach_logger, build_trainer, git, worktree  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "train_profile.json"
CATEGORIES = (
    "env step and its text",
    "parsing",
    "tokenization",
    "acting forward",
    "sampling (generate loop, candidate scoring glue)",
    "weights hashing (cache keys)",
    "acting: other Python",
    "host/device copies",
    "update: no-grad forwards (old log-probs, reference, values)",
    "update: data preparation (padding, masks, advantages; Python)",
    "update: forward with grad",
    "update: backward",
    "update: optimizer step",
    "logging",
    "iteration: other",
)
#: The issue's rows, each a sum of categories.
GROUPS = {
    "env step and its text": ["env step and its text"],
    "tokenization": ["tokenization"],
    "acting forward": ["acting forward"],
    "sampling and parsing": ["sampling (generate loop, candidate scoring glue)", "parsing"],
    "host/device copies (CPU: none)": ["host/device copies"],
    "update data preparation (padding, masks, old log-probs recompute)": [
        "update: no-grad forwards (old log-probs, reference, values)",
        "update: data preparation (padding, masks, advantages; Python)",
    ],
    "forward/backward and the optimizer": [
        "update: forward with grad",
        "update: backward",
        "update: optimizer step",
    ],
    "logging": ["logging"],
    "other (acting glue, weights hashing, loop)": [
        "acting: other Python",
        "weights hashing (cache keys)",
        "iteration: other",
    ],
}


class Clock:
    """Exclusive wall and CPU seconds per category: ``enter``/``leave`` nest; a category's
    time is its own, its children's is theirs."""

    def __init__(self) -> None:
        self.stack: list[list[Any]] = []
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.phase = "other"  # act, update, eval
        self.on = True

    def enter(self, category: str) -> None:
        self.stack.append([category, time.perf_counter(), time.process_time(), 0.0, 0.0])

    def leave(self) -> None:
        category, wall, cpu, child_wall, child_cpu = self.stack.pop()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        if self.on:
            self.wall[category] = self.wall.get(category, 0.0) + wall - child_wall
            self.cpu[category] = self.cpu.get(category, 0.0) + cpu - child_cpu
            self.calls[category] = self.calls.get(category, 0) + 1
        if self.stack:
            self.stack[-1][3] += wall
            self.stack[-1][4] += cpu

    def wrap(self, owner: Any, name: str, category: Any, phase: str | None = None) -> None:
        """Replace ``owner.name`` (an instance's or a class's attribute) by a timed call;
        ``category`` may be a function of the clock (chosen at call time)."""
        inner = getattr(owner, name)
        clock = self

        def timed(*args: Any, **kwargs: Any) -> Any:
            before = clock.phase
            if phase is not None:
                clock.phase = phase
            clock.enter(category(clock) if callable(category) else category)
            try:
                return inner(*args, **kwargs)
            finally:
                clock.leave()
                clock.phase = before

        timed.__wrapped__ = inner  # type: ignore[attr-defined]
        setattr(owner, name, timed)

    def snapshot(self) -> dict[str, dict[str, float]]:
        return {"wall": dict(self.wall), "cpu": dict(self.cpu), "calls": dict(self.calls)}


def forward_category(clock: Clock) -> str:
    import torch

    if clock.phase == "update":
        if torch.is_grad_enabled():
            return "update: forward with grad"
        return "update: no-grad forwards (old log-probs, reference, values)"
    if clock.phase == "eval":
        return "evaluation: forward"
    return "acting forward"


def instrument(trainer: Any, clock: Clock) -> None:
    """Wrap the trainer's parts and hook the model (see the module docstring)."""
    import torch

    phase_rest = {
        "act": "acting: other Python",
        "update": "update: data preparation (padding, masks, advantages; Python)",
        "eval": "evaluation: other Python",
    }
    clock.wrap(trainer, "collect", phase_rest["act"], phase="act")
    clock.wrap(trainer, "train_on_episodes", phase_rest["update"], phase="update")
    clock.wrap(trainer, "diagnose", "logging")
    clock.wrap(trainer.logger, "log", "logging")
    # envs, and the parser inside each
    for env in trainer.envs:
        clock.wrap(env, "step", "env step and its text")
        clock.wrap(env, "reset", "env step and its text")
        inner = env
        while inner is not None:
            if hasattr(inner, "parser") and callable(inner.parser):
                clock.wrap(inner, "parser", "parsing")
            inner = getattr(inner, "env", None)
    # tokenizer (its class: __call__ is looked up on the type)
    tok_class = type(trainer.tokenizer)
    for name in ("__call__", "encode", "apply_chat_template", "decode", "batch_decode"):
        if hasattr(tok_class, name):
            clock.wrap(tok_class, name, "tokenization")
    # the backend: sampling loop, scoring glue, weights hashing
    backend = trainer.policy.backend
    for name in ("generate", "score", "completion_logprobs"):
        if hasattr(backend, name):
            clock.wrap(backend, name, "sampling (generate loop, candidate scoring glue)")
    for name in ("weights_key",):
        if callable(getattr(backend, name, None)):
            clock.wrap(backend, name, "weights hashing (cache keys)")
    # the model's forwards, by phase and autograd
    model = trainer.model
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    modules = [base, base.model, *base.model.layers, base.get_output_embeddings()]

    def pre(module: Any, args: Any) -> None:
        clock.enter(forward_category(clock))

    def post(module: Any, args: Any, output: Any) -> None:
        clock.leave()

    for m in modules:
        m.register_forward_pre_hook(pre)
        m.register_forward_hook(post)
    # backward and the optimizers
    clock.wrap(torch.Tensor, "backward", "update: backward")
    clock.wrap(torch.autograd, "backward", "update: backward")
    # (the trainer may make its optimizers anew on the first update: wrap their classes)
    for cls in (torch.optim.AdamW, torch.optim.Adam, torch.optim.SGD):
        clock.wrap(cls, "step", "update: optimizer step")
    clock.wrap(torch.nn.utils, "clip_grad_norm_", "update: optimizer step")
    clock.wrap(trainer, "run_iteration", "iteration: other")


def top_functions(profile: cProfile.Profile, n: int = 25) -> list[dict[str, Any]]:
    stats = pstats.Stats(profile, stream=io.StringIO())
    rows = []
    for (file, line, name), (_, nc, tt, ct, _) in stats.stats.items():  # type: ignore[attr-defined]
        where = f"{Path(file).name}:{line}" if file != "~" else ""
        rows.append(
            {
                "function": f"{where}({name})" if where else name,
                "calls": nc,
                "tottime": tt,
                "cumtime": ct,
            }
        )
    rows.sort(key=lambda r: -r["tottime"])
    return rows[:n]


def measure(args: argparse.Namespace) -> dict[str, Any]:
    wall, cpu = time.perf_counter(), time.process_time()
    trainer, settings = build_trainer(args.model, args.mode, args.threads, args.output_dir)
    attach_logger(trainer)
    setup = {"s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu}
    clock = Clock()
    instrument(trainer, clock)
    profile = cProfile.Profile() if args.cprofile != "off" else None
    iterations = []
    clock.on = False  # iteration 1: warm-up
    for i in range(args.iterations):
        if i == 1:
            clock.on = True
            if args.cprofile == "same":
                profile.enable()
        steps = trainer.state.env_steps
        start_wall, start_cpu = time.perf_counter(), time.process_time()
        metrics = trainer.run_iteration()
        iterations.append(
            {
                "env_steps": trainer.state.env_steps - steps,
                "s": time.perf_counter() - start_wall,
                "cpu_s": time.process_time() - start_cpu,
                "epochs_run": metrics.get("losses/epochs"),
            }
        )
    if args.cprofile == "same":
        profile.disable()
    timed = clock.snapshot()
    cprofiled = None
    if args.cprofile == "separate":
        clock.on = False
        steps = trainer.state.env_steps
        start = time.perf_counter()
        profile.enable()
        trainer.run_iteration()
        profile.disable()
        cprofiled = {"env_steps": trainer.state.env_steps - steps, "s": time.perf_counter() - start}
    evaluation = None
    if args.evaluate:
        clock.wall, clock.cpu, clock.calls = {}, {}, {}
        clock.on = True
        clock.wrap(trainer, "evaluate", "evaluation: other Python", phase="eval")
        start_wall, start_cpu = time.perf_counter(), time.process_time()
        result = trainer.evaluate()
        evaluation = {
            "kind": "exact" if trainer.uses_exact_eval() else "sampled",
            "s": time.perf_counter() - start_wall,
            "cpu_s": time.process_time() - start_cpu,
            "value": result.get("mean_return"),
            "split": clock.snapshot(),
        }
    return {
        "settings": settings,
        "setup": setup,
        "iterations": iterations,
        "timed_iterations": len(iterations) - 1,
        "split": timed,
        "cprofile": args.cprofile,
        "cprofile_iteration": cprofiled,
        "top_functions": top_functions(profile) if profile is not None else [],
        "evaluation": evaluation,
    }


def per_iteration(row: dict[str, Any], total: float) -> float:
    return total / max(row["timed_iterations"], 1)


def table(rows: list[dict[str, Any]]) -> str:
    """The issue's rows (sums of categories), then every category: shares of the timed
    iterations' CPU seconds (this process's: robust to other jobs on a shared machine) and
    wall seconds, and both per iteration."""
    head = "| row | " + " | ".join(f"{r['model']} {r['mode']}" for r in rows) + " |"
    lines = [head, "|---|" + "---|" * len(rows)]

    def cell(r: dict[str, Any], cats: list[str]) -> str:
        wall = sum(r["split"]["wall"].get(c, 0.0) for c in cats)
        cpu = sum(r["split"]["cpu"].get(c, 0.0) for c in cats)
        total, total_cpu = sum(r["split"]["wall"].values()), sum(r["split"]["cpu"].values())
        n = max(r["timed_iterations"], 1)
        return (
            f"{100 * cpu / total_cpu:.1f} % CPU, {100 * wall / total:.1f} % wall "
            f"({cpu / n:.2f} CPU s, {wall / n:.2f} s)"
        )

    for name, cats in GROUPS.items():
        lines.append(f"| **{name}** | " + " | ".join(cell(r, cats) for r in rows) + " |")
    lines.append(
        "| iteration (per timed iteration) | "
        + " | ".join(
            f"{per_iteration(r, sum(r['split']['cpu'].values())):.1f} CPU s, "
            f"{per_iteration(r, sum(r['split']['wall'].values())):.1f} s, "
            f"{per_iteration(r, sum(i['env_steps'] for i in r['iterations'][1:])):.0f} steps"
            for r in rows
        )
        + " |"
    )
    lines.append(
        "| exact evaluation (s, CPU s) | "
        + " | ".join(
            f"{r['evaluation']['s']:.1f} s (CPU {r['evaluation']['cpu_s']:.1f} s)"
            if r.get("evaluation")
            else "not run"
            for r in rows
        )
        + " |"
    )
    lines += ["", "Every category (share of the timed iterations' CPU and wall time):", ""]
    lines += [head, "|---|" + "---|" * len(rows)]
    for c in CATEGORIES:
        lines.append(f"| {c} | " + " | ".join(cell(r, [c]) for r in rows) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["tiny"])
    parser.add_argument("--modes", nargs="+", default=["score", "generate"])
    parser.add_argument("--commit", default="HEAD")
    parser.add_argument("--iterations", type=int, default=3, help="Iteration 1 is a warm-up.")
    parser.add_argument("--cprofile", choices=["separate", "same", "off"], default="separate")
    parser.add_argument("--evaluate", nargs="*", default=[], help="Modes that time one evaluation.")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--append", action="store_true", help="Keep other (model, mode) rows.")
    parser.add_argument("--workdir", default="/tmp/llmgym-train-profile")
    parser.add_argument("--keep-worktrees", action="store_true")
    parser.add_argument(
        "--table-only", action="store_true", help="Print the table of --output's rows; run nothing."
    )
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    parser.add_argument("--output-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        args.evaluate = bool(args.evaluate)
        print(json.dumps(measure(args)))
        return

    from throughput import machine

    if args.table_only:
        report = json.loads(args.output.read_text())
        report["table"] = table(report["results"])
        print(report["machine"])
        print(report["table"])
        args.output.write_text(json.dumps(report, indent=2) + "\n")
        return

    sha = git("rev-parse", "--verify", f"{args.commit}^{{commit}}")
    path, made = worktree(sha)
    python = str(PYTHON if PYTHON.exists() else Path(sys.executable))
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), PYTHONPATH=str(path))
    rows = []
    try:
        for model in args.models:
            for mode in args.modes:
                command = [
                    python, __file__, "--measure", "--model", model, "--mode", mode,
                    "--threads", str(args.threads), "--iterations", str(args.iterations),
                    "--cprofile", args.cprofile,
                    "--output-dir", str(Path(args.workdir) / f"{model}-{mode}"),
                    *(["--evaluate", "yes"] if mode in args.evaluate else []),
                ]  # fmt: skip
                load = os.getloadavg()[0]
                done = subprocess.run(command, env=env, cwd=path, capture_output=True, text=True)
                if done.returncode:
                    sys.stderr.write(done.stderr[-4000:])
                    raise SystemExit(f"{model} {mode}: exit {done.returncode}")
                row = json.loads(done.stdout.strip().splitlines()[-1])
                row |= {"model": model, "mode": mode, "commit": args.commit, "sha": sha}
                row["load_at_start"] = load
                rows.append(row)
                print(f"{model} {mode}: {row['iterations']}", flush=True)
    finally:
        if made and not args.keep_worktrees:
            git("worktree", "remove", "--force", str(path))
    report = {
        "machine": machine(args.threads),
        "config": CONFIG,
        "command": "python benchmarks/profile_train.py " + " ".join(sys.argv[1:]),
        "results": rows,
    }
    if args.append and args.output.exists():
        old = json.loads(args.output.read_text())
        ran = {(r["model"], r["mode"]) for r in rows}
        report["results"] = [r for r in old["results"] if (r["model"], r["mode"]) not in ran] + rows
        report["earlier_commands"] = old.get("earlier_commands", []) + [old.get("command")]
    report["table"] = table(report["results"])
    print(report["machine"])
    print(report["table"])
    for r in rows:
        print(f"\n{r['model']} {r['mode']}: top functions by own time (cProfile, {r['cprofile']})")
        for f in r["top_functions"][:12]:
            print(f"  {f['tottime']:8.2f} s  {f['calls']:>8}  {f['function']}")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
