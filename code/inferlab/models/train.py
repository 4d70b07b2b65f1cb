"""Train the bundled target/draft pair on the CPU: ``python -m inferlab.models.train``.

What it does, in order, each step resumable from a checkpoint:

1. Corpus: the Python standard library's own ``.py`` files (every machine with Python has them).
   Files are split into train / held-out by a hash of their path, and the exact list with SHA-256
   hashes is written to ``corpus_manifest.json`` so the corpus can be rebuilt and checked.
2. Tokenizer: a byte-level BPE (vocabulary 8192) trained with ``tokenizers``; byte-level means any
   UTF-8 text, Chinese included, round-trips exactly.
3. Joint training: the target (a ``LlamaForCausalLM``) learns from the text (cross-entropy), and
   on the same batch the draft learns from the target's *soft labels* (KL divergence to the
   target's next-token distribution), so the draft imitates the target rather than the text.
4. Draft polishing: more distillation steps against the frozen, finished target.
5. Both models are saved as fp16 safetensors inside the package, with the training log.

Run ``python -m inferlab.models.evaluate`` afterwards to measure perplexity, acceptance rate and
step times into a result file.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import sys
import sysconfig
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm

from inferlab.models import BUNDLED_DIR, EOS_TOKEN, draft_config, target_config

CHECKPOINT_NAME = "checkpoint.pt"
# Folders of the standard library that are tests, vendored copies or non-code data: skipping them
# keeps the corpus to ordinary library code.
SKIPPED_PARTS = {"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__"}


@dataclass
class TrainSettings:
    """Every knob of a training run; stored in the checkpoint and the log for reproducibility."""

    seed: int = 0
    vocab_size: int = 8192
    seq_len: int = 256
    batch_size: int = 8
    joint_steps: int = 600
    draft_steps: int = 250
    target_lr: float = 2e-3
    draft_lr: float = 4e-3
    warmup_steps: int = 40
    heldout_fraction: float = 0.05
    max_corpus_files: int = 1200
    checkpoint_every: int = 25


def stdlib_files() -> list[Path]:
    """Return the standard library's ``.py`` files that make up the corpus, in a stable order."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = [
        path
        for path in root.rglob("*.py")
        if not SKIPPED_PARTS.intersection(path.relative_to(root).parts) and 1_000 <= path.stat().st_size <= 400_000
    ]
    return sorted(files, key=lambda p: str(p.relative_to(root)))


def is_heldout(relative_path: str, fraction: float) -> bool:
    """Assign a file to held-out text by a hash of its path, so the split never depends on order."""
    digest = hashlib.sha256(relative_path.encode()).digest()
    return int.from_bytes(digest[:4], "big") / 2**32 < fraction


def build_manifest(settings: TrainSettings) -> dict:
    """Return the corpus manifest: each file's relative path, split and SHA-256."""
    files = stdlib_files()
    rng = random.Random(settings.seed)
    if len(files) > settings.max_corpus_files:
        files = sorted(rng.sample(files, settings.max_corpus_files))
    root = Path(sysconfig.get_paths()["stdlib"])
    entries = []
    for path in files:
        relative = str(path.relative_to(root))
        data = path.read_bytes()
        entries.append(
            {
                "path": relative,
                "split": "heldout" if is_heldout(relative, settings.heldout_fraction) else "train",
                "sha256": hashlib.sha256(data).hexdigest(),
                "bytes": len(data),
            }
        )
    return {"python": sys.version.split()[0], "stdlib": str(root), "files": entries}


def read_split(manifest: dict, split: str) -> list[str]:
    """Return the texts of one split, refusing files whose hash no longer matches the manifest."""
    root = Path(manifest["stdlib"])
    texts = []
    for entry in manifest["files"]:
        if entry["split"] != split:
            continue
        data = (root / entry["path"]).read_bytes()
        if hashlib.sha256(data).hexdigest() != entry["sha256"]:
            raise RuntimeError(f"corpus file changed since the manifest was made: {entry['path']}")
        texts.append(data.decode("utf-8", errors="replace"))
    return texts


def train_tokenizer(texts: list[str], vocab_size: int, out_dir: Path):
    """Train a byte-level BPE and save it as a ``PreTrainedTokenizerFast`` in ``out_dir``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=True,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, eos_token=EOS_TOKEN, bos_token=EOS_TOKEN, pad_token=EOS_TOKEN
    )
    fast.save_pretrained(out_dir)
    return fast


def encode_corpus(tokenizer, texts: list[str]) -> torch.Tensor:
    """Return one long tensor of token ids: every file, each followed by the end-of-text token."""
    ids: list[int] = []
    for text in tqdm(texts, desc="tokenising", unit="file", leave=False):
        ids.extend(tokenizer(text, add_special_tokens=False)["input_ids"])
        ids.append(tokenizer.eos_token_id)
    return torch.tensor(ids, dtype=torch.long)


def random_batch(tokens: torch.Tensor, settings: TrainSettings, generator: torch.Generator):
    """Return a (batch, seq_len + 1) tensor of windows starting at random positions."""
    starts = torch.randint(0, len(tokens) - settings.seq_len - 1, (settings.batch_size,), generator=generator)
    return torch.stack([tokens[s : s + settings.seq_len + 1] for s in starts.tolist()])


def learning_rate(step: int, total: int, peak: float, warmup: int) -> float:
    """Linear warm-up, then cosine decay to a tenth of the peak."""
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


# --8<-- [start:distill]
def distillation_loss(draft_logits: torch.Tensor, target_logits: torch.Tensor) -> torch.Tensor:
    """KL(target || draft) per token: the draft is pushed towards the target's whole distribution."""
    target_logp = F.log_softmax(target_logits.detach().float(), dim=-1)
    draft_logp = F.log_softmax(draft_logits.float(), dim=-1)
    return F.kl_div(draft_logp.flatten(0, 1), target_logp.flatten(0, 1), log_target=True, reduction="batchmean")


# --8<-- [end:distill]


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr


def save_checkpoint(path: Path, state: dict) -> None:
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    tmp.replace(path)  # atomic: an interrupted save never leaves a half-written checkpoint


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=BUNDLED_DIR, help="where the trained pair is saved")
    parser.add_argument("--work", type=Path, default=Path(".cache/train"), help="checkpoints and tokenised corpus")
    parser.add_argument("--joint-steps", type=int, default=TrainSettings.joint_steps)
    parser.add_argument("--draft-steps", type=int, default=TrainSettings.draft_steps)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: all cores)")
    args = parser.parse_args(argv)
    if args.joint_steps < 1 or args.draft_steps < 0:
        parser.error("--joint-steps must be >= 1 and --draft-steps >= 0")
    if args.threads is not None:
        torch.set_num_threads(args.threads)

    settings = TrainSettings(joint_steps=args.joint_steps, draft_steps=args.draft_steps)
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(settings.seed)

    manifest_path = args.out / "corpus_manifest.json"
    if not manifest_path.exists():
        manifest_path.write_text(json.dumps(build_manifest(settings), indent=1) + "\n")
    manifest = json.loads(manifest_path.read_text())
    tokenizer_dir = args.out / "tokenizer"
    if not (tokenizer_dir / "tokenizer.json").exists():
        train_tokenizer(read_split(manifest, "train"), settings.vocab_size, tokenizer_dir)
    from transformers import AutoTokenizer, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    tokens_path = args.work / "train_tokens.pt"
    if not tokens_path.exists():
        torch.save(encode_corpus(tokenizer, read_split(manifest, "train")), tokens_path)
    tokens = torch.load(tokens_path)
    print(f"corpus: {len(tokens):,} training tokens from {sum(e['split'] == 'train' for e in manifest['files'])} files")

    target = LlamaForCausalLM(target_config(len(tokenizer)))
    draft = LlamaForCausalLM(draft_config(len(tokenizer)))
    target_opt = torch.optim.AdamW(target.parameters(), lr=settings.target_lr, weight_decay=0.1, betas=(0.9, 0.95))
    draft_opt = torch.optim.AdamW(draft.parameters(), lr=settings.draft_lr, weight_decay=0.1, betas=(0.9, 0.95))
    generator = torch.Generator().manual_seed(settings.seed)
    step, log = 0, []
    checkpoint = args.work / CHECKPOINT_NAME
    if checkpoint.exists():
        state = torch.load(checkpoint, weights_only=False)
        target.load_state_dict(state["target"])
        draft.load_state_dict(state["draft"])
        target_opt.load_state_dict(state["target_opt"])
        draft_opt.load_state_dict(state["draft_opt"])
        generator.set_state(state["generator"])
        step, log = state["step"], state["log"]
        print(f"resumed from step {step}")
        if state["settings"] != asdict(settings):
            # A changed schedule is part of how the weights were made: keep it in the log.
            log.append({"step": step, "event": "settings changed on resume", "settings": asdict(settings)})

    total = settings.joint_steps + settings.draft_steps
    elapsed_before = next((r["elapsed_s"] for r in reversed(log) if "elapsed_s" in r), 0.0)
    started = time.perf_counter()
    bar = tqdm(total=total, initial=step, desc="training", unit="step")
    while step < total:
        joint = step < settings.joint_steps
        batch = random_batch(tokens, settings, generator)
        inputs, labels = batch[:, :-1], batch[:, 1:]
        record = {"step": step + 1, "phase": "joint" if joint else "draft"}
        if joint:
            target.train()
            set_lr(target_opt, learning_rate(step, settings.joint_steps, settings.target_lr, settings.warmup_steps))
            target_logits = target(inputs).logits
            target_loss = F.cross_entropy(target_logits.flatten(0, 1), labels.flatten())
            target_loss.backward()
            torch.nn.utils.clip_grad_norm_(target.parameters(), 1.0)
            target_opt.step()
            target_opt.zero_grad(set_to_none=True)
            record["target_loss"] = target_loss.item()
        else:
            target.eval()
            with torch.no_grad():
                target_logits = target(inputs).logits
        draft.train()
        set_lr(draft_opt, learning_rate(step, total, settings.draft_lr, settings.warmup_steps))
        draft_logits = draft(inputs).logits
        kl = distillation_loss(draft_logits, target_logits)
        kl.backward()
        torch.nn.utils.clip_grad_norm_(draft.parameters(), 1.0)
        draft_opt.step()
        draft_opt.zero_grad(set_to_none=True)
        with torch.no_grad():
            record["draft_kl"] = kl.item()
            record["draft_ce"] = F.cross_entropy(draft_logits.flatten(0, 1), labels.flatten()).item()
            record["agreement"] = (draft_logits.argmax(-1) == target_logits.argmax(-1)).float().mean().item()
        step += 1
        record["tokens"] = step * settings.batch_size * settings.seq_len
        record["elapsed_s"] = round(elapsed_before + time.perf_counter() - started, 1)
        log.append(record)
        bar.set_postfix({k: f"{v:.3f}" for k, v in record.items() if isinstance(v, float) and k != "elapsed_s"})
        bar.update(1)
        if step % settings.checkpoint_every == 0 or step == total:
            save_checkpoint(
                checkpoint,
                {
                    "target": target.state_dict(),
                    "draft": draft.state_dict(),
                    "target_opt": target_opt.state_dict(),
                    "draft_opt": draft_opt.state_dict(),
                    "generator": generator.get_state(),
                    "step": step,
                    "log": log,
                    "settings": asdict(settings),
                },
            )
    bar.close()

    for name, model in (("target", target), ("draft", draft)):
        model.eval()
        model.to(torch.float16).save_pretrained(args.out / name, safe_serialization=True)
        # Each model folder also carries the tokenizer, so it loads like a hub repo from its path.
        tokenizer.save_pretrained(args.out / name)
    with open(args.out / "training_log.jsonl", "w") as f:
        f.write(json.dumps({"settings": asdict(settings)}) + "\n")
        for record in log:
            f.write(json.dumps(record) + "\n")
    print(f"saved the pair to {args.out}")


if __name__ == "__main__":
    main()
