"""Argument checks shared by every public function: refuse bad input before any work starts.

Each check raises ``TypeError`` (wrong kind of value) or ``ValueError`` (right kind, outside the
allowed range) with one message shape, ``"<name> must be <what is allowed>, got <what was given>"``,
so an error always names the argument and says how to fix it. Nothing is clamped or rounded.

Pure Python at import time (torch is imported only by the tensor checks), so modules that must stay
torch-free, such as the calculators, can use it too.

A few sections that reader snippets copy (``inferlab.snippetsync``) cannot import this module;
they spell the same checks out inline, with the same messages.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any


class NonFiniteError(ValueError):
    """A tensor holds NaN or inf where the function needs finite numbers (a ValueError, named)."""


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)  # True is an int in Python: refuse it


def _bounds_text(minimum: float | None, maximum: float | None, min_open: bool, max_open: bool) -> str:
    if minimum is not None and maximum is not None:
        return f"in {'(' if min_open else '['}{minimum}, {maximum}{')' if max_open else ']'}"
    if minimum is not None:
        return f"{'>' if min_open else '>='} {minimum}"
    if maximum is not None:
        return f"{'<' if max_open else '<='} {maximum}"
    return ""


def require_int(value: Any, name: str, minimum: int | None = None, maximum: int | None = None) -> int:
    """Return ``value`` if it is an integer (not a bool) within [minimum, maximum]; raise otherwise."""
    bounds = _bounds_text(minimum, maximum, False, False)
    allowed = f"an integer {bounds}" if bounds else "an integer"
    if not _is_int(value):
        raise TypeError(f"{name} must be {allowed}, got {_shown(value)}")
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ValueError(f"{name} must be {allowed}, got {value}")
    return value


def require_number(
    value: Any,
    name: str,
    minimum: float | None = None,
    maximum: float | None = None,
    min_open: bool = False,
    max_open: bool = False,
) -> float:
    """Return ``value`` as a float if it is a finite real number within the bounds; raise otherwise.

    ``min_open`` / ``max_open`` exclude the bound itself: (0, 1] is ``minimum=0, min_open=True, maximum=1``.
    """
    allowed = _bounds_text(minimum, maximum, min_open, max_open)
    suffix = f" {allowed}" if allowed else ""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number{suffix}, got {_shown(value)}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number{suffix}, got {value}")
    too_low = minimum is not None and (value <= minimum if min_open else value < minimum)
    too_high = maximum is not None and (value >= maximum if max_open else value > maximum)
    if too_low or too_high:
        raise ValueError(f"{name} must be {allowed}, got {value}")
    return float(value)


def require_bool(value: Any, name: str) -> bool:
    """Return ``value`` if it is True or False (not 'yes', 1 or None); raise TypeError otherwise."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {_shown(value)}")
    return value


def require_choice(value: Any, name: str, choices: Iterable[Any]) -> Any:
    """Return ``value`` if it is one of ``choices``; raise ValueError listing them otherwise."""
    choices = tuple(choices)
    if not any(value == choice and type(value) is type(choice) for choice in choices):
        raise ValueError(f"{name} must be one of {choices}, got {_shown(value)}")
    return value


def require_token_ids(value: Any, name: str, vocab_size: int | None = None, allow_empty: bool = False) -> list[int]:
    """Return a list of token ids (integers in 0..vocab_size-1) from a list, tuple or integer tensor.

    Floats and strings are refused rather than converted: ``1.7`` is not a token id, and ``"12"``
    is text, not the id 12.
    """
    allowed = "a list or 1-D tensor of integer token ids" + (f" in 0..{vocab_size - 1}" if vocab_size else " >= 0")
    if hasattr(value, "dtype") and hasattr(value, "tolist"):  # a torch or numpy array
        if getattr(value, "ndim", 1) != 1 or not _integer_dtype(value.dtype):
            raise TypeError(f"{name} must be {allowed}, got an array of shape {tuple(value.shape)} and {value.dtype}")
        value = value.tolist()
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be {allowed}, got {type(value).__name__}")
    ids = list(value)
    if not ids and not allow_empty:
        raise ValueError(f"{name} must be {allowed}, got an empty sequence")
    wrong_type = [t for t in ids if not _is_int(t) and not _is_integer_scalar(t)]
    if wrong_type:
        raise TypeError(f"{name} must be {allowed}, got {_shown(wrong_type[0])} among them")
    ids = [int(t) for t in ids]
    out_of_range = [t for t in ids if t < 0 or (vocab_size is not None and t >= vocab_size)]
    if out_of_range:
        raise ValueError(f"{name} must be {allowed}, got {out_of_range[0]} among them")
    return ids


def _integer_dtype(dtype: Any) -> bool:
    text = str(dtype)
    return ("int" in text or "long" in text) and "bool" not in text


def _is_integer_scalar(value: Any) -> bool:
    """Return True for a numpy/torch integer scalar (0-d), which Python cannot tell from isinstance."""
    return hasattr(value, "dtype") and getattr(value, "ndim", 0) == 0 and _integer_dtype(value.dtype)


def require_tensor(
    value: Any, name: str, dims: int | Sequence[int] | None = None, dtypes: Sequence[Any] | None = None
) -> Any:
    """Return ``value`` if it is a torch.Tensor with an allowed number of dims and dtype; raise otherwise."""
    import torch

    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if dims is not None:
        allowed_dims = (dims,) if isinstance(dims, int) else tuple(dims)
        if value.dim() not in allowed_dims:
            wanted = " or ".join(str(d) for d in allowed_dims)
            raise ValueError(f"{name} must have {wanted} dims, got shape {tuple(value.shape)}")
    if dtypes is not None and value.dtype not in dtypes:
        names = ", ".join(str(d).removeprefix("torch.") for d in dtypes)
        raise TypeError(f"{name} must have dtype {names}, got {value.dtype}")
    return value


def require_finite(tensor: Any, name: str, allow_negative_infinity: bool = False) -> None:
    """Raise NonFiniteError if a tensor holds NaN, +inf or (unless allowed) -inf, saying where."""
    import torch

    bad = torch.isnan(tensor) | (tensor == math.inf)
    if not allow_negative_infinity:
        bad |= tensor == -math.inf
    if bad.any():
        where = tuple(int(i) for i in bad.nonzero()[0])
        value = tensor[where].item()
        allowed = "finite numbers or -inf" if allow_negative_infinity else "finite numbers"
        raise NonFiniteError(f"{name} must hold {allowed}, got {value} at index {where}")


def require_size(count: int, name: str, limit: int, what: str) -> None:
    """Raise ValueError when a request would build more than ``limit`` things, before building any.

    ``what`` says what would be built, e.g. "table entries (float64, 8 bytes each)".
    """
    if count > limit:
        raise ValueError(f"{name} would need {count:,} {what}, over the limit of {limit:,}; choose a smaller {name}")
