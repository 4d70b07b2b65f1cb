"""Benchmarks for speculative decoding: ``python -m inferlab.speculative.bench [--quick]``.

Three experiments, each written to ``docs/results/speculative_*.json`` with its provenance and
drawn into ``docs/figures/speculative/``:

- ``exactness``: a small table-model pair; the frequencies of whole sequences drawn by
  :func:`speculative_sample` next to the target's exact probabilities and the draft's.
- ``gamma``: NTU ML 2026 HW3's experiment on the bundled pair. Two prompt regimes (a short simple
  prompt with 64 new tokens; a long, repetitive one with 128), gamma = 1..10, four methods (our
  speculative decoder, our prompt lookup, transformers' ``generate(assistant_model=...)`` and
  ``generate(prompt_lookup_num_tokens=...)``), each timed side by side with plain decoding. The
  acceptance rate alpha and the cost ratio c are measured in the same run and give the predicted
  curve of Leviathan et al.'s formula.
- ``tree``: chain vs token-tree drafting on the long prompt: tokens per target call and time.

All decoding here is greedy (temperature 0), so every method must return the same tokens as plain
greedy decoding; the run checks that and records it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import torch

from inferlab.bench import repo_root, write_result
from inferlab.models import load_pair
from inferlab.speculative.formulas import expected_speedup
from inferlab.speculative.prompt_lookup import prompt_lookup_decode
from inferlab.speculative.sampler import IncrementalModel, speculative_sample
from inferlab.speculative.tree import tree_speculative_decode

SHORT_PROMPT = "def greet(name):\n"

# A long prompt in the style of the bundled pair's training text (Python code), written for this
# site. Code repeats its own names, so prompt lookup finds material to copy here.
LONG_PROMPT = '''class Inventory:
    """Keep item counts and prices, and report the total value."""

    def __init__(self):
        self.counts = {}
        self.prices = {}

    def add(self, name, count, price):
        if count < 0:
            raise ValueError("count must be >= 0")
        self.counts[name] = self.counts.get(name, 0) + count
        self.prices[name] = price

    def remove(self, name, count):
        if count < 0:
            raise ValueError("count must be >= 0")
        if self.counts.get(name, 0) < count:
            raise ValueError("not enough items")
        self.counts[name] = self.counts[name] - count

    def value(self, name):
        return self.counts.get(name, 0) * self.prices.get(name, 0)

    def total(self):
        total = 0
        for name in self.counts:
            total += self.value(name)
        return total

    def names(self):
'''

REGIMES = {"short": (SHORT_PROMPT, 64), "long": (LONG_PROMPT, 128)}
METHODS = ("ours_speculative", "ours_prompt_lookup", "hf_assisted", "hf_prompt_lookup")
TREE_SHAPES = {
    "chain 1-1-1-1": (1, 1, 1, 1),
    "tree 2-2-1-1": (2, 2, 1, 1),
    "tree 3-2-1-1": (3, 2, 1, 1),
    "tree 2-2-2-2": (2, 2, 2, 2),
}


def figures_dir() -> Path:
    """Return docs/figures/speculative in the checkout (or ./figures/speculative outside one)."""
    root = repo_root()
    folder = (root / "docs" / "figures" / "speculative") if root else Path.cwd() / "figures" / "speculative"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


# ----------------------------------------------------------------------------------------------
# Exactness on a table-model pair.


class TableModel:
    """A second-order table model: the next token's logits depend on the last two tokens only."""

    def __init__(self, vocab: int, seed: int, scale: float):
        self.table = torch.randn(vocab, vocab, vocab, generator=torch.Generator().manual_seed(seed)) * scale
        self.vocab_size = vocab

    def __call__(self, ids: torch.Tensor) -> torch.Tensor:
        return self.table[torch.cat([ids[:, :1], ids[:, :-1]], 1), ids]

    def sequence_prob(self, prompt: list[int], tail: tuple[int, ...]) -> float:
        """Return the exact probability of ``tail`` after ``prompt`` (chain rule)."""
        context, prob = list(prompt), 1.0
        for token in tail:
            prob *= float(self.table[context[-2], context[-1]].double().softmax(-1)[token])
            context.append(token)
        return prob


def chi_square_p_value(observed: torch.Tensor, expected: torch.Tensor) -> float:
    """Return Pearson's chi-square p-value: P(chi2 with cells - 1 degrees of freedom >= statistic)."""
    statistic = ((observed - expected) ** 2 / expected).sum()
    degrees = torch.tensor(len(observed) - 1, dtype=torch.float64)
    return float(torch.special.gammaincc(degrees / 2, statistic / 2))  # the chi-square survival function


def exactness_experiment(draws: int) -> dict:
    """Return exact target, exact draft and sampled frequencies of every 2-token continuation."""
    target, draft, prompt = TableModel(3, seed=0, scale=1.5), TableModel(3, seed=2, scale=2.5), [0, 1]
    cells = [(a, b) for a in range(3) for b in range(3)]
    counts = dict.fromkeys(cells, 0)
    generator = torch.Generator().manual_seed(0)
    accepted = drafted = 0
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: threads only add overhead
    for _ in _progress(range(draws), "exactness draws"):
        result = speculative_sample(target, draft, torch.tensor([prompt]), 2, gamma=1, generator=generator)
        counts[tuple(result.new_tokens[0].tolist())] += 1
        accepted, drafted = accepted + result.accepted, drafted + result.drafted
    torch.set_num_threads(threads)
    rows = [
        {
            "sequence": f"{a} {b}",
            "target_p": round(target.sequence_prob(prompt, (a, b)), 4),
            "draft_q": round(draft.sequence_prob(prompt, (a, b)), 4),
            "sampled": round(counts[(a, b)] / draws, 4),
        }
        for a, b in cells
    ]
    expected = torch.tensor([target.sequence_prob(prompt, cell) * draws for cell in cells], dtype=torch.float64)
    observed = torch.tensor([counts[c] for c in cells], dtype=torch.float64)
    return {
        "draws": draws,
        "alpha": accepted / drafted,
        "chi_square_p_value": chi_square_p_value(observed, expected),
        "max_abs_error": max(abs(r["sampled"] - r["target_p"]) for r in rows),
        "max_draft_gap": max(abs(r["draft_q"] - r["target_p"]) for r in rows),
        "rows": rows,
    }


# ----------------------------------------------------------------------------------------------
# The gamma sweep.


def plain_greedy(model, ids: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
    """Return the greedy continuation with a KV cache, one target call per token: the baseline."""
    runner = IncrementalModel(model)
    for _ in range(max_new_tokens):
        next_token = runner.new_logits(ids)[-1].argmax().view(1, 1)
        ids = torch.cat([ids, next_token.cpu()], 1)
    return ids


def step_seconds(model, ids: torch.Tensor, new_tokens: int, repeat: int) -> float:
    """Return the median time of one cached forward over ``new_tokens`` tokens after ``ids``."""
    runner = IncrementalModel(model)
    runner.new_logits(ids)
    extra = torch.zeros(1, new_tokens, dtype=torch.long)
    seconds = []
    for _ in range(repeat + 2):
        start = time.perf_counter()
        runner.new_logits(torch.cat([ids, extra], 1))
        seconds.append(time.perf_counter() - start)
        runner.rollback(ids.shape[1])
    return statistics.median(seconds[2:])  # the first two warm up


def hf_generate(model, ids: torch.Tensor, max_new_tokens: int, **kwargs) -> torch.Tensor:
    """Return transformers' own greedy ``generate`` output (no early stop at end-of-text)."""
    with torch.no_grad():
        return model.generate(
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens, do_sample=False, **kwargs
        ).cpu()


def timed_runs(runs: dict, repeat: int) -> tuple[dict[str, float], dict]:
    """Run every method ``repeat`` times round-robin; return median seconds and each one's last output.

    Round-robin (as in ``inferlab.bench.time_interleaved``) lets machine noise hit all methods alike;
    the outputs are kept so the run can check them against plain greedy decoding without rerunning.
    """
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    outputs = {}
    for _ in range(repeat):
        for name, run in runs.items():
            start = time.perf_counter()
            outputs[name] = run()
            seconds[name].append(time.perf_counter() - start)
    return {name: statistics.median(s) for name, s in seconds.items()}, outputs


def set_assistant_gamma(draft, gamma: int) -> None:
    """Make transformers draft exactly gamma tokens per round, like our decoder (no adaptive schedule)."""
    draft.generation_config.num_assistant_tokens = gamma
    draft.generation_config.num_assistant_tokens_schedule = "constant"
    draft.generation_config.assistant_confidence_threshold = 0.0


def sweep_regime(target, draft, tokenizer, regime: str, gammas: list[int], repeat: int, new_tokens: int | None) -> dict:
    """Return the measured and predicted speed-ups of every method at every gamma for one prompt regime."""
    prompt, max_new = REGIMES[regime]
    max_new = new_tokens or max_new
    ids = tokenizer(prompt, return_tensors="pt").input_ids
    reference = plain_greedy(target, ids, max_new)
    target_step = step_seconds(target, ids, 1, 10 * repeat)
    draft_step = step_seconds(draft, ids, 1, 10 * repeat)
    c = draft_step / target_step
    rows, acceptance, identical = [], [], True
    # Plain decoding is timed once per regime (it does not depend on gamma); on a busy machine,
    # run with --repeat > 1 so that the medians absorb the noise.
    baselines, _ = timed_runs(
        {
            "plain_ours": lambda: plain_greedy(target, ids, max_new),
            "plain_hf": lambda: hf_generate(target, ids, max_new),
        },
        repeat,
    )
    for gamma in _progress(gammas, f"{regime} prompt, gamma"):
        set_assistant_gamma(draft, gamma)
        runs = {  # (gamma=gamma binds this round's value: the lambdas run within the round anyway)
            "ours_speculative": lambda gamma=gamma: speculative_sample(
                target, draft, ids, max_new, gamma, temperature=0
            ),
            "ours_prompt_lookup": lambda gamma=gamma: prompt_lookup_decode(
                target, ids, max_new, max_ngram=3, num_draft=gamma
            ),
            "hf_assisted": lambda: hf_generate(target, ids, max_new, assistant_model=draft),
            "hf_prompt_lookup": lambda gamma=gamma: hf_generate(
                target, ids, max_new, prompt_lookup_num_tokens=gamma, max_matching_ngram_size=3
            ),
        }
        times, outputs = timed_runs(runs, repeat)
        times |= baselines
        for out in outputs.values():
            sequence = out.sequences if hasattr(out, "sequences") else out
            identical &= torch.equal(sequence[:, : reference.shape[1]], reference)
        spec, lookup = outputs["ours_speculative"], outputs["ours_prompt_lookup"]
        acceptance += spec.acceptance_probs
        verify_step = step_seconds(target, ids, gamma + 1, 10 * repeat)
        for method in METHODS:
            baseline = times["plain_hf" if method.startswith("hf_") else "plain_ours"]
            row = {
                "gamma": gamma,
                "method": method,
                "seconds": round(times[method], 4),
                "tokens_per_s": round(max_new / times[method], 1),
                "speedup": round(baseline / times[method], 3),
            }
            for name, out in (("ours_speculative", spec), ("ours_prompt_lookup", lookup)):
                if method == name:  # JSON has no nan: None when nothing was drafted
                    row |= {
                        "alpha_accepted_over_drafted": round(out.alpha, 3) if out.drafted else None,
                        "target_calls": out.target_calls,
                    }
            rows.append(row)
        rows.append(
            {"gamma": gamma, "method": "verify_cost", "target_verify_over_step": round(verify_step / target_step, 3)}
        )
    alpha = sum(acceptance) / len(acceptance)
    verify = {r["gamma"]: r["target_verify_over_step"] for r in rows if r["method"] == "verify_cost"}
    for row in rows:
        if row["method"] == "ours_speculative":
            row["predicted_speedup"] = round(expected_speedup(alpha, row["gamma"], c), 3)
            # The same formula with the target's measured cost of checking gamma + 1 tokens.
            row["predicted_with_verify_cost"] = round(expected_speedup(alpha, row["gamma"], c, verify[row["gamma"]]), 3)
    return summarize(regime, rows, alpha, c, target_step, draft_step, max_new, ids.shape[1], identical)


def summarize(regime, rows, alpha, c, target_step, draft_step, max_new, prompt_tokens, identical) -> dict:
    """Return the regime's record with the headline ratios the pages quote."""
    ours = [r for r in rows if r["method"] == "ours_speculative"]
    best = max(ours, key=lambda r: r["speedup"])
    hf_at_best = next(r for r in rows if r["method"] == "hf_assisted" and r["gamma"] == best["gamma"])
    best_predicted = max(ours, key=lambda r: r["predicted_speedup"])
    lookup = [r for r in rows if r["method"] == "ours_prompt_lookup"]
    best_lookup = max(lookup, key=lambda r: r["speedup"])
    hf_ratio = [
        r["tokens_per_s"]
        / next(h["tokens_per_s"] for h in rows if h["method"] == "hf_assisted" and h["gamma"] == r["gamma"])
        for r in ours
    ]
    return {
        "regime": regime,
        "prompt_tokens": prompt_tokens,
        "new_tokens": max_new,
        "alpha": round(alpha, 4),
        "c": round(c, 4),
        "target_step_ms": round(1000 * target_step, 3),
        "draft_step_ms": round(1000 * draft_step, 3),
        "outputs_identical_to_greedy": bool(identical),
        "best_gamma_measured": best["gamma"],
        "best_speedup_measured": best["speedup"],
        "predicted_at_best_gamma": best["predicted_speedup"],
        "measured_over_predicted": round(best["speedup"] / best["predicted_speedup"], 3),
        "predicted_with_verify_cost_at_best_gamma": best["predicted_with_verify_cost"],
        "measured_over_predicted_with_verify_cost": round(best["speedup"] / best["predicted_with_verify_cost"], 3),
        "best_gamma_predicted": best_predicted["gamma"],
        "best_speedup_predicted": best_predicted["predicted_speedup"],
        "ours_over_hf_assisted_at_best_gamma": round(best["tokens_per_s"] / hf_at_best["tokens_per_s"], 3),
        "ours_over_hf_assisted_min": round(min(hf_ratio), 3),
        "ours_over_hf_assisted_max": round(max(hf_ratio), 3),
        "best_gamma_prompt_lookup": best_lookup["gamma"],
        "best_speedup_prompt_lookup": best_lookup["speedup"],
        "by_gamma": [by_gamma(rows, gamma) for gamma in sorted({r["gamma"] for r in ours})],
        "rows": [r for r in rows if r["method"] != "verify_cost"],
        "verify_cost": [
            {"gamma": r["gamma"], "target_verify_over_step": r["target_verify_over_step"]}
            for r in rows
            if r["method"] == "verify_cost"
        ],
    }


def by_gamma(rows: list[dict], gamma: int) -> dict:
    """Return one table row: every method's speed-up at one gamma, beside the predicted one."""
    at = {r["method"]: r for r in rows if r["gamma"] == gamma}
    return {
        "gamma": gamma,
        "predicted": at["ours_speculative"]["predicted_speedup"],
        "predicted, verify measured": at["ours_speculative"]["predicted_with_verify_cost"],
        "ours speculative": at["ours_speculative"]["speedup"],
        "transformers assisted": at["hf_assisted"]["speedup"],
        "ours prompt lookup": at["ours_prompt_lookup"]["speedup"],
        "transformers prompt lookup": at["hf_prompt_lookup"]["speedup"],
        "target verify / step": at["verify_cost"]["target_verify_over_step"],
    }


# ----------------------------------------------------------------------------------------------
# Token trees.


def tree_experiment(target, draft, tokenizer, repeat: int, new_tokens: int | None) -> dict:
    """Return tokens per target call and time for a chain and a few tree shapes on the long prompt."""
    prompt, max_new = REGIMES["long"]
    max_new = new_tokens or max_new
    ids = tokenizer(prompt, return_tensors="pt").input_ids
    reference = plain_greedy(target, ids, max_new)
    runs = {
        name: (lambda shape=shape: tree_speculative_decode(target, draft, ids, max_new, shape))
        for name, shape in TREE_SHAPES.items()
    }
    runs["plain"] = lambda: plain_greedy(target, ids, max_new)
    times, outputs = timed_runs(runs, repeat)
    del outputs["plain"]
    rows = [
        {
            "shape": name,
            "nodes_per_tree": sum(_nodes(TREE_SHAPES[name])),
            "tokens_per_target_call": round(out.tokens_per_target_call, 3),
            "target_calls": out.target_calls,
            "speedup": round(times["plain"] / times[name], 3),
        }
        for name, out in outputs.items()
    ]
    chain = rows[0]
    return {
        "new_tokens": max_new,
        "outputs_identical_to_greedy": all(torch.equal(o.sequences, reference) for o in outputs.values()),
        "best_tree_tokens_per_call": max(r["tokens_per_target_call"] for r in rows[1:]),
        "chain_tokens_per_call": chain["tokens_per_target_call"],
        "tree_over_chain_tokens_per_call": round(
            max(r["tokens_per_target_call"] for r in rows[1:]) / chain["tokens_per_target_call"], 3
        ),
        "rows": rows,
    }


def _nodes(shape: tuple[int, ...]) -> list[int]:
    """Return the number of tree nodes at each depth for a branching shape."""
    counts, width = [], 1
    for branches in shape:
        width *= branches
        counts.append(width)
    return counts


# ----------------------------------------------------------------------------------------------
# Figures and the command line.


def plot_exactness(values: dict, path: Path) -> None:
    import matplotlib.pyplot as plt

    rows = values["rows"]
    x = range(len(rows))
    fig, ax = plt.subplots(figsize=(7, 3.2))
    ax.bar([i - 0.27 for i in x], [r["draft_q"] for r in rows], 0.27, label="draft q (exact)", color="#bbbbbb")
    ax.bar(list(x), [r["target_p"] for r in rows], 0.27, label="target p (exact)", color="#3f51b5")
    ax.bar([i + 0.27 for i in x], [r["sampled"] for r in rows], 0.27, label="speculative samples", color="#ffb300")
    ax.set_xticks(list(x), [r["sequence"] for r in rows])
    ax.set_xlabel("two-token continuation")
    ax.set_ylabel("probability")
    ax.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def plot_regime(record: dict, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    styles = {
        "ours_speculative": ("o-", "#3f51b5", "ours: speculative"),
        "hf_assisted": ("s--", "#7986cb", "transformers: assistant_model"),
        "ours_prompt_lookup": ("^-", "#e65100", "ours: prompt lookup"),
        "hf_prompt_lookup": ("v--", "#ffb74d", "transformers: prompt_lookup_num_tokens"),
    }
    for method, (style, color, label) in styles.items():
        rows = [r for r in record["rows"] if r["method"] == method]
        ax.plot([r["gamma"] for r in rows], [r["speedup"] for r in rows], style, color=color, label=label)
    ours = [r for r in record["rows"] if r["method"] == "ours_speculative"]
    ax.plot(
        [r["gamma"] for r in ours],
        [r["predicted_speedup"] for r in ours],
        ":",
        color="black",
        label=f"predicted (alpha={record['alpha']:.2f}, c={record['c']:.2f})",
    )
    ax.plot(
        [r["gamma"] for r in ours],
        [r["predicted_with_verify_cost"] for r in ours],
        "-.",
        color="grey",
        label="predicted, with the measured cost of verifying",
    )
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xticks(sorted({r["gamma"] for r in ours}))
    ax.set_xlabel("gamma (drafted tokens per round)")
    ax.set_ylabel("speed-up over plain decoding")
    ax.set_title(f"{record['regime']} prompt, {record['new_tokens']} new tokens")
    # Below the axes: six curves leave no empty corner for a legend inside.
    ax.legend(frameon=False, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def plot_tree(values: dict, path: Path) -> None:
    import matplotlib.pyplot as plt

    rows = values["rows"]
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.bar([r["shape"] for r in rows], [r["tokens_per_target_call"] for r in rows], color="#3f51b5")
    ax.set_ylabel("tokens per target call")
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def _progress(iterable, description: str):
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency
        return iterable
    return tqdm(iterable, desc=description, leave=False)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Speculative decoding benchmarks (writes docs/results/speculative_*.json)."
    )
    parser.add_argument("--quick", action="store_true", help="a small run: gamma 1, 3, 5; one repeat; fewer draws")
    parser.add_argument(
        "--parts", nargs="+", default=["exactness", "gamma", "tree"], choices=["exactness", "gamma", "tree"]
    )
    parser.add_argument("--target", help="target model (Hugging Face id or local path); default: the bundled pair")
    parser.add_argument("--draft", help="draft model (Hugging Face id or local path); default: the bundled pair")
    parser.add_argument("--gammas", type=int, nargs="+", help="gammas to sweep (default 1..10)")
    parser.add_argument("--repeat", type=int, help="timed repeats per method (default 2, quick 1)")
    parser.add_argument("--draws", type=int, help="exactness draws (default 20000, quick 4000)")
    parser.add_argument("--new-tokens", type=int, help="override the regimes' 64 / 128 new tokens")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's own choice)")
    args = parser.parse_args(argv)
    args.gammas = args.gammas or ([1, 3, 5] if args.quick else list(range(1, 11)))
    args.repeat = args.repeat or (1 if args.quick else 2)
    args.draws = args.draws or (4000 if args.quick else 20_000)
    if any(g < 1 for g in args.gammas) or args.repeat < 1 or args.draws < 1 or (args.threads or 1) < 1:
        parser.error("gammas, --repeat, --draws and --threads must be integers >= 1")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.threads:
        torch.set_num_threads(args.threads)
    figures = figures_dir()
    if "exactness" in args.parts:
        values = exactness_experiment(args.draws)
        print(f"exactness: chi-square p = {values['chi_square_p_value']:.3f}, alpha = {values['alpha']:.3f}")
        write_result("speculative_exactness", values)
        plot_exactness(values, figures / "exactness.png")
    if {"gamma", "tree"} & set(args.parts):
        target, draft, tokenizer = load_pair(args.target, args.draft, device=args.device)
        for model in (target, draft):
            model.generation_config.eos_token_id = None  # fixed-length runs, as in our decoders
            model.generation_config.pad_token_id = 0
    if "gamma" in args.parts:
        regimes = {
            name: sweep_regime(target, draft, tokenizer, name, args.gammas, args.repeat, args.new_tokens)
            for name in REGIMES
        }
        for name, record in regimes.items():
            print(
                f"{name}: alpha={record['alpha']:.3f} c={record['c']:.3f} best gamma {record['best_gamma_measured']} "
                f"speed-up {record['best_speedup_measured']:.2f}x (predicted {record['predicted_at_best_gamma']:.2f}x), "
                f"ours/transformers {record['ours_over_hf_assisted_at_best_gamma']:.2f}, identical={record['outputs_identical_to_greedy']}"
            )
            plot_regime(record, figures / f"gamma_sweep_{name}.png")
        summary_keys = (
            "regime",
            "alpha",
            "c",
            "best_gamma_measured",
            "best_speedup_measured",
            "predicted_at_best_gamma",
            "measured_over_predicted",
            "measured_over_predicted_with_verify_cost",
            "ours_over_hf_assisted_at_best_gamma",
            "best_speedup_prompt_lookup",
        )
        summary = [{key: record[key] for key in summary_keys} for record in regimes.values()]
        regimes |= {
            "gammas": args.gammas,
            "repeat": args.repeat,
            "threads": torch.get_num_threads(),
            "summary": summary,
        }
        write_result("speculative_gamma_sweep", regimes)
    if "tree" in args.parts:
        values = tree_experiment(target, draft, tokenizer, args.repeat, args.new_tokens)
        print(
            f"tree: {values['best_tree_tokens_per_call']:.2f} vs chain {values['chain_tokens_per_call']:.2f} tokens per target call"
        )
        write_result("speculative_tree", values)
        plot_tree(values, figures / "tree.png")


if __name__ == "__main__":
    main()
