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
- ``tree``: chain vs token-tree drafting: tokens per target call (12 prompts) and time (the long prompts).

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

from inferlab.bench import repo_root, spread, time_interleaved, write_result
from inferlab.bench.figures import save_figure
from inferlab.models import load_pair, load_tokenizer
from inferlab.speculative.alpha import UNSEEN_PROMPTS, fit_draft_temperature, greedy_alpha
from inferlab.speculative.formulas import (
    expected_run_speedup,
    expected_speedup,
    expected_tokens_per_step,
    run_speedup,
    run_steps,
)
from inferlab.speculative.prompt_lookup import prompt_lookup_decode
from inferlab.speculative.runner import IncrementalModel
from inferlab.speculative.sampler import speculative_sample
from inferlab.speculative.tree import DynamicTree, tree_level_sizes, tree_speculative_decode

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

# More prompts of each regime's kind, written for this site, for the theory check. Over one prompt
# the target calls a run needs can be several percent off the formula's expectation, because
# agreement comes in runs rather than as independent coin tosses. Timed together, each predicted
# with its own alpha and its own measured costs, several prompts average those errors out.
MORE_SHORT_PROMPTS = ["def is_prime(n):\n", "class Counter:\n", "def read_numbers(path):\n"]
MORE_LONG_PROMPTS = [
    '''class Library:
    """Lend books to members and keep track of who has which."""

    def __init__(self):
        self.books = {}
        self.loans = {}

    def add_book(self, title, copies):
        if copies < 1:
            raise ValueError("copies must be >= 1")
        self.books[title] = self.books.get(title, 0) + copies

    def lend(self, title, member):
        if self.books.get(title, 0) < 1:
            raise ValueError("no copy left")
        self.books[title] = self.books[title] - 1
        self.loans.setdefault(member, []).append(title)

    def give_back(self, title, member):
        if title not in self.loans.get(member, []):
            raise ValueError("this member does not have this book")
        self.loans[member].remove(title)
        self.books[title] = self.books[title] + 1

    def borrowed(self, member):
        return list(self.loans.get(member, []))

    def available(self):
''',
    '''def read_scores(path):
    """Return a dict from each player's name to the list of their scores."""
    scores = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, _, value = line.partition(",")
            scores.setdefault(name, []).append(int(value))
    return scores


def best_score(scores, name):
    if name not in scores:
        raise KeyError(name)
    return max(scores[name])


def average_score(scores, name):
    if name not in scores:
        raise KeyError(name)
    return sum(scores[name]) / len(scores[name])


def ranking(scores):
    names = list(scores)
    names.sort(key=lambda name: best_score(scores, name), reverse=True)
    return names


def write_scores(scores, path):
''',
]
THEORY_PROMPTS = {"short": [SHORT_PROMPT, *MORE_SHORT_PROMPTS], "long": [LONG_PROMPT, *MORE_LONG_PROMPTS]}
METHODS = ("ours_speculative", "ours_prompt_lookup", "hf_assisted", "hf_prompt_lookup")
# Chains and dynamic trees (EAGLE-2's kind) at equal node budgets, plus two trees of fixed shape
# (SpecInfer's kind: b1-b2-... holds b1 + b1*b2 + ... nodes) to show why a fixed shape loses.
TREE_BUDGETS = (4, 6, 8, 10, 12)
TREE_WIDTH = 2  # paths a dynamic tree keeps growing at each depth
FIXED_TREES = {"fixed 2-1-1-1": (2, 1, 1, 1), "fixed 2-2-1": (2, 2, 1)}
# Dynamic trees drafted no deeper than the best chain, with more nodes to check: the depth sets the
# drafting cost, the nodes what the target checks (found by measurement to be this pair's fastest).
SHALLOW_DYNAMIC = {"dynamic 10, depth 8": (10, 8), "dynamic 12, depth 8": (12, 8)}
# One path grown, as a chain is, with the draft's second guess under each of its tokens as a candidate:
# the chain's drafting cost, and a few more nodes for the target to check where the draft hesitates.
SECOND_GUESSES = {"second guesses 10, depth 8": (10, 8), "second guesses 11, depth 8": (11, 8)}


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
#
# The same weights run on two runtimes: inferlab's own LlamaDecoder (a preallocated KV cache,
# little per-call overhead) and transformers. Every speed-up is measured against the fastest plain
# greedy loop for the pair, whichever runtime that is, timed in the same rounds as the method
# (round-robin, so machine noise hits all alike). The theory check compares each runtime's
# speculative decoder with plain decoding on the same runtime, since that is what the formula
# predicts.


def plain_greedy(model, ids: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
    """Return the greedy continuation with a KV cache, one model call per token: the baseline loop.

    It runs through the same :class:`IncrementalModel` as the speculative decoders, so both loops use
    the same kernels and the same per-call overhead and differ only in speculation. (The kvcache
    chapter's ``generate_cached`` reads the cache with the explicit, readable attention, which costs
    some 7% more per token at the long prompt's lengths: as a baseline it would flatter speculation.)
    """
    runner = IncrementalModel(model)
    for _ in range(max_new_tokens):
        next_token = runner.new_logits(ids)[-1].argmax().view(1, 1)
        ids = torch.cat([ids, next_token.cpu()], 1)
    return ids


def hf_generate(model, ids: torch.Tensor, max_new_tokens: int, **kwargs) -> torch.Tensor:
    """Return transformers' own greedy ``generate`` output (no early stop at end-of-text)."""
    with torch.inference_mode():
        return model.generate(
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens, do_sample=False, **kwargs
        ).cpu()


def timed_runs(runs: dict, repeat: int) -> tuple[dict[str, list[float]], dict]:
    """Run every method ``repeat`` times round-robin; return each one's seconds and its last output.

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
    return seconds, outputs


def set_assistant_gamma(draft, gamma: int) -> None:
    """Make transformers draft exactly gamma tokens per round, like our decoder (no adaptive schedule)."""
    draft.generation_config.num_assistant_tokens = gamma
    draft.generation_config.num_assistant_tokens_schedule = "constant"
    draft.generation_config.assistant_confidence_threshold = 0.0


def method_runs(pairs: dict, ids: torch.Tensor, max_new: int, gamma: int) -> dict:
    """Return the decoders timed at one gamma: ours on both runtimes, transformers' own, prompt lookup."""
    (target, draft), (hf_target, hf_draft) = pairs["inferlab"], pairs["transformers"]
    set_assistant_gamma(hf_draft, gamma)
    return {
        "plain_inferlab": lambda: plain_greedy(target, ids, max_new),
        "plain_transformers": lambda: hf_generate(hf_target, ids, max_new),
        "ours_speculative": lambda: speculative_sample(target, draft, ids, max_new, gamma, temperature=0),
        "ours_speculative_transformers": lambda: speculative_sample(
            hf_target, hf_draft, ids, max_new, gamma, temperature=0
        ),
        "hf_assisted": lambda: hf_generate(hf_target, ids, max_new, assistant_model=hf_draft),
        "ours_prompt_lookup": lambda: prompt_lookup_decode(target, ids, max_new, max_ngram=3, num_draft=gamma),
        "hf_prompt_lookup": lambda: hf_generate(
            hf_target, ids, max_new, prompt_lookup_num_tokens=gamma, max_matching_ngram_size=3
        ),
    }


def step_timers(target, draft, ids: torch.Tensor, gammas: list[int]) -> dict:
    """Return callables for the costs of decoding after ``ids``; each leaves both caches as it found them.

    - ``target step``: one token after ``ids``;
    - ``verify g``: the target's call over g + 1 tokens;
    - ``round g``: a whole round as the decoder runs it, that call and then g one-token draft steps
      (right after the target, whose weights have just pushed the draft's out of the CPU caches).
    """
    target_runner, draft_runner = IncrementalModel(target), IncrementalModel(draft)
    target_runner.new_logits(ids)
    draft_runner.new_logits(ids)

    def read_and_forget(runner: IncrementalModel, extra: int) -> None:
        runner.new_logits(torch.cat([ids, torch.zeros(1, extra, dtype=torch.long)], 1))
        runner.rollback(ids.shape[1])

    def one_round(gamma: int) -> None:
        read_and_forget(target_runner, gamma + 1)
        for drafted in range(1, gamma + 1):
            draft_runner.new_logits(torch.cat([ids, torch.zeros(1, drafted, dtype=torch.long)], 1))
        draft_runner.rollback(ids.shape[1])

    timers = {"target step": lambda: read_and_forget(target_runner, 1)}
    for gamma in gammas:
        timers[f"verify {gamma}"] = lambda gamma=gamma: read_and_forget(target_runner, gamma + 1)
        timers[f"round {gamma}"] = lambda gamma=gamma: one_round(gamma)
    return timers


def prompt_timers(target, draft, ids: torch.Tensor) -> dict:
    """Return callables that read the prompt into an empty cache, as every run does once, per model."""
    return {
        "prompt target": lambda: IncrementalModel(target).new_logits(ids),
        "prompt draft": lambda: IncrementalModel(draft).new_logits(ids),
    }


def warm_step_seconds(model, ids: torch.Tensor, repeat: int) -> float:
    """Return the median time of one step after ``ids``, steps taken back to back: c as the papers mean it,
    a draft step on its own (the model card times it the same way, in blocks of steps)."""
    runner = IncrementalModel(model)
    runner.new_logits(ids)
    grown = torch.cat([ids, torch.zeros(1, 1, dtype=torch.long)], 1)

    def step() -> None:
        runner.new_logits(grown)
        runner.rollback(ids.shape[1])

    return time_interleaved({"step": step}, repeat, warmup=2)["step"]["median_s"]


def runtime_costs(
    pairs: dict, ids: torch.Tensor, gammas: list[int], repeat: int, context: torch.Tensor | None = None
) -> dict:
    """Return each runtime's step times and c, and in target steps: checking gamma + 1 tokens, a whole
    round (the check, then gamma draft steps), and reading the prompt ``ids`` (target and draft).

    The decoding costs are timed after ``context`` (default ``ids``): the prompt and half the run's
    new tokens, the mean length the run's calls read, since a call over a longer cache costs more.
    They are timed round-robin with each other (``time_interleaved``), so that a slow spell of the
    machine hits them all alike instead of one gamma; the prompt reads round-robin apart, because
    each one sweeps a fresh cache through the CPU's caches, which a run's rounds never do (timed
    between prompt reads, a round cost some 8% more than in a run).
    """
    context = ids if context is None else context
    costs = {}
    for runtime, (target, draft) in pairs.items():
        median = {
            name: timing["median_s"]
            for timers in (step_timers(target, draft, context, gammas), prompt_timers(target, draft, ids))
            for name, timing in time_interleaved(timers, 10 * repeat, 2).items()
        }
        step = median["target step"]
        draft_step = warm_step_seconds(draft, context, 10 * repeat)
        costs[runtime] = {"target_step": step, "draft_step": draft_step, "c": draft_step / step}
        costs[runtime]["verify"] = {g: median[f"verify {g}"] / step for g in gammas}
        costs[runtime]["round"] = {g: median[f"round {g}"] / step for g in gammas}
        costs[runtime]["prompt"] = median["prompt target"] / step
        costs[runtime]["draft_prompt"] = median["prompt draft"] / step
    return costs


def mid_run(reference: torch.Tensor, ids: torch.Tensor, new_tokens: int) -> torch.Tensor:
    """Return the prompt and the first half of its greedy continuation: where a run's mean call reads."""
    return reference[:, : ids.shape[1] + new_tokens // 2]


def sweep_regime(pairs: dict, tokenizer, regime: str, gammas: list[int], repeat: int, new_tokens: int | None) -> dict:
    """Return the measured and predicted speed-ups of every method at every gamma for one prompt regime."""
    prompt, max_new = REGIMES[regime]
    max_new = new_tokens or max_new
    ids = tokenizer(prompt, return_tensors="pt").input_ids
    target, draft = pairs["inferlab"]
    reference = plain_greedy(target, ids, max_new)
    alpha = greedy_alpha(target, draft, ids, max_new)  # the one definition of alpha (speculative/alpha.py)
    costs = runtime_costs(pairs, ids, gammas, repeat, context=mid_run(reference, ids, max_new))
    more_prompts = {
        f"prompt {number}": tokenizer(text, return_tensors="pt").input_ids
        for number, text in enumerate(THEORY_PROMPTS[regime][1:], start=2)
    }
    pool = {
        name: theory_prompt(pairs["inferlab"], more_ids, gammas, repeat, max_new)
        for name, more_ids in more_prompts.items()
    }
    # Plain decoding's seconds per runtime and per gamma: each gamma's block of runs is timed
    # round-robin, and every speed-up divides by the plain runs of its own block, so that a slow
    # spell of the machine during one block slows both sides of its ratio alike.
    plain_seconds: dict[str, dict[int, list[float]]] = {"plain_inferlab": {}, "plain_transformers": {}}
    rows, identical, run_alpha = [], True, []
    for gamma in _progress(gammas, f"{regime} prompts, gamma"):
        # The theory check's other prompts run round-robin with every method on the regime's own prompt.
        runs = method_runs(pairs, ids, max_new, gamma) | theory_runs(target, draft, more_prompts, max_new, gamma)
        seconds, outputs = timed_runs(runs, repeat)
        for name, record in pool.items():
            identical &= record_theory_runs(record, name, gamma, seconds, outputs)
        for name, by_gamma in plain_seconds.items():
            by_gamma[gamma] = seconds.pop(name)
        for out in outputs.values():
            sequence = out.sequences if hasattr(out, "sequences") else out
            identical &= torch.equal(sequence[:, : reference.shape[1]], reference)
        run_alpha += outputs["ours_speculative"].acceptance_probs
        for method, times in seconds.items():
            row = {"gamma": gamma, "method": method, "seconds": round(statistics.median(times), 4)}
            row |= {"tokens_per_s": round(max_new / row["seconds"], 1), "spread": spread(times)}
            if method in ("ours_speculative", "ours_prompt_lookup", "ours_speculative_transformers"):
                row["target_calls"] = outputs[method].target_calls
            rows.append(row)
    all_plain = {name: [s for times in by_gamma.values() for s in times] for name, by_gamma in plain_seconds.items()}
    plain = {name: statistics.median(times) for name, times in all_plain.items()}
    add_speedups(rows, plain_seconds, min(plain, key=plain.get), costs, alpha, max_new)
    own = [r for r in rows if r["method"] == "ours_speculative"]
    pool = {
        "prompt 1": {
            "alpha": alpha,
            "cost": costs["inferlab"],
            "plain": plain_seconds["plain_inferlab"],
            "speculative": {r["gamma"]: r["seconds"] for r in own},
            "calls": {r["gamma"]: r["target_calls"] for r in own},
        }
    } | pool
    theory = [pooled_theory(pool, gamma, max_new) for gamma in gammas]
    record = summarize(regime, rows, alpha, run_alpha, costs, plain, all_plain, max_new, ids.shape[1], identical)
    return record | theory_summary(theory, pool)


def add_speedups(rows: list[dict], plain_seconds: dict, fastest: str, costs: dict, alpha: float, max_new: int) -> None:
    """Give each row its speed-up over the fastest plain loop (``fastest``, timed in the row's own block),
    and each speculative row its speed-up over plain decoding on its own runtime and the predictions."""
    for row in rows:
        gamma = row["gamma"]
        block = {name: statistics.median(by_gamma[gamma]) for name, by_gamma in plain_seconds.items()}
        row["speedup"] = round(block[fastest] / row["seconds"], 3)
        runtime = "transformers" if row["method"] in ("ours_speculative_transformers", "hf_assisted") else "inferlab"
        if row["method"] not in ("ours_speculative", "ours_speculative_transformers"):
            continue
        cost = costs[runtime]
        row["speedup_same_runtime"] = round(block[f"plain_{runtime}"] / row["seconds"], 3)
        row["predicted_speedup"] = round(expected_speedup(alpha, gamma, cost["c"]), 3)
        # The same formula with the target's measured cost of checking gamma + 1 tokens.
        row["predicted_with_verify_cost"] = round(expected_speedup(alpha, gamma, cost["c"], cost["verify"][gamma]), 3)
        # The whole run as timed: the prompt read once, gamma draft steps in a real round, the check.
        whole_run = expected_run_speedup(
            alpha, gamma, max_new, cost["round"][gamma], cost["prompt"], cost["draft_prompt"]
        )
        row["predicted_whole_run"] = round(whole_run, 3)
        row["measured_over_predicted"] = round(row["speedup_same_runtime"] / whole_run, 3)
        # The same costs with the rounds this run really needed instead of the formula's
        # expectation: what is left is the cost model's own error, not the acceptance model's.
        counted = run_speedup(max_new, row["target_calls"], cost["round"][gamma], cost["prompt"], cost["draft_prompt"])
        row["measured_over_cost_model"] = round(row["speedup_same_runtime"] / counted, 3)


def theory_prompt(pair: tuple, ids: torch.Tensor, gammas: list[int], repeat: int, new_tokens: int) -> dict:
    """Return one more prompt's entry for the theory check: its own alpha and its own measured costs
    on inferlab's decoder; the timings are filled in while the sweep runs."""
    target, draft = pair
    reference = plain_greedy(target, ids, new_tokens)
    context = mid_run(reference, ids, new_tokens)
    return {
        "alpha": greedy_alpha(target, draft, ids, new_tokens),
        "cost": runtime_costs({"inferlab": pair}, ids, gammas, repeat, context=context)["inferlab"],
        "plain": {},
        "speculative": {},
        "calls": {},
        "reference": reference,
    }


def theory_runs(target, draft, prompts: dict[str, torch.Tensor], new_tokens: int, gamma: int) -> dict:
    """Return plain and speculative decoding of each of the theory check's other prompts, on inferlab's decoder."""
    runs = {}
    for name, ids in prompts.items():
        runs[f"plain_inferlab {name}"] = lambda ids=ids: plain_greedy(target, ids, new_tokens)
        runs[f"ours_speculative {name}"] = lambda ids=ids: speculative_sample(
            target, draft, ids, new_tokens, gamma, temperature=0
        )
    return runs


def record_theory_runs(record: dict, name: str, gamma: int, seconds: dict, outputs: dict) -> bool:
    """Move one prompt's timings out of ``seconds`` into its entry; return whether both outputs equal greedy."""
    record["plain"][gamma] = seconds.pop(f"plain_inferlab {name}")
    record["speculative"][gamma] = statistics.median(seconds.pop(f"ours_speculative {name}"))
    speculative = outputs.pop(f"ours_speculative {name}")
    record["calls"][gamma] = speculative.target_calls
    plain = outputs.pop(f"plain_inferlab {name}")
    reference = record["reference"]
    return torch.equal(plain, reference) and torch.equal(speculative.sequences[:, : reference.shape[1]], reference)


def pooled_theory(pool: dict, gamma: int, new_tokens: int) -> dict:
    """Return the theory check at one gamma over all of a regime's prompts timed together.

    Measured: the plain runs' total time over the speculative runs' total, both from this gamma's own
    block of round-robin runs (medians per prompt). Predicted: the same totals
    from each prompt's own alpha and costs (in seconds: steps times that prompt's target step), with
    the formula's expected rounds, and again with the rounds the runs really needed (the cost model alone).
    """
    measured = sum(statistics.median(p["plain"][gamma]) for p in pool.values()) / sum(
        p["speculative"][gamma] for p in pool.values()
    )

    def expected_rounds(p: dict) -> float:
        return new_tokens / expected_tokens_per_step(p["alpha"], gamma)

    def predicted(rounds) -> float:
        plain = speculative = 0.0
        for p in pool.values():
            cost = p["cost"]
            steps = run_steps(new_tokens, rounds(p), cost["round"][gamma], cost["prompt"], cost["draft_prompt"])
            plain, speculative = plain + steps[0] * cost["target_step"], speculative + steps[1] * cost["target_step"]
        return plain / speculative

    expected = predicted(expected_rounds)
    return {
        "gamma": gamma,
        "measured": round(measured, 3),
        "predicted, whole run measured": round(expected, 3),
        "measured ÷ predicted": round(measured / expected, 3),
        "measured ÷ cost model": round(measured / predicted(lambda p: p["calls"][gamma]), 3),
        "target calls, counted": sum(p["calls"][gamma] for p in pool.values()),
        "target calls, formula": round(sum(expected_rounds(p) for p in pool.values()), 1),
    }


def theory_summary(theory: list[dict], pool: dict) -> dict:
    """Return the theory check over all of the regime's prompts: its table and its range over gamma
    (the ``measured_over_*`` ranges beside it are the regime's own prompt alone)."""
    return {
        "theory_prompts": len(pool),
        "theory_alphas": [round(p["alpha"], 3) for p in pool.values()],
        "theory": theory,
        "pooled_measured_over_predicted_min": min(t["measured ÷ predicted"] for t in theory),
        "pooled_measured_over_predicted_max": max(t["measured ÷ predicted"] for t in theory),
        "pooled_measured_over_cost_model_min": min(t["measured ÷ cost model"] for t in theory),
        "pooled_measured_over_cost_model_max": max(t["measured ÷ cost model"] for t in theory),
    }


def best(rows: list[dict], method: str) -> dict:
    """Return the row of ``method`` with the highest speed-up."""
    return max((r for r in rows if r["method"] == method), key=lambda r: r["speedup"])


def at_gamma(rows: list[dict], method: str, gamma: int) -> dict:
    return next(r for r in rows if r["method"] == method and r["gamma"] == gamma)


def summarize(regime, rows, alpha, run_alpha, costs, plain, plain_seconds, max_new, prompt_tokens, identical) -> dict:
    """Return the regime's record with the headline ratios the pages quote."""
    ours, ours_hf = best(rows, "ours_speculative"), best(rows, "ours_speculative_transformers")
    lookup = best(rows, "ours_prompt_lookup")
    theory = [r["measured_over_predicted"] for r in rows if r["method"] == "ours_speculative"]
    cost_model = [r["measured_over_cost_model"] for r in rows if r["method"] == "ours_speculative"]
    over_hf = [
        r["tokens_per_s"] / at_gamma(rows, "hf_assisted", r["gamma"])["tokens_per_s"]
        for r in rows
        if r["method"] == "ours_speculative"
    ]
    return {
        "regime": regime,
        "prompt_tokens": prompt_tokens,
        "new_tokens": max_new,
        "alpha": round(alpha, 4),
        "alpha_counted_in_runs": round(sum(run_alpha) / len(run_alpha), 4) if run_alpha else None,
        "c": round(costs["inferlab"]["c"], 4),
        "c_transformers": round(costs["transformers"]["c"], 4),
        "target_step_ms": round(1000 * costs["inferlab"]["target_step"], 3),
        "draft_step_ms": round(1000 * costs["inferlab"]["draft_step"], 3),
        "target_step_ms_transformers": round(1000 * costs["transformers"]["target_step"], 3),
        "draft_step_ms_transformers": round(1000 * costs["transformers"]["draft_step"], 3),
        "plain_inferlab_tokens_per_s": round(max_new / plain["plain_inferlab"], 1),
        "plain_transformers_tokens_per_s": round(max_new / plain["plain_transformers"], 1),
        "plain_inferlab_spread": spread(plain_seconds["plain_inferlab"]),
        "plain_transformers_spread": spread(plain_seconds["plain_transformers"]),
        "outputs_identical_to_greedy": bool(identical),
        "best_gamma_measured": ours["gamma"],
        "best_speedup_measured": ours["speedup"],
        "predicted_with_verify_cost_at_best_gamma": ours["predicted_with_verify_cost"],
        "predicted_whole_run_at_best_gamma": ours["predicted_whole_run"],
        "prompt_read_in_target_steps": round(costs["inferlab"]["prompt"], 2),
        "measured_over_predicted_whole_run": ours["measured_over_predicted"],
        "measured_over_predicted_min": min(theory),
        "measured_over_predicted_max": max(theory),
        "measured_over_cost_model_min": min(cost_model),
        "measured_over_cost_model_max": max(cost_model),
        "best_gamma_transformers_pair": ours_hf["gamma"],
        "best_speedup_transformers_pair": ours_hf["speedup"],
        "ours_over_hf_assisted_at_best_gamma": round(
            ours["tokens_per_s"] / at_gamma(rows, "hf_assisted", ours["gamma"])["tokens_per_s"], 3
        ),
        "ours_over_hf_assisted_min": round(min(over_hf), 3),
        "best_gamma_prompt_lookup": lookup["gamma"],
        "best_speedup_prompt_lookup": lookup["speedup"],
        "max_spread": max(r["spread"] for r in rows),
        "by_gamma": [by_gamma(rows, gamma, costs, alpha, max_new) for gamma in sorted({r["gamma"] for r in rows})],
        "rows": rows,
    }


def by_gamma(rows: list[dict], gamma: int, costs: dict, alpha: float, new_tokens: int) -> dict:
    """Return one table row: every method's speed-up at one gamma, beside the predicted one, and the
    target calls our run needed beside the formula's expectation (acceptance as independent coin tosses)."""
    at = {r["method"]: r for r in rows if r["gamma"] == gamma}
    return {
        "gamma": gamma,
        "predicted": at["ours_speculative"]["predicted_speedup"],
        "predicted, verify measured": at["ours_speculative"]["predicted_with_verify_cost"],
        "predicted, whole run measured": at["ours_speculative"]["predicted_whole_run"],
        "ours speculative (inferlab)": at["ours_speculative"]["speedup"],
        "ours speculative (transformers)": at["ours_speculative_transformers"]["speedup"],
        "transformers assisted": at["hf_assisted"]["speedup"],
        "ours prompt lookup": at["ours_prompt_lookup"]["speedup"],
        "transformers prompt lookup": at["hf_prompt_lookup"]["speedup"],
        "target verify / step": round(costs["inferlab"]["verify"][gamma], 3),
        "round / step": round(costs["inferlab"]["round"][gamma], 3),
        "target calls, counted": at["ours_speculative"]["target_calls"],
        "target calls, formula": round(new_tokens / expected_tokens_per_step(alpha, gamma), 1),
    }


# ----------------------------------------------------------------------------------------------
# Token trees.


def tree_shapes(temperature: float) -> dict[str, tuple[int, ...] | DynamicTree]:
    """Return every shape the experiment runs: a chain and a dynamic tree per budget, then the fixed trees."""
    shapes: dict[str, tuple[int, ...] | DynamicTree] = {}
    for nodes in TREE_BUDGETS:
        shapes[f"chain {nodes}"] = (1,) * nodes
        shapes[f"dynamic {nodes}"] = DynamicTree(nodes, depth=nodes, width=TREE_WIDTH, temperature=temperature)
    for name, (nodes, depth) in SHALLOW_DYNAMIC.items():
        shapes[name] = DynamicTree(nodes, depth=depth, width=TREE_WIDTH, temperature=temperature)
    for name, (nodes, depth) in SECOND_GUESSES.items():
        shapes[name] = DynamicTree(nodes, depth=depth, width=1, temperature=temperature, children=2)
    return shapes | FIXED_TREES


def nodes_in(shape: tuple[int, ...] | DynamicTree) -> int:
    return shape.nodes if isinstance(shape, DynamicTree) else sum(tree_level_sizes(shape))


def calibration_prompts(tokenizer, count: int = 16, length: int = 32) -> list[torch.Tensor]:
    """Return windows of the training corpus's held-out files: never the prompts being measured."""
    from inferlab.models.evaluate import heldout_tokens, windows

    return [window[None] for window in windows(heldout_tokens(tokenizer), length, count)]


def tokens_per_call_pooled(target, draft, tokenizer, shapes: dict, new_tokens: int) -> tuple[dict, bool]:
    """Return each shape's new tokens per target call over every unseen prompt and both benchmark
    prompts together, and whether every output equals plain greedy decoding.

    One prompt of 128 tokens takes some 30 target calls, so one call more or less moves its ratio by
    3%; pooling 12 prompts makes a difference between shapes a property of the pair, not of one text.
    """
    texts = [text for _, text in UNSEEN_PROMPTS.values()] + [SHORT_PROMPT, LONG_PROMPT]
    calls, identical = dict.fromkeys(shapes, 0), True
    for text in _progress(texts, "trees, tokens per call"):
        ids = tokenizer(text, return_tensors="pt").input_ids
        reference = plain_greedy(target, ids, new_tokens)
        for name, shape in shapes.items():
            result = tree_speculative_decode(target, draft, ids, new_tokens, shape)
            identical &= torch.equal(result.sequences, reference)
            calls[name] += result.target_calls
    return {name: new_tokens * len(texts) / calls[name] for name in shapes}, identical


def time_shapes_over_prompts(
    target, draft, prompts: list[torch.Tensor], shapes: dict, new_tokens: int, repeat: int
) -> tuple[dict[str, list[float]], dict, bool]:
    """Time plain decoding and every shape on every prompt, round-robin; return each one's total seconds
    per repeat (summed over the prompts), its outputs on the first prompt, and whether all equal greedy.

    One prompt's wall time moves by more than the tree and the chain differ; summed over several
    prompts and paired repeat by repeat, a slow spell of the machine hits every shape alike.
    """
    runs = {}
    for number, ids in enumerate(prompts):
        runs[f"plain {number}"] = lambda ids=ids: plain_greedy(target, ids, new_tokens)
        for name, shape in shapes.items():
            runs[f"{name} {number}"] = lambda ids=ids, shape=shape: tree_speculative_decode(
                target, draft, ids, new_tokens, shape
            )
    seconds, outputs = timed_runs(runs, repeat)
    identical = all(
        torch.equal(outputs[f"{name} {number}"].sequences, outputs[f"plain {number}"])
        for number in range(len(prompts))
        for name in shapes
    )
    totals = {
        name: [sum(seconds[f"{name} {number}"][r] for number in range(len(prompts))) for r in range(repeat)]
        for name in ["plain", *shapes]
    }
    return totals, {name: outputs[f"{name} 0"] for name in shapes}, identical


def within_spread(first: dict, second: dict) -> bool:
    """Return whether two rows' speed-ups differ by a smaller factor than the larger of their spreads."""
    gap = max(first["speedup"], second["speedup"]) / min(first["speedup"], second["speedup"])
    return gap < max(first["spread"], second["spread"])


def paired_ratios(numerator: list[float], denominator: list[float]) -> dict:
    """Return the median and the range of numerator[r] / denominator[r] over repeats r timed side by side."""
    if len(numerator) != len(denominator) or not numerator:
        raise ValueError(f"need paired timings of one length >= 1, got {len(numerator)} and {len(denominator)}")
    ratios = [n / d for n, d in zip(numerator, denominator, strict=True)]
    return {"median": round(statistics.median(ratios), 3), "min": round(min(ratios), 3), "max": round(max(ratios), 3)}


def rematch_best(target, draft, prompts, shapes: dict, tree: str, chain: str, new_tokens: int, repeat: int) -> dict:
    """Time the best tree against the best chain again, alone and paired repeat by repeat.

    Picking the fastest of many shapes from one run favours whichever had a lucky run; timing only
    the two winners afresh, round-robin, removes that selection from the comparison.
    """
    picked = {tree: shapes[tree], chain: shapes[chain]}
    totals, _, identical = time_shapes_over_prompts(target, draft, prompts, picked, new_tokens, repeat)
    return {
        "tree": tree,
        "chain": chain,
        "repeats": repeat,
        "outputs_identical_to_greedy": identical,
        # chain seconds / tree seconds: above 1 means the tree was faster in that repeat
        "tree_over_chain_speed": paired_ratios(totals[chain], totals[tree]),
    }


def tree_experiment(pairs: dict, tokenizer, repeat: int, new_tokens: int | None) -> dict:
    """Return tokens per target call (pooled over 12 prompts) and wall time (the theory check's long
    prompts together) for chains and trees of equal node budgets."""
    _, max_new = REGIMES["long"]
    max_new = new_tokens or max_new
    target, draft = pairs["inferlab"]
    temperature = fit_draft_temperature(target, draft, calibration_prompts(tokenizer), new_tokens=64)
    shapes = tree_shapes(temperature)
    per_call, identical = tokens_per_call_pooled(target, draft, tokenizer, shapes, max_new)
    prompts = [tokenizer(text, return_tensors="pt").input_ids for text in THEORY_PROMPTS["long"]]
    totals, first_prompt, timed_identical = time_shapes_over_prompts(target, draft, prompts, shapes, max_new, repeat)
    plain = statistics.median(totals.pop("plain"))
    rows = [
        {
            "shape": name,
            "nodes_per_tree": nodes_in(shape),
            "tokens_per_target_call": round(per_call[name], 3),
            "tokens_per_target_call_long_prompt": round(first_prompt[name].tokens_per_target_call, 3),
            "speedup": round(plain / statistics.median(totals[name]), 3),
            "spread": spread(totals[name]),
        }
        for name, shape in shapes.items()
    ]
    chains = [r for r in rows if r["shape"].startswith("chain")]
    trees = [r for r in rows if not r["shape"].startswith("chain")]
    same_budget = [
        {
            "nodes": nodes,
            "chain": round(per_call[f"chain {nodes}"], 3),
            "dynamic tree": round(per_call[f"dynamic {nodes}"], 3),
            "dynamic / chain": round(per_call[f"dynamic {nodes}"] / per_call[f"chain {nodes}"], 3),
        }
        for nodes in TREE_BUDGETS
    ]
    best_tree, best_chain = max(trees, key=lambda r: r["speedup"]), max(chains, key=lambda r: r["speedup"])
    rematch = rematch_best(target, draft, prompts, shapes, best_tree["shape"], best_chain["shape"], max_new, 2 * repeat)
    return {
        "new_tokens": max_new,
        "pooled_prompts": len(UNSEEN_PROMPTS) + 2,
        "timed_prompts": len(prompts),
        "draft_temperature": temperature,
        "tree_width": TREE_WIDTH,
        "outputs_identical_to_greedy": identical and timed_identical,
        "dynamic_at_least_chain_at_every_budget": all(r["dynamic / chain"] >= 1 for r in same_budget),
        "dynamic_over_chain_min": min(r["dynamic / chain"] for r in same_budget),
        "best_tree": best_tree["shape"],
        "best_tree_speedup": best_tree["speedup"],
        "best_chain": best_chain["shape"],
        "best_chain_speedup": best_chain["speedup"],
        "best_tree_over_best_chain_time": round(best_tree["speedup"] / best_chain["speedup"], 3),
        "rematch": rematch,
        "same_budget": same_budget,
        "rows": rows,
    }


# ----------------------------------------------------------------------------------------------
# Figures and the command line.


# Figures are drawn for a phone as much as for a desktop: at most 6.4 inches wide with text of at
# least 10 points (matplotlib's default), so that on a 390 px screen the smallest text is still 7.8 px.
FIGURE_DPI = 130


def plot_exactness(values: dict, path: Path) -> None:
    """Draw the exact draft and target probabilities beside the sampled frequencies, per sequence."""
    import matplotlib.pyplot as plt

    rows = values["rows"]
    x = range(len(rows))
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    ax.bar([i - 0.27 for i in x], [r["draft_q"] for r in rows], 0.27, label="draft q (exact)", color="#bbbbbb")
    ax.bar(list(x), [r["target_p"] for r in rows], 0.27, label="target p (exact)", color="#3f51b5")
    ax.bar([i + 0.27 for i in x], [r["sampled"] for r in rows], 0.27, label="speculative samples", color="#ffb300")
    # The sequences are token ids, data that reads the same in both languages: set as code.
    ax.set_xticks(list(x), [r["sequence"] for r in rows], family="monospace")
    ax.set_xlabel("two-token continuation")
    ax.set_ylabel("probability")
    ax.legend(frameon=False, fontsize=10)
    fig.tight_layout()
    save_figure(fig, path, dpi=FIGURE_DPI)
    plt.close(fig)


# method -> (line style, colour, legend label)
REGIME_STYLES = {
    "ours_speculative": ("o-", "#3f51b5", "ours: speculative (inferlab decoder)"),
    "ours_speculative_transformers": ("D-", "#9fa8da", "ours: speculative (transformers pair)"),
    "hf_assisted": ("s--", "#7986cb", "transformers: assistant_model"),
    "ours_prompt_lookup": ("^-", "#e65100", "ours: prompt lookup"),
    "hf_prompt_lookup": ("v--", "#ffb74d", "transformers: prompt_lookup_num_tokens"),
}


def plot_regime(record: dict, path: Path) -> None:
    """Draw measured and predicted speed-up against gamma for one prompt regime."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 6.6))
    for method, (style, color, label) in REGIME_STYLES.items():
        rows = [r for r in record["rows"] if r["method"] == method]
        ax.plot([r["gamma"] for r in rows], [r["speedup"] for r in rows], style, color=color, label=label)
    ours = [r for r in record["rows"] if r["method"] == "ours_speculative"]
    gammas = [r["gamma"] for r in ours]
    ax.plot(
        gammas,
        [r["predicted_speedup"] for r in ours],
        ":",
        color="black",
        label=f"predicted, idealised (α = {record['alpha']:.2f}, c = {record['c']:.2f})",
    )
    ax.plot(
        gammas,
        [r["predicted_with_verify_cost"] for r in ours],
        "-.",
        color="grey",
        label="predicted, with the measured cost of verifying",
    )
    ax.plot(
        gammas,
        [r["predicted_whole_run"] for r in ours],
        "--",
        color="black",
        label="predicted, whole run measured (prompt, drafting, checking)",
    )
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xticks(gammas)
    ax.set_xlabel("γ (drafted tokens per round)")
    ax.set_ylabel("speed-up over the fastest plain greedy loop")
    ax.set_title(f"{record['regime']} prompt, {record['new_tokens']} new tokens")
    # Below the axes, one entry a line: seven curves leave no empty corner for a legend inside,
    # and two columns would need a smaller font than a phone can show.
    ax.legend(frameon=False, fontsize=10, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=1)
    fig.tight_layout()
    save_figure(fig, path, dpi=FIGURE_DPI)
    plt.close(fig)


def plot_tree(values: dict, path: Path) -> None:
    """Draw tokens per target call and speed-up of every chain and tree shape, one above the other."""
    import matplotlib.pyplot as plt

    rows = values["rows"]
    fig, (calls, speed) = plt.subplots(2, 1, figsize=(6.4, 8.0), sharey=True)
    palette = {"chain": "#3f51b5", "dynamic": "#2e7d32", "second": "#8e24aa", "fixed": "#e65100"}
    colors = [palette[r["shape"].split()[0]] for r in rows]
    names = [f"{r['shape']} ({r['nodes_per_tree']} nodes)" for r in rows]
    y = range(len(rows))
    calls.barh(y, [r["tokens_per_target_call"] for r in rows], color=colors)
    calls.set_xlabel("tokens per target call (12 prompts pooled)")
    speed.barh(y, [r["speedup"] for r in rows], color=colors)
    speed.axvline(1.0, color="grey", linewidth=0.8)
    speed.set_xlabel("speed-up over plain greedy\n(the long prompts together)")
    calls.set_yticks(list(y), names)
    calls.invert_yaxis()  # the first shape on top, in the order the table lists them
    fig.tight_layout()
    save_figure(fig, path, dpi=FIGURE_DPI)
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
    parser.add_argument("--repeat", type=int, help="timed repeats per method (default 3, quick 1)")
    parser.add_argument("--draws", type=int, help="exactness draws (default 20000, quick 4000)")
    parser.add_argument("--new-tokens", type=int, help="override the regimes' 64 / 128 new tokens")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch CPU threads (default 1: steadier, and enough for tiny models)"
    )
    args = parser.parse_args(argv)
    args.gammas = args.gammas or ([1, 3, 5] if args.quick else list(range(1, 11)))
    args.repeat = args.repeat or (1 if args.quick else 3)
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
        pairs = {
            backend: load_pair(args.target, args.draft, backend=backend)[:2] for backend in ("inferlab", "transformers")
        }
        tokenizer = load_tokenizer(args.target)
        for model in pairs["transformers"]:
            model.generation_config.eos_token_id = None  # fixed-length runs, as in our decoders
            model.generation_config.pad_token_id = 0
    if "gamma" in args.parts:
        regimes = {
            name: sweep_regime(pairs, tokenizer, name, args.gammas, args.repeat, args.new_tokens) for name in REGIMES
        }
        for name, record in regimes.items():
            print(
                f"{name}: alpha={record['alpha']:.3f} (counted in runs {record['alpha_counted_in_runs']}) "
                f"c={record['c']:.3f}; best gamma {record['best_gamma_measured']} "
                f"speed-up {record['best_speedup_measured']:.2f}x (measured/predicted "
                f"{record['measured_over_predicted_min']:.2f}..{record['measured_over_predicted_max']:.2f}; "
                f"over {record['theory_prompts']} prompts {record['pooled_measured_over_predicted_min']:.2f}.."
                f"{record['pooled_measured_over_predicted_max']:.2f}), "
                f"transformers pair {record['best_speedup_transformers_pair']:.2f}x, "
                f"ours/transformers assisted {record['ours_over_hf_assisted_at_best_gamma']:.2f}, "
                f"identical={record['outputs_identical_to_greedy']}, max spread {record['max_spread']:.2f}"
            )
            plot_regime(record, figures / f"gamma_sweep_{name}.png")
        summary_keys = (
            "regime",
            "alpha",
            "c",
            "best_gamma_measured",
            "best_speedup_measured",
            "predicted_with_verify_cost_at_best_gamma",
            "predicted_whole_run_at_best_gamma",
            "measured_over_predicted_whole_run",
            "best_speedup_transformers_pair",
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
        values = tree_experiment(pairs, tokenizer, args.repeat, args.new_tokens)
        print(
            f"tree: best tree {values['best_tree']} {values['best_tree_speedup']:.2f}x, best chain "
            f"{values['best_chain']} {values['best_chain_speedup']:.2f}x; same budget: {values['same_budget']}"
        )
        write_result("speculative_tree", values)
        plot_tree(values, figures / "tree.png")


if __name__ == "__main__":
    main()
