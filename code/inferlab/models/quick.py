"""Generate with the bundled target in a couple of seconds: ``python -m inferlab.models.quick "def main():"``.

Most of the time it takes to run a tiny model with transformers goes into importing transformers
(several seconds on a laptop CPU); the model itself loads in milliseconds. This path reads the
bundled checkpoint and tokenizer directly (safetensors + tokenizers) into inferlab's own readable
decoder, whose logits match transformers' (tests/test_kvcache.py), and decodes with its KV cache.
"""

from __future__ import annotations

import argparse

import torch

from inferlab.kvcache import LlamaDecoder, generate_cached
from inferlab.models import BUNDLED_DIR


# --8<-- [start:quick]
def load_bundled_pair_quickly():
    """Return (target, draft, tokenizer) of the bundled pair as inferlab decoders, without transformers."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(BUNDLED_DIR / "tokenizer" / "tokenizer.json"))
    # Each model folder holds config.json + model.safetensors; the decoder reads them directly.
    target, draft = (LlamaDecoder.from_pretrained(BUNDLED_DIR / name) for name in ("target", "draft"))
    return target, draft, tokenizer


def quick_generate(prompt: str, max_new_tokens: int = 32) -> str:
    """Return ``prompt`` continued greedily by the bundled target (KV-cached, no transformers import)."""
    target, _, tokenizer = load_bundled_pair_quickly()
    ids = torch.tensor([tokenizer.encode(prompt).ids])
    tokens = generate_cached(target, ids, max_new_tokens).tokens
    return tokenizer.decode(tokens[0].tolist())


# --8<-- [end:quick]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("prompt", nargs="?", default="def main():", help="text to continue")
    parser.add_argument("--max-new-tokens", type=int, default=32, help="tokens to generate (>= 0)")
    args = parser.parse_args(argv)
    if args.max_new_tokens < 0:
        parser.error(f"--max-new-tokens must be >= 0, got {args.max_new_tokens}")
    print(quick_generate(args.prompt, args.max_new_tokens))


if __name__ == "__main__":
    main()
