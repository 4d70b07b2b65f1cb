"""How fast speculative decoding can be: the closed forms of Leviathan et al. (2022), Section 3.

Notation follows the paper: ``alpha`` is the expected probability that the target accepts one
drafted token, ``gamma`` the number of tokens drafted per round, ``c`` the time of one draft step
divided by the time of one target step, and ``c_hat`` the same ratio for arithmetic operations.
Every function treats ``alpha = 1`` as the limit of its formula (no division by zero).
"""

from __future__ import annotations

import math


def _check_alpha(alpha: float) -> None:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be a probability in [0, 1], got {alpha!r}")


def _check_gamma(gamma: int) -> None:
    if isinstance(gamma, bool) or not isinstance(gamma, int) or gamma < 1:
        raise ValueError(f"gamma must be an integer >= 1, got {gamma!r}")


def _check_cost_ratio(value: float, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (value >= 0.0 and math.isfinite(value)):
        raise ValueError(f"{name} must be a finite number >= 0 (a ratio of two costs), got {value!r}")


# --8<-- [start:formulas]
def expected_tokens_per_step(alpha: float, gamma: int) -> float:
    """Return the expected tokens one target call yields: (1 - alpha^(gamma+1)) / (1 - alpha)."""
    _check_alpha(alpha)
    _check_gamma(gamma)
    if alpha == 1.0:
        return gamma + 1.0  # every draft accepted, plus the bonus token
    return (1.0 - alpha ** (gamma + 1)) / (1.0 - alpha)


def expected_speedup(alpha: float, gamma: int, c: float, verify: float = 1.0) -> float:
    """Return the expected wall-time speed-up over plain decoding: tokens per step / (gamma c + verify).

    ``verify`` is the time of the target's call over gamma + 1 tokens in units of one plain decoding
    step. Leviathan et al. take it as 1 (checking all drafts costs what producing one token does,
    true while a step is limited by reading the weights); measure it where that does not hold.
    """
    _check_cost_ratio(c, "c")
    _check_cost_ratio(verify, "verify")
    if verify == 0:
        raise ValueError("verify must be > 0: the target's check of the drafts takes some time")
    # One round costs gamma draft steps plus one target call that checks all drafts at once.
    return expected_tokens_per_step(alpha, gamma) / (gamma * c + verify)


def expected_run_speedup(
    alpha: float, gamma: int, new_tokens: int, round_cost: float, prompt: float, draft_prompt: float = 0.0
) -> float:
    """Return the expected speed-up of a whole run, prompt included, from costs measured in target steps.

    Both loops first read the prompt (``prompt`` target steps, plus ``draft_prompt`` for the draft).
    Plain decoding then takes ``new_tokens`` steps; speculative decoding takes new_tokens / E[tokens
    per round] rounds, each costing ``round_cost`` (gamma draft steps and the check). With no prompt
    and round_cost = gamma * c + verify this is :func:`expected_speedup`.
    """
    for value, name in ((round_cost, "round_cost"), (prompt, "prompt"), (draft_prompt, "draft_prompt")):
        _check_cost_ratio(value, name)
    if isinstance(new_tokens, bool) or not isinstance(new_tokens, int) or new_tokens < 1:
        raise ValueError(f"new_tokens must be an integer >= 1, got {new_tokens!r}")
    if round_cost == 0:
        raise ValueError("round_cost must be > 0: a round calls the target at least once")
    rounds = new_tokens / expected_tokens_per_step(alpha, gamma)
    return run_speedup(new_tokens, rounds, round_cost, prompt, draft_prompt)


def run_speedup(new_tokens: int, rounds: float, round_cost: float, prompt: float, draft_prompt: float = 0.0) -> float:
    """Return a whole run's speed-up when speculative decoding takes ``rounds`` rounds (costs in target steps).

    :func:`expected_run_speedup` puts in the expected rounds; a benchmark can put in the rounds a run
    really needed, to test the cost model alone.
    """
    plain, speculative = run_steps(new_tokens, rounds, round_cost, prompt, draft_prompt)
    return plain / speculative


def run_steps(
    new_tokens: int, rounds: float, round_cost: float, prompt: float, draft_prompt: float = 0.0
) -> tuple[float, float]:
    """Return (plain, speculative): what each whole run costs, in target steps.

    Plain decoding costs the prompt plus one step per token; speculative decoding the prompt (for
    both models) plus ``rounds`` rounds. Several runs timed together are summed in seconds (each
    run's steps times its own step time) before dividing, as a benchmark sums its timings.
    """
    return prompt + new_tokens, prompt + draft_prompt + rounds * round_cost


def best_gamma(alpha: float, c: float, max_gamma: int = 64) -> int:
    """Return the gamma in 1..max_gamma with the largest expected speed-up (ties: the smaller gamma)."""
    _check_gamma(max_gamma)
    return max(range(1, max_gamma + 1), key=lambda gamma: (expected_speedup(alpha, gamma, c), -gamma))


def arithmetic_cost_increase(alpha: float, gamma: int, c_hat: float) -> float:
    """Return the expected factor by which total arithmetic grows (Leviathan et al., Section 3)."""
    _check_cost_ratio(c_hat, "c_hat")
    # Per round: gamma draft steps and a target pass over gamma + 1 positions, spread over the tokens produced.
    return (gamma * c_hat + gamma + 1.0) / expected_tokens_per_step(alpha, gamma)


# --8<-- [end:formulas]


def expected_accepted_fraction(alpha: float, gamma: int) -> float:
    """Return the expected accepted / drafted ratio when each draft is accepted with probability alpha."""
    # Accepted drafts per round are the tokens per step minus the one token the target always adds.
    return (expected_tokens_per_step(alpha, gamma) - 1.0) / gamma
