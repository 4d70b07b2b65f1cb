"""Speculative sampling by hand, on any Hugging Face target/draft pair that shares a tokenizer.

Runs as it is in Colab (torch + transformers). Pick the pair with environment variables, e.g.
INFERLAB_TARGET=google/gemma-3-1b-it INFERLAB_DRAFT=google/gemma-3-270m-it. The sampler below is
generated from the inferlab package (python -m inferlab.snippetsync), the same code the site tests.
"""

import os
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

TARGET = os.environ.get("INFERLAB_TARGET", "Qwen/Qwen2.5-1.5B-Instruct")
DRAFT = os.environ.get("INFERLAB_DRAFT", "Qwen/Qwen2.5-0.5B-Instruct")
FAST = os.environ.get("INFERLAB_FAST") == "1"  # the site's tests set this to keep the run short
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def as_logits_fn(model: Any):
    """A Hugging Face causal LM as a function: (1, length) token ids -> (1, length, vocab) logits."""
    def logits_fn(input_ids: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return model(input_ids.to(model.device)).logits.float().cpu()
    return logits_fn


def validate(*arguments: Any) -> None:
    """The package checks every argument first; this copy trusts its caller."""


def check_filter_args(*arguments: Any) -> None:
    """The package checks temperature, top_k and top_p here; this copy trusts its caller."""


def check_probabilities(*arguments: Any) -> None:
    """The package refuses NaN, negative or all-zero weights here; this copy trusts its caller."""


def check_verify_args(*arguments: Any) -> None:
    """The package checks the rows and the draft ids here; this copy trusts its caller."""


def check_logits(logits: torch.Tensor, who: str) -> torch.Tensor:
    """The package refuses NaN or +inf logits here; this copy passes them on."""
    return logits


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

# >>> generated from inferlab/decoding/sampling.py:truncation (python -m inferlab.snippetsync)
def check_cutoff(name: str, value: float, min_tokens_to_keep: int, closed: bool = False) -> None:
    """Raise ValueError unless value is in (0, 1) ([0, 1] if closed) and min_tokens_to_keep is an integer >= 1."""
    number = not isinstance(value, bool) and isinstance(value, (int, float))
    if not number or not (0 <= value <= 1 if closed else 0 < value < 1):
        raise ValueError(f"{name} must be a number in {'[0, 1]' if closed else '(0, 1)'}, got {value!r}")
    if isinstance(min_tokens_to_keep, bool) or not isinstance(min_tokens_to_keep, int) or min_tokens_to_keep < 1:
        raise ValueError(f"min_tokens_to_keep must be an integer >= 1, got {min_tokens_to_keep!r}")


def keep_at_least(drop: torch.Tensor, logits: torch.Tensor, min_tokens_to_keep: int) -> torch.Tensor:
    """Return ``drop`` with the ``min_tokens_to_keep`` highest logits of each row spared."""
    keep = min(min_tokens_to_keep, logits.shape[-1])
    return drop.scatter(-1, torch.topk(logits, keep, dim=-1).indices, False)


def min_p_filter(logits: torch.Tensor, min_p: float, min_tokens_to_keep: int = 1) -> torch.Tensor:
    """Return logits keeping the tokens at least ``min_p`` times as probable as the most probable one.

    Min-p sampling (Nguyen et al. 2024): the cut-off follows the model's confidence, strict when one
    token dominates and loose when many are plausible.
    """
    check_cutoff("min_p", min_p, min_tokens_to_keep, closed=True)
    probs = logits.softmax(dim=-1)
    drop = probs < min_p * probs.amax(dim=-1, keepdim=True)
    return logits.masked_fill(keep_at_least(drop, probs, min_tokens_to_keep), float("-inf"))


def typical_filter(logits: torch.Tensor, typical_p: float, min_tokens_to_keep: int = 1) -> torch.Tensor:
    """Return logits keeping the tokens whose surprise is closest to the entropy, until they hold typical_p.

    Locally typical sampling (Meister et al. 2023): a token is "typical" when -log p(token) is near
    the expected surprise H = -sum p log p; the most typical tokens are kept, as in top-p.
    """
    check_cutoff("typical_p", typical_p, min_tokens_to_keep)
    log_probs = logits.log_softmax(dim=-1)
    entropy = -(log_probs * log_probs.exp()).nansum(dim=-1, keepdim=True)  # nansum: 0 * -inf terms
    distance = (-log_probs - entropy).abs()
    ordered, order = torch.sort(distance, dim=-1)
    running_mass = logits.gather(-1, order).softmax(dim=-1).cumsum(dim=-1)
    # The last kept token is the first whose running mass reaches typical_p; ties with it stay too.
    last = (running_mass < typical_p).sum(dim=-1, keepdim=True).clamp(max=logits.shape[-1] - 1)
    drop_sorted = ordered > ordered.gather(-1, last)
    drop_sorted[..., :min_tokens_to_keep] = False  # the most typical token(s) always stay
    return logits.masked_fill(drop_sorted.scatter(-1, order, drop_sorted), float("-inf"))


def epsilon_filter(logits: torch.Tensor, epsilon: float, min_tokens_to_keep: int = 1) -> torch.Tensor:
    """Return logits without the tokens of probability below ``epsilon`` (Hewitt et al. 2022)."""
    check_cutoff("epsilon", epsilon, min_tokens_to_keep)
    drop = logits.softmax(dim=-1) < epsilon
    return logits.masked_fill(drop & ~kept_by_top_k(logits, min_tokens_to_keep), float("-inf"))


def eta_filter(logits: torch.Tensor, eta: float, min_tokens_to_keep: int = 1) -> torch.Tensor:
    """Return logits without the tokens below min(eta, sqrt(eta) * exp(-entropy)) (Hewitt et al. 2022).

    Eta sampling lowers the epsilon cut-off when the distribution is spread out (high entropy), so a
    flat distribution keeps more of its tail than a peaked one.
    """
    check_cutoff("eta", eta, min_tokens_to_keep)
    probs = logits.softmax(dim=-1)
    log_probs = logits - logits.logsumexp(dim=-1, keepdim=True)
    # H = -sum p log p; clamping log p at the dtype's lowest value makes a 0 * log 0 term 0, not NaN.
    entropy = -(log_probs.clamp(min=torch.finfo(logits.dtype).min) * log_probs.softmax(dim=-1)).sum(dim=-1)
    eta_tensor = torch.tensor(eta, device=logits.device)  # float32, as transformers computes it
    cutoff = torch.minimum(eta_tensor, eta_tensor.sqrt() * torch.exp(-entropy))[..., None]
    drop = probs < cutoff
    return logits.masked_fill(drop & ~kept_by_top_k(logits, min_tokens_to_keep), float("-inf"))


def kept_by_top_k(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Return True where a token scores at least the k-th largest logit of its row (ties included)."""
    k = min(k, logits.shape[-1])
    return logits >= torch.topk(logits, k, dim=-1).values[..., -1:]


# <<< generated

# >>> generated from inferlab/decoding/sampling.py:filter_logits (python -m inferlab.snippetsync)
def filter_logits(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    min_p: float | None = None,
    typical_p: float | None = None,
    epsilon: float | None = None,
    eta: float | None = None,
    min_tokens_to_keep: int = 1,
) -> torch.Tensor:
    """Return logits after temperature, top-k, top-p, min-p, typical, epsilon and eta, in that order.

    Ruled-out tokens become -inf; None leaves a filter off. NaN logits pass through as NaN (the way
    transformers' warpers treat them): the samplers refuse them, since no distribution has them.
    """
    check_filter_args(temperature, top_k, top_p, min_p, typical_p, epsilon, eta, min_tokens_to_keep)
    if temperature != 1.0:
        logits = apply_temperature(logits, temperature)
    if top_k is not None:
        logits = top_k_filter(logits, top_k, min_tokens_to_keep)
    if top_p is not None and top_p < 1.0:
        logits = top_p_filter(logits, top_p, min_tokens_to_keep)
    if min_p is not None:
        logits = min_p_filter(logits, min_p, min_tokens_to_keep)
    if typical_p is not None:
        logits = typical_filter(logits, typical_p, min_tokens_to_keep)
    if epsilon is not None:
        logits = epsilon_filter(logits, epsilon, min_tokens_to_keep)
    if eta is not None:
        logits = eta_filter(logits, eta, min_tokens_to_keep)
    return logits


# <<< generated

# >>> generated from inferlab/speculative/sampler.py:result (python -m inferlab.snippetsync)
@dataclass
class SpeculativeResult:
    """What a speculative decoder produced, and how much drafting and checking it took."""

    sequences: torch.Tensor  # (1, prompt + new) token ids, prompt included
    prompt_length: int
    accepted: int = 0  # drafted tokens the target kept
    drafted: int = 0  # drafted tokens proposed to the target
    target_calls: int = 0  # target forward passes
    draft_calls: int = 0  # draft forward passes
    rounds: int = 0  # draft-then-verify rounds
    accepted_per_round: list[int] = field(default_factory=list)
    # For every draft the target looked at (up to and including a rejection): the probability it
    # had of being accepted, sum_x min(p(x), q(x)) (1 or 0 under greedy verification).
    acceptance_probs: list[float] = field(default_factory=list)

    @property
    def new_tokens(self) -> torch.Tensor:
        """Return the generated tokens, prompt removed, shape (1, new)."""
        return self.sequences[:, self.prompt_length :]

    @property
    def alpha(self) -> float:
        """Return the acceptance rate accepted / drafted (nan when nothing was drafted)."""
        return self.accepted / self.drafted if self.drafted else float("nan")

    @property
    def alpha_per_token(self) -> float:
        """Return Leviathan et al.'s alpha: the mean acceptance probability of the drafts the target checked."""
        if not self.acceptance_probs:
            return float("nan")
        return sum(self.acceptance_probs) / len(self.acceptance_probs)

    @property
    def tokens_per_target_call(self) -> float:
        """Return generated tokens per target forward pass (1.0 for plain decoding)."""
        return self.new_tokens.shape[1] / self.target_calls if self.target_calls else float("nan")


# <<< generated

# >>> generated from inferlab/speculative/sampler.py:sample_token (python -m inferlab.snippetsync)
def sample_token(probs: torch.Tensor, generator: torch.Generator | None = None) -> int:
    """Return one index drawn from ``probs`` (any non-negative weights) with a single uniform draw."""
    check_probabilities(probs, "probs")
    # Inverse CDF with exactly one random number per token keeps two implementations in lockstep.
    cdf = probs.detach().double().cpu().cumsum(-1)
    u = torch.rand((), generator=generator, dtype=torch.float64)
    index = int(torch.searchsorted(cdf, u * cdf[-1], right=True))
    return min(index, cdf.numel() - 1)


# <<< generated

# >>> generated from inferlab/speculative/sampler.py:next_token_probs (python -m inferlab.snippetsync)
def next_token_probs(logits: torch.Tensor, temperature: float, top_k: int | None, top_p: float | None) -> torch.Tensor:
    """Return the distribution a sampler draws from: softmax of logits after temperature, top-k, top-p."""
    # Softmax ignores a shift, so subtract the max first: then (logits - max) / temperature is <= 0 and
    # never overflows, even at temperature 1e-39, where the distribution correctly becomes the argmax.
    shifted = logits.float() - logits.float().max(dim=-1, keepdim=True).values
    if torch.isnan(shifted).any():
        raise ValueError("logits must not be NaN or all -inf: no distribution has them")
    return filter_logits(shifted, temperature, top_k, top_p).softmax(dim=-1)


# <<< generated

# >>> generated from inferlab/speculative/sampler.py:verify (python -m inferlab.snippetsync)
def verify_drafts(
    p_rows: torch.Tensor, q_rows: torch.Tensor, drafts: list[int], generator: torch.Generator | None = None
) -> tuple[list[int], int, list[float]]:
    """Return (tokens kept, drafts accepted, acceptance probabilities) for one round of verification.

    ``p_rows[i]`` and ``q_rows[i]`` are the target's and the draft's distributions for the i-th drafted
    token; ``p_rows`` has one extra row, for the token after the last draft.
    """
    check_verify_args(p_rows, q_rows, drafts)
    uniforms = torch.rand(len(drafts), generator=generator, dtype=torch.float64)
    kept, acceptance_probs = [], []
    for i, token in enumerate(drafts):
        p, q = p_rows[i].double().cpu(), q_rows[i].double().cpu()
        acceptance_probs.append(float(torch.minimum(p, q).sum()))
        # Keep with probability min(1, p/q); written without a division, q(token) > 0 as it was drawn.
        if uniforms[i] * q[token] < p[token]:
            kept.append(token)
            continue
        # Rejected: draw from the part of p that q under-covers, so the total comes out as exactly p.
        residual = (p - q).clamp(min=0.0)
        kept.append(sample_token(residual if residual.sum() > 0 else p, generator))
        return kept, i, acceptance_probs
    kept.append(sample_token(p_rows[len(drafts)], generator))  # all kept: a bonus token from p
    return kept, len(drafts), acceptance_probs


# <<< generated

# >>> generated from inferlab/speculative/sampler.py:verify_greedy (python -m inferlab.snippetsync)
def verify_greedy(target_logits: torch.Tensor, drafts: list[int]) -> tuple[list[int], int]:
    """Return (tokens kept, drafts accepted): drafts are kept while they equal the target's argmax."""
    choices = target_logits.argmax(dim=-1).tolist()  # the target's greedy token at every position
    for i, token in enumerate(drafts):
        if token != choices[i]:
            return drafts[:i] + [choices[i]], i  # the target's own token replaces the first miss
    return drafts + [choices[len(drafts)]], len(drafts)


# <<< generated

# >>> generated from inferlab/speculative/sampler.py:reference (python -m inferlab.snippetsync)
def speculative_sample_reference(
    target: Any,
    draft: Any,
    input_ids: torch.Tensor,
    max_new_tokens: int,
    gamma: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> SpeculativeResult:
    """Return a speculative sample computed without caches: each model call re-reads the whole sequence."""
    validate(target, draft, input_ids, max_new_tokens, gamma, temperature, top_k, top_p, generator)
    target_fn, draft_fn = as_logits_fn(target), as_logits_fn(draft)
    tokens = input_ids[0].tolist()
    result = SpeculativeResult(input_ids, prompt_length=len(tokens))
    while len(tokens) - result.prompt_length < max_new_tokens:
        # Draft at most one token fewer than still needed: the target always adds one more.
        n_draft = min(gamma, max_new_tokens - (len(tokens) - result.prompt_length) - 1)
        drafts, q_rows = [], []
        for _ in range(n_draft):  # 1. the draft proposes, one token at a time
            logits = check_logits(draft_fn(torch.tensor([tokens + drafts]))[0, -1], "draft")
            if temperature == 0:
                drafts.append(int(logits.argmax()))
            else:
                q_rows.append(next_token_probs(logits, temperature, top_k, top_p))
                drafts.append(sample_token(q_rows[-1], generator))
        # 2. the target scores every draft, and the position after them, in one call
        target_logits = check_logits(target_fn(torch.tensor([tokens + drafts]))[0, -(n_draft + 1) :], "target")
        if temperature == 0:  # 3. accept or reject
            kept, n_accepted = verify_greedy(target_logits, drafts)
            result.acceptance_probs += [1.0] * n_accepted + [0.0] * (n_accepted < n_draft)
        else:
            p_rows = next_token_probs(target_logits, temperature, top_k, top_p)
            kept, n_accepted, probs = verify_drafts(p_rows, q_rows, drafts, generator)
            result.acceptance_probs += probs
        tokens += kept
        result.accepted += n_accepted
        result.drafted += n_draft
        result.accepted_per_round.append(n_accepted)
        result.rounds += 1
        result.draft_calls += n_draft
        result.target_calls += 1
    result.sequences = torch.tensor([tokens], dtype=torch.long)
    return result


# <<< generated


def main() -> None:
    tokenizer = AutoTokenizer.from_pretrained(TARGET)
    target = AutoModelForCausalLM.from_pretrained(TARGET).to(DEVICE).eval()
    draft = AutoModelForCausalLM.from_pretrained(DRAFT).to(DEVICE).eval()
    prompt = "def fibonacci(n):\n" if FAST else "Explain in two sentences why the sky is blue.\n"
    input_ids = tokenizer(prompt, return_tensors="pt").input_ids
    new_tokens, gamma = (12, 3) if FAST else (48, 4)

    # Temperature 0: greedy verification must reproduce the target's own greedy output exactly.
    greedy = speculative_sample_reference(target, draft, input_ids, new_tokens, gamma, temperature=0)
    with torch.no_grad():
        expected = target.generate(input_ids.to(DEVICE), attention_mask=torch.ones_like(input_ids).to(DEVICE),
                                   max_new_tokens=new_tokens, do_sample=False)[0].cpu()
    # generate may stop early at an end-of-text token; our sampler keeps going, so compare that much.
    same = torch.equal(greedy.sequences[0, : len(expected)], expected)
    print(f"greedy speculative == target.generate greedy: {same}")
    print(f"  accepted {greedy.accepted} of {greedy.drafted} drafts; {greedy.target_calls} target calls for {new_tokens} tokens")

    # Temperature 0.8: a sample from the target's own distribution, drafted by the small model.
    generator = torch.Generator().manual_seed(0)
    sample = speculative_sample_reference(target, draft, input_ids, new_tokens, gamma, temperature=0.8, generator=generator)
    print(f"sampled: alpha = accepted / drafted = {sample.alpha:.2f}, {sample.target_calls} target calls")
    print(tokenizer.decode(sample.new_tokens[0]))


if __name__ == "__main__":
    main()
