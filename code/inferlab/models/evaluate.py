"""Measure the bundled pair for its model card: ``python -m inferlab.models.evaluate``.

Writes ``docs/results/models_card.json`` (sizes, held-out perplexity, greedy acceptance rate,
per-token decode times and their ratio c, load-and-generate time) and the training-curve figure
``docs/figures/models/training_curve.png`` and ``distill_curve.png`` from the committed training
logs, each in English and zh-TW (``python tools/redraw_figures.py models`` redraws only these).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm

from inferlab.bench import repo_root, write_result
from inferlab.bench.figures import save_figure
from inferlab.models import BUNDLED_DIR, load_pair
from inferlab.models.train import read_split


def heldout_tokens(tokenizer) -> torch.Tensor:
    """Return the held-out files of the training corpus as one tensor of token ids."""
    manifest = json.loads((BUNDLED_DIR / "corpus_manifest.json").read_text())
    ids: list[int] = []
    for text in read_split(manifest, "heldout"):
        ids.extend(tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id])
    return torch.tensor(ids)


def windows(tokens: torch.Tensor, length: int, count: int) -> torch.Tensor:
    """Return ``count`` evenly spaced windows of ``length`` tokens (deterministic, no sampling)."""
    starts = torch.linspace(0, len(tokens) - length - 1, count).long()
    return torch.stack([tokens[s : s + length] for s in starts.tolist()])


@torch.no_grad()
def perplexity(model, batch: torch.Tensor) -> float:
    """Return exp(mean next-token negative log-likelihood) over every position of every window."""
    logits = model(batch[:, :-1]).logits
    nll = F.cross_entropy(logits.flatten(0, 1).float(), batch[:, 1:].flatten())
    return math.exp(nll.item())


def alpha_per_prompt(target, draft, tokenizer, new_tokens: int = 64) -> list[dict]:
    """Return greedy alpha on every unseen prompt and on the two benchmark prompts, one row each."""
    from inferlab.speculative.alpha import UNSEEN_PROMPTS, greedy_agreement
    from inferlab.speculative.bench import LONG_PROMPT, SHORT_PROMPT

    prompts = {name: kind_and_text for name, kind_and_text in UNSEEN_PROMPTS.items()}
    prompts |= {
        "benchmark: short regime": ("benchmark", SHORT_PROMPT),
        "benchmark: long regime": ("benchmark", LONG_PROMPT),
    }
    rows = []
    for name, (kind, text) in tqdm(prompts.items(), desc="alpha per prompt", unit="prompt", leave=False):
        ids = tokenizer(text, return_tensors="pt").input_ids
        agree, total = greedy_agreement(target, draft, ids, new_tokens)
        rows.append({"prompt": name, "kind": kind, "prompt_tokens": ids.shape[1], "alpha": round(agree / total, 3)})
    return rows


def heldout_alpha(target, draft, prompts: torch.Tensor, new_tokens: int) -> float:
    """Return greedy alpha pooled over held-out corpus windows (text of the training corpus's kind)."""
    from inferlab.speculative.alpha import greedy_agreement

    agree = total = 0
    for prompt in tqdm(prompts, desc="held-out alpha", unit="prompt", leave=False):
        a, t = greedy_agreement(target, draft, prompt[None], new_tokens)
        agree, total = agree + a, total + t
    return agree / total


@torch.inference_mode()
def alternating_step_seconds(steppers: dict, rounds: int = 10, block: int = 20, threads: int = 1) -> dict[str, float]:
    """Return the median seconds of one decode step of each model; ``steppers`` map names to step makers.

    A step maker takes no argument and returns (step, rewind): ``step()`` decodes one token at a
    fixed context length and ``rewind()`` drops it again, outside the timing (bookkeeping, not
    decoding). Each model decodes ``block`` steps back to back, as a draft does when it proposes
    gamma tokens; the models take turns for ``rounds`` rounds so that machine noise hits them
    alike. One torch thread, as in every CPU benchmark here: these tensors are too small for
    threads to pay off, and a shared 2-core machine times one thread more steadily.
    """
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    prepared = {name: make() for name, make in steppers.items()}
    seconds: dict[str, list[float]] = {name: [] for name in steppers}
    for round_ in range(rounds + 1):
        for name, (step, rewind) in prepared.items():
            for _ in range(block):
                start = time.perf_counter()
                step()
                elapsed = time.perf_counter() - start
                rewind()
                if round_ > 0:  # the first round warms up
                    seconds[name].append(elapsed)
    torch.set_num_threads(previous_threads)
    return {name: statistics.median(s) for name, s in seconds.items()}


def transformers_stepper(model, context: int = 128):
    """Return a step maker for a Hugging Face model: cached forward of one token after ``context`` tokens."""
    ids = torch.randint(0, model.config.vocab_size, (1, context))

    def make():
        cache = model(ids, use_cache=True).past_key_values
        return (lambda: model(ids[:, -1:], cache=cache, use_cache=True)), (lambda: cache.crop(-1))

    return make


def inferlab_stepper(decoder, context: int = 128):
    """Return a step maker for inferlab's readable decoder with its preallocated KV cache."""
    from inferlab.kvcache.generate import KVCache, forward_with_cache

    ids = torch.randint(0, decoder.vocab_size, (1, context))

    def make():
        cache = KVCache(decoder, 1, context + 1)
        forward_with_cache(decoder, cache, ids)

        def rewind():
            cache.length = context

        return (lambda: forward_with_cache(decoder, cache, ids[:, -1:])), rewind

    return make


def decode_step_seconds(target, draft) -> dict[str, float]:
    """Return one decode step's time of each bundled model, run by transformers and by inferlab's decoder.

    The two runtimes bound the cost ratio c from both sides: transformers adds a fixed cost to
    every call (argument handling, mask and cache objects), which a one-layer draft feels most;
    the readable decoder does little besides the model's own arithmetic.
    """
    from inferlab.kvcache import LlamaDecoder

    ours = {name: LlamaDecoder.from_pretrained(BUNDLED_DIR / name) for name in ("target", "draft")}
    return alternating_step_seconds(
        {
            "target": transformers_stepper(target),
            "draft": transformers_stepper(draft),
            "target_inferlab": inferlab_stepper(ours["target"]),
            "draft_inferlab": inferlab_stepper(ours["draft"]),
        }
    )


# The two ways a reader can run the bundled target from a fresh Python process, timed end to end
# (interpreter start, imports, loading, 32 greedy tokens): what "how long until I see text" means.
TRANSFORMERS_START = (
    "from inferlab.models import load_pair; target, draft, tokenizer = load_pair(); "
    "ids = tokenizer('def main():', return_tensors='pt').input_ids; "
    "target.generate(ids, max_new_tokens=32, do_sample=False)"
)
QUICK_START = "from inferlab.models.quick import quick_generate; quick_generate('def main():', 32)"


def fresh_process_seconds(code: str, repeat: int = 3) -> float:
    """Return the median wall time of running ``code`` in a new Python process (offline)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    seconds = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, env=env, capture_output=True)
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def plot_training_curve(log_path: Path, out: Path) -> None:
    """Draw the target's loss and the draft's agreement with it from the training log."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = [json.loads(line) for line in log_path.read_text().splitlines()[1:]]
    records = [r for r in records if "event" not in r]
    steps = [r["step"] for r in records]
    # One panel above the other, 6.4 inches wide: legible on a phone as on a desktop.
    fig, (left, right) = plt.subplots(2, 1, figsize=(6.4, 6.4))
    joint = [r for r in records if "target_loss" in r]
    left.plot([r["step"] for r in joint], [r["target_loss"] for r in joint], label="target: cross-entropy")
    left.plot(steps, [r["draft_ce"] for r in records], label="draft: cross-entropy", alpha=0.8)
    left.set_xlabel("step")
    left.set_ylabel("loss (nats / token)")
    left.legend()
    window = 20
    agreement = [
        statistics.mean(r["agreement"] for r in records[max(0, i - window + 1) : i + 1]) for i in range(len(records))
    ]
    right.plot(steps, agreement, color="tab:green")
    right.axvline(len(joint), color="grey", linestyle=":", label="draft-only distillation starts")
    right.set_xlabel("step")
    right.set_ylabel("draft = target argmax")
    right.set_title(f"agreement, {window}-step mean", fontsize=10)
    right.set_ylim(0, 1)
    right.legend(loc="lower right")
    fig.tight_layout()
    save_figure(fig, out, dpi=120)
    plt.close(fig)


def distillation_summary() -> dict:
    """Return the draft's distillation schedule and wall time from its log (empty if it has none)."""
    path = BUNDLED_DIR / "distill_log.jsonl"
    if not path.exists():
        return {}
    lines = path.read_text().splitlines()
    header, last = json.loads(lines[0]), json.loads(lines[-1])
    settings = header["settings"]
    return {
        "distill_sequences": settings["sequences"],
        "distill_new_tokens": settings["new_tokens"],
        "distill_steps": settings["steps"],
        "distill_batch_size": settings["batch_size"],
        "distill_generation_s": header["dataset_generation_s"],
        "distill_training_s": last["elapsed_s"],
    }


def plot_distillation_curve(log_path: Path, out: Path) -> None:
    """Draw the distilled draft's loss and its argmax agreement with the target over training steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not log_path.exists():
        return
    records = [json.loads(line) for line in log_path.read_text().splitlines()[1:]]
    steps = [r["step"] for r in records]
    window = 50

    def smooth(key: str) -> list[float]:  # a running mean: single batches are noisy
        return [statistics.mean(r[key] for r in records[max(0, i - window + 1) : i + 1]) for i in range(len(records))]

    fig, (left, right) = plt.subplots(2, 1, figsize=(6.4, 6.2))
    left.plot(steps, smooth("loss"), color="tab:blue")
    left.set_xlabel("step")
    left.set_ylabel("soft-label cross-entropy (nats)")
    right.plot(steps, smooth("agreement"), color="tab:green")
    right.set_xlabel("step")
    right.set_ylabel("draft argmax = target argmax")
    right.set_ylim(0, 1)
    for ax in (left, right):
        ax.set_title(f"{window}-step mean, on the target's own continuations", fontsize=10)
    fig.tight_layout()
    save_figure(fig, out, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--windows", type=int, default=48, help="held-out windows of 256 tokens for perplexity")
    parser.add_argument("--prompts", type=int, default=24, help="held-out prompts for the acceptance rate")
    args = parser.parse_args(argv)
    if args.windows < 1 or args.prompts < 1:
        parser.error("--windows and --prompts must be >= 1")

    transformers_start = fresh_process_seconds(TRANSFORMERS_START)
    quick_start = fresh_process_seconds(QUICK_START)
    target, draft, tokenizer = load_pair()
    fast_target, fast_draft, _ = load_pair(backend="inferlab")  # same weights, faster to measure alpha with
    tokens = heldout_tokens(tokenizer)
    batch = windows(tokens, 257, args.windows)
    prompts = windows(tokens, 64, args.prompts)
    steps = decode_step_seconds(target, draft)
    per_prompt = alpha_per_prompt(fast_target, fast_draft, tokenizer)
    unseen = [row["alpha"] for row in per_prompt if row["kind"] != "benchmark"]
    values = {
        "target_parameters": sum(p.numel() for p in target.parameters()),
        "draft_parameters": sum(p.numel() for p in draft.parameters()),
        "vocab_size": len(tokenizer),
        "heldout_tokens": len(tokens),
        "target_perplexity": perplexity(target, batch),
        "draft_perplexity": perplexity(draft, batch),
        "greedy_alpha_heldout": heldout_alpha(fast_target, fast_draft, prompts, new_tokens=64),
        "greedy_alpha_unseen_mean": round(statistics.mean(unseen), 3),
        "greedy_alpha_unseen_min": min(unseen),
        "draft_shape": f"{fast_draft.num_layers} layer(s) x width {fast_draft.config.hidden_size}",
        **distillation_summary(),
        "target_step_ms": steps["target"] * 1e3,
        "draft_step_ms": steps["draft"] * 1e3,
        "step_time_ratio_c": steps["draft"] / steps["target"],
        "target_step_ms_inferlab": steps["target_inferlab"] * 1e3,
        "draft_step_ms_inferlab": steps["draft_inferlab"] * 1e3,
        "step_time_ratio_c_inferlab": steps["draft_inferlab"] / steps["target_inferlab"],
        "load_and_generate_s": transformers_start,
        "quick_load_and_generate_s": quick_start,
        "weights_mb": sum(f.stat().st_size for f in BUNDLED_DIR.rglob("*.safetensors")) / 2**20,
    }
    for key, value in values.items():
        print(f"{key:>22}: {value:.4g}" if isinstance(value, float) else f"{key:>22}: {value}")
    values["alpha_per_prompt"] = per_prompt
    for row in per_prompt:
        print(f"  alpha {row['alpha']:.3f}  {row['prompt']}")
    write_result("models_card", values)
    figures = (repo_root() or Path.cwd()) / "docs" / "figures" / "models"
    plot_training_curve(BUNDLED_DIR / "training_log.jsonl", figures / "training_curve.png")
    plot_distillation_curve(BUNDLED_DIR / "distill_log.jsonl", figures / "distill_curve.png")


if __name__ == "__main__":
    main()
