"""Benchmarks and figures for the decoding pages.

    python -m inferlab.decoding.bench                      # every part (model parts need the bundled pair)
    python -m inferlab.decoding.bench --quick              # smaller sizes, fewer samples
    python -m inferlab.decoding.bench --parts table dp     # only the parts that need no model
    python -m inferlab.decoding.bench --target PATH        # another causal LM (local path or hub id)
    python -m inferlab.decoding.bench --placeholders       # "not measured yet" files until a model exists

Result files (docs/results/) and figures (docs/figures/decoding/):
    decoding_page_table.json        the guides' model: every sequence, greedy, beam, MAP,     (no model)
                                    and its Viterbi trellis
    decoding_dp_vs_bruteforce.json  operations and time vs T, DP vs brute force               (no model)
        + dp_vs_bruteforce.png
    decoding_sampling_shapes.json   one next-token distribution of the target, reshaped by
        + temperature.png, top_k.png, top_p.png   temperature / top-k / top-p
    decoding_repetition.json        distinct-n of text generated with each strategy
        + repetition.png
    decoding_perplexity.json        per-token probabilities and perplexity of one line of code
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from inferlab.bench import results_dir, time_call, write_result
from inferlab.bench.figures import save_figure as save_bilingual
from inferlab.decoding.examples import GREEDY_PAGE_LENGTH, NEXT, START, VITERBI_PAGE_LENGTH, page_model
from inferlab.decoding.sampling import distinct_n, filtered_probs, sample_next
from inferlab.decoding.search import (
    beam_search,
    dp_pairs_per_step,
    enumerate_sequences,
    greedy_decode,
    map_decode_bruteforce,
    map_decode_dp,
    token_logprobs,
    viterbi,
)
from inferlab.decoding.tables import MarkovModel

PARTS = ("table", "dp", "sampling", "repetition", "perplexity")
MODEL_PARTS = ("sampling", "repetition", "perplexity")
NOT_MEASURED = "not measured yet / 尚未測量"

# The sampling and repetition prompts: the bundled pair was trained on Python's standard library.
SHAPE_PROMPT = "import os\nimport sys\n\n\ndef main():\n    "
REPETITION_PROMPTS = [
    "def __init__(self, ",
    "import os\n",
    "class Error(Exception):\n    ",
    "    for i in range(",
    "    if not isinstance(",
    "def _get_",
    "        return self.",
    "    try:\n        ",
]
PERPLEXITY_TEXT = "for key, value in sorted(items.items()):\n    print(key, value)\n"
STRATEGIES = [  # (label, temperature, top_k, top_p); temperature None = greedy
    ("greedy", None, None, None),
    ("T=0.7", 0.7, None, None),
    ("T=1.0", 1.0, None, None),
    ("T=1.3", 1.3, None, None),
    ("top-k 20", 1.0, 20, None),
    ("top-p 0.9", 1.0, None, 0.9),
]
TEMPERATURES = [0.5, 1.0, 2.0]
TOP_KS = [3, 10]
TOP_PS = [0.5, 0.9]
SHOWN_TOKENS = 20


COMMAND = ["python -m inferlab.decoding.bench"]  # replaced by main() with the real arguments


def save(name: str, values: dict) -> Path:
    """Write a result file whose provenance names the module command (not the script path)."""
    return write_result(name, values, command=COMMAND[0])


def figures_dir() -> Path:
    """Return docs/figures/decoding next to the results folder (created if missing)."""
    folder = results_dir().parent / "figures" / "decoding"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def save_figure(fig, name: str) -> None:
    """Save docs/figures/decoding/<name>.png and its zh-TW version, <name>.zh-TW.png."""
    save_bilingual(fig, figures_dir() / f"{name}.png", dpi=120)


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def token_label(tokenizer: Any, token: int) -> str:
    """Return a token's text made visible in a table or plot: spaces as a middle dot, newlines as a return sign."""
    text = tokenizer.decode([token])
    return text.replace(" ", "·").replace("\n", "⏎").replace("\t", "⇥").replace("|", "¦") or "∅"


def markdown_cell(text: str) -> str:
    """Return text that a Markdown table cell shows literally (tokens of code are full of * _ ` < [)."""
    text = text.replace("\\", "\\\\")
    for special in "`*_{}[]()#+-.!":
        text = text.replace(special, "\\" + special)
    return text.replace("<", "&lt;").replace(">", "&gt;")


# ------------------------------------------------------------------ the guides' model (no model download)


def run_table() -> Path:
    """Write decoding_page_table.json: the guides' model decoded every way, and its Viterbi trellis."""
    model = page_model()
    length = GREEDY_PAGE_LENGTH
    greedy = greedy_decode(model, length)
    best = map_decode_bruteforce(model, length)
    beam = beam_search(model, length, beam_width=2)
    rows = []
    for tokens, logprob in enumerate_sequences(model, length):
        found_by = (("greedy", greedy.tokens), ("beam 2", beam.tokens), ("MAP", best.tokens))
        marks = [name for name, found in found_by if found == tokens]
        rows.append(
            {
                "sequence": " ".join(model.names[t] for t in tokens),
                "p": round(math.exp(logprob), 6),
                "log p": round(logprob, 4),
                "found by": ", ".join(marks) or "-",
            }
        )

    def summary(tokens: list[int], probability: float) -> dict:
        return {"sequence": " ".join(model.names[t] for t in tokens), "p": round(probability, 6)}

    return save(
        "decoding_page_table",
        {
            "length": length,
            "rows": rows,
            "greedy": summary(greedy.tokens, math.exp(greedy.logprob)),
            "map": summary(best.tokens, math.exp(best.logprob)),
            "beam2": summary(beam.tokens, math.exp(beam.logprob)),
            "map_over_greedy": round(math.exp(best.logprob - greedy.logprob), 4),
            "first_step_greedy_p": round(max(START), 4),
            "viterbi": viterbi_values(model),
        },
    )


def viterbi_values(model) -> dict:
    """Return the Viterbi trellis of the guides' model, one row per step, checked against map_decode_dp."""
    length = VITERBI_PAGE_LENGTH
    tokens, probability, trellis, back_pointers = viterbi(START, NEXT, length)
    dp = map_decode_dp(model, length)
    if dp.tokens != tokens or not math.isclose(math.exp(dp.logprob), probability, rel_tol=1e-12):
        raise RuntimeError(f"viterbi and map_decode_dp disagree: {tokens} vs {dp.tokens}")
    greedy = greedy_decode(model, length)
    rows = []
    for step, best in enumerate(trellis):
        row = {"t": step + 1}
        for token, name in enumerate(model.names):
            came_from = f" ← {model.names[back_pointers[step - 1][token]]}" if step else ""
            row[name] = f"{best[token]:.4g}{came_from}"
        rows.append(row)
    return {
        "length": length,
        "rows": rows,
        "sequence": " ".join(model.names[t] for t in tokens),
        "p": round(probability, 6),
        "greedy_sequence": " ".join(model.names[t] for t in greedy.tokens),
        "greedy_p": round(math.exp(greedy.logprob), 6),
    }


# ------------------------------------------------------------------ DP vs brute force (no model)


def run_dp(quick: bool) -> Path:
    vocab, order = 3, 2
    lengths = list(range(1, 8 if quick else 11))
    model = MarkovModel.random(order, vocab, seed=0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # both methods on one core: a fair comparison, less disturbed by other work
    rows = []
    for length in tqdm(lengths, desc="DP vs brute force", unit="T"):
        dp, brute = map_decode_dp(model, length), map_decode_bruteforce(model, length, max_sequences=10**6)
        if not math.isclose(dp.logprob, brute.logprob, rel_tol=1e-9, abs_tol=1e-12):
            raise RuntimeError(f"DP and brute force disagree at T={length}: {dp.logprob} vs {brute.logprob}")
        # Best of several runs: on a shared machine the minimum is the least disturbed measurement.
        dp_time = time_call(lambda n=length: map_decode_dp(model, n), repeat=21)
        brute_repeat = 3 if vocab**length <= 3**8 else 1
        brute_time = time_call(
            lambda n=length: map_decode_bruteforce(model, n, max_sequences=10**6), repeat=brute_repeat, warmup=0
        )
        rows.append(
            {
                "T": length,
                "DP operations": dp.operations,
                "brute-force operations": brute.operations,
                "DP ms": round(dp_time["min_s"] * 1e3, 3),
                "brute-force ms": round(brute_time["min_s"] * 1e3, 2),
            }
        )
    torch.set_num_threads(threads)
    last = rows[-1]
    values = {
        "vocab": vocab,
        "order": order,
        "rows": rows,
        "largest_T": last["T"],
        "ops_ratio": round(last["brute-force operations"] / last["DP operations"], 1),
        "time_ratio": round(last["brute-force ms"] / last["DP ms"], 1),
        "dp_count_matches_states": all(
            r["DP operations"] == sum(dp_pairs_per_step(vocab, r["T"], order)) for r in rows
        ),
    }
    path = save("decoding_dp_vs_bruteforce", values)
    plot_dp(rows, vocab, order)
    return path


def plot_dp(rows: list[dict], vocab: int, order: int) -> None:
    plt = pyplot()
    lengths = [r["T"] for r in rows]
    fig, (ops_ax, time_ax) = plt.subplots(1, 2, figsize=(9, 3.6))
    ops_ax.semilogy(lengths, [r["brute-force operations"] for r in rows], "o-", label="brute force")
    ops_ax.semilogy(lengths, [r["DP operations"] for r in rows], "s-", label=f"DP, order k={order}")
    ops_ax.set(xlabel="T (tokens)", ylabel="operations (log scale)", title=f"Operations, V={vocab}")
    time_ax.semilogy(lengths, [r["brute-force ms"] for r in rows], "o-", label="brute force")
    time_ax.semilogy(lengths, [r["DP ms"] for r in rows], "s-", label="DP")
    time_ax.set(xlabel="T (tokens)", ylabel="milliseconds (log scale)", title="Measured time")
    for ax in (ops_ax, time_ax):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.tight_layout()
    save_figure(fig, "dp_vs_bruteforce")
    plt.close(fig)


# ------------------------------------------------------------------ the bundled model's parts


def load_target(target: str | None):
    from inferlab.models import _load_model, load_pair, load_tokenizer

    if target is None:
        model, _, tokenizer = load_pair()
        return model, tokenizer
    return _load_model(target, "cpu", torch.float32), load_tokenizer(target)


def prompt_ids(tokenizer: Any, text: str) -> list[int]:
    """Return the token ids of ``text`` after an end-of-text token: the start of a new file, as in training."""
    return [tokenizer.eos_token_id, *tokenizer(text, add_special_tokens=False)["input_ids"]]


def run_sampling(model: Any, tokenizer: Any) -> Path:
    ids = torch.tensor([prompt_ids(tokenizer, SHAPE_PROMPT)])
    with torch.no_grad():
        logits = model(ids).logits[0, -1].float()
    base = filtered_probs(logits)
    shown = torch.argsort(base, descending=True)[:SHOWN_TOKENS].tolist()
    labels = [token_label(tokenizer, t) for t in shown]

    def setting(name: str, **kwargs) -> dict:
        probs = filtered_probs(logits, **kwargs)
        return {
            "setting": name,
            "kept tokens": int((probs > 0).sum()),
            "top-1 p": round(float(probs.max()), 4),
            "entropy (nats)": round(float(-(probs[probs > 0] * probs[probs > 0].log()).sum()), 3),
            "shown": [round(float(probs[t]), 5) for t in shown],
        }

    temperature = [setting(f"T={t}", temperature=t) for t in TEMPERATURES]
    top_k = [setting("no filter")] + [setting(f"top-k {k}", top_k=k) for k in TOP_KS]
    top_p = [setting("no filter")] + [setting(f"top-p {p}", top_p=p) for p in TOP_PS]
    values = {
        "prompt": SHAPE_PROMPT,
        "vocab": int(logits.numel()),
        "shown_tokens": labels,
        "temperature": temperature,
        "top_k": top_k,
        "top_p": top_p,
        "summary": [{k: v for k, v in row.items() if k != "shown"} for row in temperature + top_k[1:] + top_p[1:]],
        "top1_p": round(float(base.max()), 4),
    }
    path = save("decoding_sampling_shapes", values)
    for name, settings in (("temperature", temperature), ("top_k", top_k), ("top_p", top_p)):
        plot_shapes(name, settings, labels)
    return path


def plot_shapes(name: str, settings: list[dict], labels: list[str]) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 3.4))
    width = 0.8 / len(settings)
    for index, row in enumerate(settings):
        positions = [i + (index - (len(settings) - 1) / 2) * width for i in range(len(labels))]
        ax.bar(positions, row["shown"], width, label=f"{row['setting']} ({row['kept tokens']} kept)")
    ax.set_xticks(range(len(labels)), labels, rotation=60, fontsize=8, family="monospace")
    ax.set(
        ylabel="probability", title=f"The {len(labels)} most probable next tokens, reshaped by {name.replace('_', '-')}"
    )
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    save_figure(fig, name)
    plt.close(fig)


def cache_argument(out):
    """Return the keyword that hands the KV cache back: newer transformers say `cache`, older `past_key_values`."""
    return {"cache": out["cache"]} if "cache" in out else {"past_key_values": out["past_key_values"]}


def generate_cached(model: Any, ids: torch.Tensor, length: int, generator: torch.Generator, **sampling) -> torch.Tensor:
    """Return ``length`` new tokens per row, sampled like ``ancestral_sample`` but reusing the model's KV cache.

    The same filter and the same random draws as ``ancestral_sample``, so the same tokens up to
    floating-point rounding of the logits; the cache only saves
    recomputing the prefix at every step, which the KV cache chapter explains.
    """
    new_tokens = []
    with torch.no_grad():
        out = model(ids, use_cache=True)
        for _ in range(length):
            logits = out.logits[:, -1].float()
            if sampling.get("temperature") is None:
                token = logits.argmax(-1)
            else:
                token = sample_next(logits, generator=generator, **sampling)
            new_tokens.append(token)
            out = model(token.unsqueeze(-1), use_cache=True, **cache_argument(out))
    return torch.stack(new_tokens, dim=1)


def run_repetition(model: Any, tokenizer: Any, quick: bool) -> Path:
    length = 24 if quick else 64
    samples_per_prompt = 1 if quick else 3
    rows, examples = [], {}
    for label, temperature, top_k, top_p in tqdm(STRATEGIES, desc="repetition", unit="strategy"):
        generator = torch.Generator().manual_seed(0)
        sequences = []
        for text in REPETITION_PROMPTS:
            ids = torch.tensor([prompt_ids(tokenizer, text)])
            draws = 1 if temperature is None else samples_per_prompt  # greedy gives one answer
            ids = ids.repeat(draws, 1)
            sampling = {"temperature": temperature, "top_k": top_k, "top_p": top_p}
            sequences += generate_cached(model, ids, length, generator, **sampling).tolist()
        # distinct-n within each sequence (Li et al. 2016), averaged: how much a text repeats itself.
        row = {"strategy": label}
        for n in (1, 2, 3):
            row[f"distinct-{n}"] = round(sum(distinct_n([s], n) for s in sequences) / len(sequences), 3)
        rows.append(row)
        examples[label] = tokenizer.decode(sequences[0])
    values = {"length": length, "prompts": len(REPETITION_PROMPTS), "rows": rows, "examples": examples}
    values["by_strategy"] = {row["strategy"]: row for row in rows}
    path = save("decoding_repetition", values)
    plot_repetition(rows)
    return path


def plot_repetition(rows: list[dict]) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 3.4))
    width = 0.27
    for index, n in enumerate((1, 2, 3)):
        positions = [i + (index - 1) * width for i in range(len(rows))]
        ax.bar(positions, [r[f"distinct-{n}"] for r in rows], width, label=f"distinct-{n}")
    ax.set_xticks(range(len(rows)), [r["strategy"] for r in rows])
    ax.set(
        ylabel="distinct n-grams / all n-grams",
        ylim=(0, 1.05),
        title="Repetition in generated text (higher = less repetitive)",
    )
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    save_figure(fig, "repetition")
    plt.close(fig)


def run_perplexity(model: Any, tokenizer: Any) -> Path:
    ids = prompt_ids(tokenizer, PERPLEXITY_TEXT)
    prompt, tokens = ids[:1], ids[1:]
    logprobs = token_logprobs(model, tokens, prompt=prompt)
    rows = [
        {
            "t": t + 1,
            "token": markdown_cell(token_label(tokenizer, token)),
            "p(token ∣ prefix)": float(f"{math.exp(lp):.3g}"),  # ∣ (U+2223): a "|" would end the table cell
            "-log p": round(-lp, 3),
        }
        for t, (token, lp) in enumerate(zip(tokens, logprobs, strict=True))
    ]
    mean_nll = -sum(logprobs) / len(logprobs)
    shuffled = tokens[:]
    random.Random(0).shuffle(shuffled)
    shuffled_nll = -sum(token_logprobs(model, shuffled, prompt=prompt)) / len(shuffled)
    vocab = int(model.get_output_embeddings().weight.shape[0])
    values = {
        "text": PERPLEXITY_TEXT,
        "tokens": len(tokens),
        "rows": rows,
        "mean_nll": round(mean_nll, 3),
        "perplexity": round(math.exp(mean_nll), 2),
        "shuffled_perplexity": round(math.exp(shuffled_nll), 1),
        "uniform_perplexity": vocab,
    }
    return save("decoding_perplexity", values)


# ------------------------------------------------------------------ placeholders


PLACEHOLDER_KEYS = {  # what the pages read from each model part's result file
    "sampling": ("decoding_sampling_shapes", ["top1_p", "vocab"], ["summary"], ["temperature", "top_k", "top_p"]),
    "repetition": ("decoding_repetition", ["prompts", "length"], ["rows"], ["repetition"]),
    "perplexity": (
        "decoding_perplexity",
        ["mean_nll", "perplexity", "uniform_perplexity", "shuffled_perplexity"],
        ["rows"],
        [],
    ),
}


def write_placeholders() -> list[Path]:
    """Write clearly marked 'not measured yet' results and figures for model parts that have none.

    Lets the site build before the bundled model exists; running the model parts replaces them.
    """
    written = []
    plt = pyplot()
    for part, (name, scalars, tables, figures) in PLACEHOLDER_KEYS.items():
        if (results_dir() / f"{name}.json").is_file():
            continue  # never overwrite a real measurement
        values = {key: NOT_MEASURED for key in scalars}
        values.update({key: [{"status": NOT_MEASURED}] for key in tables})
        written.append(save(name, values))
        for figure in figures:
            fig, ax = plt.subplots(figsize=(6, 1.6))
            ax.axis("off")
            # English only: matplotlib's default font has no CJK glyphs.
            message = f"not measured yet\npython -m inferlab.decoding.bench --parts {part}"
            ax.text(0.5, 0.5, message, ha="center", va="center", family="monospace")
            save_figure(fig, figure)
            plt.close(fig)
    return written


# ------------------------------------------------------------------ command line


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="Decoding benchmarks: result files and figures for the decoding pages."
    )
    parser.add_argument("--quick", action="store_true", help="smaller sizes and fewer samples")
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS), help="which parts to run")
    parser.add_argument("--target", default=None, help="a causal LM (path or hub id); default: the bundled target")
    parser.add_argument(
        "--placeholders",
        action="store_true",
        help="only write 'not measured yet' files for model parts that have no result (so the site builds)",
    )
    args = parser.parse_args(argv)
    given = sys.argv[1:] if argv is None else argv
    COMMAND[0] = " ".join(["python -m inferlab.decoding.bench", *given])
    torch.manual_seed(0)
    if args.placeholders:
        for path in write_placeholders():
            print(f"wrote placeholder {path}")
        return
    written = []
    if "table" in args.parts:
        written.append(run_table())
    if "dp" in args.parts:
        written.append(run_dp(args.quick))
    if any(part in args.parts for part in MODEL_PARTS):
        model, tokenizer = load_target(args.target)
        if "sampling" in args.parts:
            written.append(run_sampling(model, tokenizer))
        if "repetition" in args.parts:
            written.append(run_repetition(model, tokenizer, args.quick))
        if "perplexity" in args.parts:
            written.append(run_perplexity(model, tokenizer))
    for path in written:
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
