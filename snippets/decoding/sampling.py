"""Temperature, top-k and top-p on a real model's next-token distribution, then in generation.

Run it: python sampling.py (set INFERLAB_TARGET to a local model folder or a Hugging Face id).
It prints how many tokens each filter keeps, then generates with greedy decoding and with
nucleus sampling and prints how repetitive each text is (distinct-2: higher = less repetition).
"""

import os
from collections.abc import Sequence

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


# >>> generated from inferlab/decoding/sampling.py:temperature (python -m inferlab.snippetsync)
def apply_temperature(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Return logits / temperature: below 1 sharpens the softmax, above 1 flattens it."""
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not 0 < temperature < float("inf"):
        raise ValueError(f"temperature must be > 0 and finite (for 0 use greedy decoding, argmax), got {temperature!r}")
    # softmax(z / t): as t -> 0 all mass goes to the argmax, as t -> infinity it becomes uniform.
    return logits / temperature


# <<< generated

# >>> generated from inferlab/decoding/sampling.py:top_k (python -m inferlab.snippetsync)
def top_k_filter(logits: torch.Tensor, k: int, min_tokens_to_keep: int = 1) -> torch.Tensor:
    """Return logits with every token scoring below the k-th largest set to -inf."""
    for name, value in (("k", k), ("min_tokens_to_keep", min_tokens_to_keep)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    k = min(max(k, min_tokens_to_keep), logits.shape[-1])  # more tokens than exist: keep them all
    kth_largest = torch.topk(logits, k, dim=-1).values[..., -1:]
    # "Below the k-th value", not "outside the top-k indices": a tie with the k-th token survives.
    return logits.masked_fill(logits < kth_largest, float("-inf"))


# <<< generated

# >>> generated from inferlab/decoding/sampling.py:top_p (python -m inferlab.snippetsync)
def top_p_filter(logits: torch.Tensor, p: float, min_tokens_to_keep: int = 1) -> torch.Tensor:
    """Return logits keeping the most probable tokens whose total probability first reaches p."""
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p <= 1:
        raise ValueError(f"p must be a number in (0, 1], got {p!r}")
    if isinstance(min_tokens_to_keep, bool) or not isinstance(min_tokens_to_keep, int) or min_tokens_to_keep < 1:
        raise ValueError(f"min_tokens_to_keep must be an integer >= 1, got {min_tokens_to_keep!r}")
    # Walk the tokens from least to most probable: a token may go while the mass of everything
    # dropped so far (it included) stays <= 1 - p, so what is kept still holds at least p.
    ascending, order = torch.sort(logits, dim=-1, descending=False)
    tail_mass = ascending.softmax(dim=-1).cumsum(dim=-1)
    drop_sorted = tail_mass <= 1 - p
    drop_sorted[..., -min_tokens_to_keep:] = False  # the most probable token(s) always stay
    drop = drop_sorted.scatter(-1, order, drop_sorted)  # back to vocabulary order
    return logits.masked_fill(drop, float("-inf"))


# <<< generated

# >>> generated from inferlab/decoding/sampling.py:distinct_n (python -m inferlab.snippetsync)
def distinct_n(sequences: Sequence[Sequence[int]], n: int) -> float:
    """Return distinct n-grams / all n-grams over the sequences (1.0: no n-gram repeats)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    is_list = isinstance(sequences, Sequence) and not isinstance(sequences, (str, bytes))
    if not is_list or not all(isinstance(seq, Sequence) and not isinstance(seq, str) for seq in sequences):
        raise TypeError(f"sequences must be a list of token-id lists, got {sequences!r:.60}")
    all_ngrams = [tuple(seq[i : i + n]) for seq in sequences for i in range(len(seq) - n + 1)]
    if not all_ngrams:
        raise ValueError(f"no sequence is long enough to hold an {n}-gram")
    return len(set(all_ngrams)) / len(all_ngrams)


# <<< generated

# --8<-- [start:demo]
TARGET = os.environ.get("INFERLAB_TARGET", "Qwen/Qwen2.5-1.5B-Instruct")
NEW_TOKENS = 24 if os.environ.get("INFERLAB_FAST") else 64
tokenizer = AutoTokenizer.from_pretrained(TARGET)
model = AutoModelForCausalLM.from_pretrained(TARGET).eval()

prompt = tokenizer("import os\nimport sys\n\n\ndef main():\n    ", return_tensors="pt").input_ids
with torch.no_grad():
    logits = model(prompt).logits[0, -1]
print(f"vocabulary: {logits.numel()} tokens; top-1 probability {logits.softmax(-1).max():.3f}")
for name, filtered in [
    ("temperature 0.5", apply_temperature(logits, 0.5)),
    ("temperature 2.0", apply_temperature(logits, 2.0)),
    ("top-k 10", top_k_filter(logits, 10)),
    ("top-p 0.9", top_p_filter(logits, 0.9)),
]:
    probs = filtered.softmax(-1)
    print(f"{name:16s} keeps {int((probs > 0).sum()):5d} tokens, top-1 probability {probs.max():.3f}")


def cache_argument(out):
    """Return the keyword that hands the KV cache back: newer transformers say `cache`, older `past_key_values`."""
    return {"cache": out["cache"]} if "cache" in out else {"past_key_values": out["past_key_values"]}


def generate(sample, length):
    """Generate `length` tokens, choosing each with `sample(logits)`; reuse the KV cache for speed."""
    tokens = []
    with torch.no_grad():
        out = model(prompt, use_cache=True)
        for _ in range(length):
            token = sample(out.logits[:, -1])
            tokens.append(int(token))
            out = model(token.view(1, 1), use_cache=True, **cache_argument(out))
    return tokens


generator = torch.Generator().manual_seed(0)
greedy = generate(lambda z: z.argmax(-1), NEW_TOKENS)
nucleus = generate(lambda z: torch.multinomial(top_p_filter(z, 0.9).softmax(-1), 1, generator=generator), NEW_TOKENS)
for name, tokens in (("greedy", greedy), ("top-p 0.9", nucleus)):
    print(f"--- {name}: distinct-2 = {distinct_n([tokens], 2):.2f}")
    print(tokenizer.decode(tokens))
# --8<-- [end:demo]
