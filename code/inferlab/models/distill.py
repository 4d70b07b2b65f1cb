"""Distil the draft on its target's own outputs: ``python -m inferlab.models.distill``.

Speculative decoding gains only as much as the draft *agrees* with the target on the text the
target actually produces (Leviathan et al. 2022, alpha). A draft distilled on corpus text learns
what the target thinks of human-written code, but under greedy verification every verified token
is the target's own greedy choice, and the target's own text looks different from the corpus
(more repetitive, more regular). So the draft is trained where it will be used:

1. Prompts: windows of the training corpus (held-out files are never used), of several lengths.
2. Continuations written by the target itself, half greedy and half sampled at temperature 1:
   sequence-level knowledge distillation (Kim & Rush 2016, "Sequence-Level Knowledge
   Distillation") trains the student on the teacher's outputs instead of the data; DistillSpec
   (Zhou et al. 2023) shows that for speculative decoding the training text should come from the
   models' own generations, and that the target's greedy and sampled outputs both help.
3. Soft labels: at every continuation position the target's next-token distribution (its 64 most
   probable tokens, renormalised: they hold nearly all the mass), recorded during generation.
4. The draft is trained to minimise the cross-entropy to those soft labels, i.e. the forward KL
   divergence KL(p_target || q_draft) up to a constant, on the continuation positions.

Every phase is resumable: the generated data set and the draft's checkpoints live in ``--work``.
The finished draft replaces ``bundled/draft`` and its log goes to ``bundled/distill_log.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from inferlab.models import BUNDLED_DIR, draft_config

TOP_K_LABELS = 64  # soft labels keep the target's 64 most probable tokens at each position


@dataclass
class DistillSettings:
    """Every knob of a distillation run; stored in the log so the draft can be remade."""

    seed: int = 1
    sequences: int = 3072  # prompts, each continued once by the target
    prompt_lengths: tuple[int, ...] = (8, 16, 32, 64, 128, 256)
    new_tokens: int = 96
    generate_batch: int = 64
    steps: int = 2500
    batch_size: int = 32
    lr: float = 3e-3
    warmup_steps: int = 100
    checkpoint_every: int = 100


# ----------------------------------------------------------------------------------------------
# 1-3. The data set: prompts from the corpus, continuations and soft labels from the target.


def corpus_prompts(tokens: torch.Tensor, settings: DistillSettings, generator: torch.Generator):
    """Yield (length, prompts) batches: windows of the training corpus, one prompt length per batch."""
    per_length = math.ceil(settings.sequences / len(settings.prompt_lengths))
    for length in settings.prompt_lengths:
        for first in range(0, per_length, settings.generate_batch):
            count = min(settings.generate_batch, per_length - first)
            starts = torch.randint(0, len(tokens) - length, (count,), generator=generator)
            yield length, torch.stack([tokens[s : s + length] for s in starts.tolist()])


@torch.inference_mode()
def continue_with_labels(target, prompts: torch.Tensor, new_tokens: int, sample: bool, generator: torch.Generator):
    """Return (continuations, label_ids, label_logprobs): the target's own text and its top-k soft labels.

    Row i of the labels is the target's distribution over the token at continuation position i
    (the one the draft must predict), so labels[:, 0] comes from the prompt's last position.
    """
    from inferlab.kvcache.generate import KVCache, forward_with_cache

    cache = KVCache(target, prompts.shape[0], prompts.shape[1] + new_tokens)
    logits = forward_with_cache(target, cache, prompts)
    chosen, label_ids, label_logprobs = [], [], []
    for _ in range(new_tokens):
        logprobs = logits.float().log_softmax(-1)
        top = logprobs.topk(TOP_K_LABELS, dim=-1)
        label_ids.append(top.indices.to(torch.int16))
        label_logprobs.append(top.values.to(torch.float16))
        if sample:
            token = torch.multinomial(logprobs.exp(), 1, generator=generator)
        else:
            token = logprobs.argmax(-1, keepdim=True)
        chosen.append(token)
        logits = forward_with_cache(target, cache, token)
    return torch.cat(chosen, 1), torch.stack(label_ids, 1), torch.stack(label_logprobs, 1)


def build_dataset(target, tokens: torch.Tensor, settings: DistillSettings, work: Path) -> dict:
    """Generate (or load) the distillation set: prompts, the target's continuations and soft labels.

    Each batch is saved as its own shard as soon as it is written, so an interrupted run resumes.
    """
    generator = torch.Generator().manual_seed(settings.seed)
    batches = list(corpus_prompts(tokens, settings, generator))
    data: dict[int, list] = {}
    for index, (length, prompts) in enumerate(tqdm(batches, desc="target writes continuations", unit="batch")):
        shard = work / f"shard_{index:04d}.pt"
        if not shard.exists():
            sample = index % 2 == 1  # every other batch is sampled at temperature 1, the rest greedy
            batch_generator = torch.Generator().manual_seed(settings.seed * 100_003 + index)
            continuation, label_ids, label_logprobs = continue_with_labels(
                target, prompts, settings.new_tokens, sample, batch_generator
            )
            torch.save((torch.cat([prompts, continuation], 1), label_ids, label_logprobs), shard.with_suffix(".tmp"))
            shard.with_suffix(".tmp").replace(shard)
        data.setdefault(length, []).append(torch.load(shard))
    return {length: tuple(torch.cat([b[i] for b in parts]) for i in range(3)) for length, parts in data.items()}


# ----------------------------------------------------------------------------------------------
# 4. Training the draft on the soft labels.


# --8<-- [start:soft_ce]
def soft_label_loss(draft_logits: torch.Tensor, label_ids: torch.Tensor, label_logprobs: torch.Tensor) -> torch.Tensor:
    """Return the cross-entropy from the target's top-k distribution to the draft's, per position.

    Minimising it minimises KL(p_target || q_draft): the draft spreads its probability where the
    target puts it, and above all puts its argmax where the target's is.
    """
    target_probs = label_logprobs.float().softmax(-1)  # renormalised over the k kept tokens
    draft_logprobs = draft_logits.float().log_softmax(-1).gather(-1, label_ids.long())
    return -(target_probs * draft_logprobs).sum(-1).mean()


# --8<-- [end:soft_ce]


def training_batch(dataset: dict, settings: DistillSettings, generator: torch.Generator):
    """Return (ids, label_ids, label_logprobs, prompt_length) for one batch of one prompt length."""
    lengths = sorted(dataset)
    weights = torch.tensor([len(dataset[n][0]) for n in lengths], dtype=torch.float)
    length = lengths[int(torch.multinomial(weights, 1, generator=generator))]
    ids, label_ids, label_logprobs = dataset[length]
    rows = torch.randint(0, len(ids), (settings.batch_size,), generator=generator)
    return ids[rows], label_ids[rows], label_logprobs[rows], length


def learning_rate(step: int, settings: DistillSettings) -> float:
    """Linear warm-up, then cosine decay to a tenth of the peak."""
    if step < settings.warmup_steps:
        return settings.lr * (step + 1) / settings.warmup_steps
    progress = (step - settings.warmup_steps) / max(1, settings.steps - settings.warmup_steps)
    return settings.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def draft_step(draft, batch, settings: DistillSettings) -> dict[str, float]:
    """Run one training step of the draft; return its loss and its argmax agreement with the target."""
    ids, label_ids, label_logprobs, prompt_length = batch
    # The draft reads prompt + continuation and predicts each continuation token from the position
    # before it: positions prompt_length - 1 .. end - 1.
    hidden = draft.model(ids[:, :-1]).last_hidden_state[:, prompt_length - 1 :]
    logits = draft.lm_head(hidden)
    loss = soft_label_loss(logits, label_ids, label_logprobs)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(draft.parameters(), 1.0)
    with torch.no_grad():
        agreement = (logits.argmax(-1) == label_ids[..., 0].long()).float().mean().item()
    return {"loss": loss.item(), "agreement": agreement}


def train_draft(draft, dataset: dict, settings: DistillSettings, work: Path) -> list[dict]:
    """Train the draft on the soft labels, resuming from ``work/distill_checkpoint.pt``; return the log."""
    optimizer = torch.optim.AdamW(draft.parameters(), lr=settings.lr, weight_decay=0.1, betas=(0.9, 0.95))
    generator = torch.Generator().manual_seed(settings.seed + 1)
    checkpoint = work / "distill_checkpoint.pt"
    step, log = 0, []
    if checkpoint.exists():
        state = torch.load(checkpoint, weights_only=False)
        draft.load_state_dict(state["draft"])
        optimizer.load_state_dict(state["optimizer"])
        generator.set_state(state["generator"])
        step, log = state["step"], state["log"]
    elapsed_before = log[-1]["elapsed_s"] if log else 0.0
    started = time.perf_counter()
    draft.train()
    bar = tqdm(total=settings.steps, initial=step, desc="distilling the draft", unit="step")
    while step < settings.steps:
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, settings)
        record = draft_step(draft, training_batch(dataset, settings, generator), settings)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1
        record.update(step=step, elapsed_s=round(elapsed_before + time.perf_counter() - started, 1))
        log.append(record)
        bar.set_postfix(loss=f"{record['loss']:.3f}", agreement=f"{record['agreement']:.3f}")
        bar.update(1)
        if step % settings.checkpoint_every == 0 or step == settings.steps:
            state = {
                "draft": draft.state_dict(),
                "optimizer": optimizer.state_dict(),
                "generator": generator.get_state(),
                "step": step,
                "log": log,
            }
            torch.save(state, checkpoint.with_suffix(".tmp"))
            checkpoint.with_suffix(".tmp").replace(checkpoint)  # atomic: never a half-written checkpoint
    bar.close()
    draft.eval()
    return log


def training_tokens(tokenizer, path: Path) -> torch.Tensor:
    """Return the training split of the corpus as one tensor of ids (held-out files never enter)."""
    from inferlab.models.train import encode_corpus, read_split

    if not path.exists():
        manifest = json.loads((BUNDLED_DIR / "corpus_manifest.json").read_text())
        torch.save(encode_corpus(tokenizer, read_split(manifest, "train")), path)
    return torch.load(path)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path(".cache/distill"), help="data set and checkpoints")
    parser.add_argument("--out", type=Path, default=BUNDLED_DIR / "draft", help="where the draft is saved")
    parser.add_argument("--sequences", type=int, default=DistillSettings.sequences)
    parser.add_argument("--steps", type=int, default=DistillSettings.steps)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: all cores)")
    args = parser.parse_args(argv)
    for name in ("sequences", "steps"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    settings = DistillSettings(sequences=args.sequences, steps=args.steps)
    args.work.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(settings.seed)

    from transformers import AutoTokenizer, LlamaForCausalLM

    from inferlab.kvcache import LlamaDecoder

    tokenizer = AutoTokenizer.from_pretrained(BUNDLED_DIR / "tokenizer")
    target = LlamaDecoder.from_pretrained(BUNDLED_DIR / "target")  # fp32 for the labels
    started = time.perf_counter()
    dataset = build_dataset(target, training_tokens(tokenizer, args.work / "train_tokens.pt"), settings, args.work)
    generate_s = time.perf_counter() - started
    draft = LlamaForCausalLM(draft_config(len(tokenizer)))  # a fresh draft, the shape of models.draft_config
    log = train_draft(draft, dataset, settings, args.work)

    args.out.mkdir(parents=True, exist_ok=True)
    draft.to(torch.float16).save_pretrained(args.out, safe_serialization=True)
    tokenizer.save_pretrained(args.out)
    with open(args.out.parent / "distill_log.jsonl", "w") as f:
        settings_record = {**asdict(settings), "prompt_lengths": list(settings.prompt_lengths)}
        f.write(json.dumps({"settings": settings_record, "dataset_generation_s": round(generate_s, 1)}) + "\n")
        for record in log:
            f.write(json.dumps(record) + "\n")
    print(f"saved the distilled draft to {args.out}")


if __name__ == "__main__":
    main()
