"""Per-token probabilities and perplexity of a line of code, checked against the model's own loss.

Run it: python perplexity.py (set INFERLAB_TARGET to a local model folder or a Hugging Face id).
"""

import math
import os

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

TARGET = os.environ.get("INFERLAB_TARGET", "Qwen/Qwen2.5-1.5B-Instruct")
tokenizer = AutoTokenizer.from_pretrained(TARGET)
model = AutoModelForCausalLM.from_pretrained(TARGET).eval()

# --8<-- [start:demo]
text = "for key, value in sorted(items.items()):\n    print(key, value)\n"
ids = tokenizer(text, return_tensors="pt").input_ids
with torch.no_grad():
    logits = model(ids).logits

# Teacher forcing: one forward pass over the true text; position t's logits predict token t + 1.
logprobs = torch.log_softmax(logits[0, :-1].double(), dim=-1)
targets = ids[0, 1:]
token_logprobs = logprobs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
for token, lp in zip(targets.tolist(), token_logprobs.tolist(), strict=True):
    print(f"{tokenizer.decode([token])!r:>14}  p = {math.exp(lp):.4f}")

mean_nll = -token_logprobs.mean().item()
print(f"perplexity = exp({mean_nll:.3f}) = {math.exp(mean_nll):.2f}")

# The same number from transformers: its loss is the mean negative log-likelihood of tokens 2..T.
with torch.no_grad():
    loss = model(ids, labels=ids).loss.item()
assert abs(loss - mean_nll) < 1e-4, (loss, mean_nll)
print(f"transformers' loss = {loss:.3f}: the same mean negative log-likelihood")
# --8<-- [end:demo]
