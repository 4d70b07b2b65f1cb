"""Autoregressive models written out as probability tables: the smallest models worth decoding.

A :class:`MarkovModel` of order k gives p(x_{t+1} | the last k tokens) as an explicit table; a
:class:`TableModel` gives p(x_{t+1} | *all* earlier tokens) for a fixed number of steps, which is
the same thing with k = (number of steps - 1). Both are *logits functions* (the package protocol:
``(batch, length)`` ids in, ``(batch, length, vocab)`` logits out), so the decoders that run on the
bundled transformer run on them unchanged.

Token ids are ``0 .. V-1``; id ``V`` is a start symbol (``bos_id``) that every input begins with.
It is never predicted: it only says "nothing has been generated yet", the way a transformer's
beginning-of-sequence token does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from inferlab.checks import require_int, require_number, require_size

ROW_TOLERANCE = 1e-9
MAX_TABLE_ENTRIES = 2**24  # 128 MiB of float64 probabilities


def _as_table(table: Any, index: int) -> torch.Tensor:
    try:
        return torch.as_tensor(table, dtype=torch.float64)
    except (TypeError, ValueError) as error:
        raise TypeError(f"tables[{index}] must be a nested list or tensor of probabilities: {error}") from error


def _check_rows(table: torch.Tensor, index: int) -> None:
    """Raise ValueError naming the first row of a conditional table that is not a distribution."""
    outside = ((table < 0) | ~torch.isfinite(table)).any(dim=-1)
    off_total = (table.sum(dim=-1) - 1.0).abs() > ROW_TOLERANCE
    for bad in (outside, off_total):  # checked for all rows at once; the first bad one is reported
        if bad.any():
            context = [int(i) for i in bad.nonzero()[0]] if bad.dim() else []
            row = table[tuple(context)]
            label = f"tables[{index}] row {context}" if context else f"tables[{index}]"
            if bad is outside:
                raise ValueError(f"{label} has an entry outside [0, 1]: {row.tolist()[:20]}")
            total = float(row.sum())
            raise ValueError(f"{label} sums to {total:.12g}; each row must sum to 1 (within {ROW_TOLERANCE})")


class MarkovModel:
    """A k-th order autoregressive model: p(x_{t+1} | x_1..x_t) depends on the last k tokens only."""

    def __init__(self, order: int, tables: Sequence[Any], names: Sequence[str] | None = None):
        if isinstance(order, bool) or not isinstance(order, int) or order < 0:
            raise ValueError(f"order must be an integer >= 0, got {order!r}")
        if isinstance(tables, (str, bytes)) or not isinstance(tables, Sequence):
            raise TypeError(f"tables must be a list of probability tables, got {type(tables).__name__}")
        if len(tables) < order + 1:
            raise ValueError(
                f"an order-{order} model needs at least {order + 1} tables "
                f"(p(x1), p(x2 | x1), ..., p(x{order + 1} | x1..x{order})), got {len(tables)}"
            )
        self.order = order
        self.tables = [_as_table(table, index) for index, table in enumerate(tables)]
        vocab = self.tables[0].shape[-1] if self.tables[0].dim() == 1 else None
        if vocab is None or vocab < 1:
            raise ValueError(f"tables[0] must be a 1-D distribution p(x1), got shape {tuple(self.tables[0].shape)}")
        self.vocab_size = vocab
        self.bos_id = vocab  # the start symbol sits just past the real tokens
        for index, table in enumerate(self.tables):
            expected = (vocab,) * (min(index, order) + 1)
            if tuple(table.shape) != expected:
                raise ValueError(
                    f"tables[{index}] must have shape {expected} (context of {min(index, order)} tokens, "
                    f"then the next token), got {tuple(table.shape)}"
                )
            _check_rows(table, index)
        self.names = list(names) if names is not None else [str(i) for i in range(vocab)]
        if len(self.names) != vocab:
            raise ValueError(f"names must give one name per token ({vocab}), got {len(self.names)}")
        self.max_length: int | None = None  # a Markov model can run forever: its last table repeats

    @classmethod
    def random(cls, order: int, vocab_size: int, seed: int = 0, concentration: float = 0.5) -> MarkovModel:
        """Return a model with random tables (Dirichlet rows: small concentration = peaked rows)."""
        require_int(order, "order", minimum=0)
        require_int(vocab_size, "vocab_size", minimum=1)
        require_int(seed, "seed", minimum=0)
        require_number(concentration, "concentration", minimum=0, min_open=True)
        # The tables hold V + V^2 + ... + V^(order+1) probabilities: refuse before drawing any.
        entries = sum(vocab_size ** (index + 1) for index in range(order + 1))
        require_size(entries, "order", MAX_TABLE_ENTRIES, f"table entries at vocab_size={vocab_size}")
        rng = np.random.default_rng(seed)
        tables = []
        for index in range(order + 1):
            contexts = (vocab_size,) * index
            rows = rng.dirichlet([concentration] * vocab_size, size=contexts or None)
            tables.append(torch.as_tensor(rows, dtype=torch.float64))
        return cls(order, tables)

    def table_at(self, step: int) -> torch.Tensor:
        """Return p(x_{step+1} | last min(step, k) tokens) as a probability table (step = tokens so far)."""
        require_int(step, "step", minimum=0, maximum=None if self.max_length is None else self.max_length - 1)
        return self.tables[min(step, len(self.tables) - 1)]

    # --8<-- [start:log_conditional]
    def log_conditional(self, step: int, order: int | None = None) -> torch.Tensor:
        """Return log p(x_{step+1} | last m tokens) as a table of shape (V,)*m + (V,), m = min(step, order)."""
        require_int(step, "step", minimum=0)
        order = self.order if order is None else order
        require_int(order, "order", minimum=self.order)  # a smaller state would forget context the model uses
        table = self.table_at(step).log()
        # Seen as a model of a higher order, the extra (older) context tokens simply do not matter:
        # broadcast the table along new leading axes.
        extra = min(step, order) - min(step, self.order)
        return table.reshape((1,) * extra + tuple(table.shape)).expand((self.vocab_size,) * extra + tuple(table.shape))

    # --8<-- [end:log_conditional]

    def __call__(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Return (batch, length, V) logits (log-probabilities) for ids that start with ``bos_id``."""
        ids = torch.as_tensor(input_ids)
        if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
            raise TypeError(f"input_ids must hold integer token ids, got dtype {ids.dtype}")
        if ids.dim() != 2 or ids.shape[1] < 1:
            raise ValueError(f"input_ids must have shape (batch, length >= 1), got {tuple(ids.shape)}")
        if not (ids[:, 0] == self.bos_id).all():
            raise ValueError(f"every row of input_ids must start with the start symbol bos_id={self.bos_id}")
        body = ids[:, 1:]
        if body.numel() and ((body < 0) | (body >= self.vocab_size)).any():
            raise ValueError(f"token ids after the start symbol must be in 0..{self.vocab_size - 1}")
        batch, length = ids.shape
        logits = torch.full((batch, length, self.vocab_size), float("nan"), dtype=torch.float64)
        for position in range(length):
            step = position  # tokens generated so far, not counting the start symbol
            if self.max_length is not None and step >= self.max_length:
                break  # no table for this step: the logits stay NaN, and the decoders refuse it up front
            context_length = min(step, self.order)
            context = body[:, step - context_length : step]
            table = self.table_at(step).log()
            logits[:, position] = table[tuple(context.T)] if context_length else table.expand(batch, -1)
        return logits  # float64: the tables are exact, keep them so

    def __repr__(self) -> str:
        return f"{type(self).__name__}(order={self.order}, vocab_size={self.vocab_size})"


class TableModel(MarkovModel):
    """A model over a fixed number of steps given by full tables p(x1), p(x2 | x1), p(x3 | x1, x2), ..."""

    def __init__(self, tables: Sequence[Any], names: Sequence[str] | None = None):
        if len(tables) < 1:
            raise ValueError("tables must hold at least p(x1)")
        # Conditioning on everything before is a Markov model of order (steps - 1).
        super().__init__(order=len(tables) - 1, tables=tables, names=names)
        self.max_length = len(tables)
