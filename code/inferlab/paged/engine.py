"""MiniEngine: a small vLLM-style server for a Llama model, on a paged KV cache.

Each call to :meth:`MiniEngine.step` is one iteration of *continuous batching* (Yu et al., 2022,
"Orca", Section 3): requests join the running batch as soon as blocks are free and leave it the
moment they finish, instead of waiting for the slowest request of a fixed batch. One step runs a
single forward pass over every running request's new tokens together:

- a newly admitted request brings its prompt *minus the tokens found in the prefix cache* (prefill);
- every other running request brings the one token it sampled last (decode).

The weights are read once per step for the whole batch, which is why serving eight requests
together costs far less than eight times serving one.
"""

from __future__ import annotations

import os
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import torch

from inferlab.checks import require_int, require_token_ids
from inferlab.kvcache.decoder import LlamaDecoder
from inferlab.paged.attention import (
    check_paged_inputs,
    decode_mask,
    paged_decode_attention,
    paged_prefill_attention,
    write_kv,
)
from inferlab.paged.blocks import BlockManager, OutOfBlocksError


def as_decoder(model) -> LlamaDecoder:
    """Return the engine's model: the LlamaDecoder itself, or one built once from a transformers model."""
    return model if isinstance(model, LlamaDecoder) else LlamaDecoder.from_pretrained(model)


def available_memory(device: torch.device) -> int | None:
    """Return the bytes free on a device (CUDA: free GPU memory; CPU: available RAM), None if unknown."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # not Linux: no cheap way to ask
        return None


def check_cache_fits(model: LlamaDecoder, num_blocks: int, block_size: int) -> None:
    """Raise ValueError, before allocating, when the block pool would not fit in the device's free memory."""
    element_bytes = torch.empty((), dtype=model.dtype).element_size()
    pool_bytes = 2 * model.num_layers * num_blocks * block_size * model.num_kv_heads * model.head_dim * element_bytes
    free = available_memory(model.device)
    if free is not None and pool_bytes > free:
        raise ValueError(
            f"num_blocks={num_blocks} blocks of {block_size} tokens would take {pool_bytes / 2**30:.2f} GiB of "
            f"KV cache, more than the {free / 2**30:.2f} GiB free on {model.device}; use fewer blocks"
        )


@dataclass
class Request:
    """One generation request and what happened to it."""

    request_id: int
    prompt_ids: list[int]
    max_new_tokens: int
    output_ids: list[int] = field(default_factory=list)
    cached_tokens: int = 0  # prompt tokens served from the prefix cache at admission
    num_cached_now: int = 0  # tokens found cached at the latest (re)admission
    prefilled: bool = False
    arrival_s: float = 0.0
    first_token_s: float | None = None
    finish_s: float | None = None

    @property
    def context_ids(self) -> list[int]:
        """Return the prompt followed by every token generated so far."""
        return self.prompt_ids + self.output_ids

    @property
    def num_tokens(self) -> int:
        """Return the length of the context (prompt + generated tokens)."""
        return len(self.prompt_ids) + len(self.output_ids)

    @property
    def ttft_s(self) -> float:
        """Return the time to first token, in seconds."""
        return self.first_token_s - self.arrival_s

    @property
    def tpot_s(self) -> float:
        """Return the mean time per output token after the first, in seconds (0 for one token)."""
        n = len(self.output_ids)
        return (self.finish_s - self.first_token_s) / (n - 1) if n > 1 else 0.0

    @property
    def computed_tokens(self) -> int:
        """Return how many prompt tokens the prefill actually ran through the model."""
        return len(self.prompt_ids) - self.cached_tokens


class MiniEngine:
    """Serve greedy generation from a paged KV cache with prefix caching and continuous batching."""

    def __init__(
        self,
        model: Any,
        num_blocks: int = 512,
        block_size: int = 16,
        max_batch_size: int = 8,
        enable_prefix_caching: bool = True,
        eos_token_id: int | None = None,
    ) -> None:
        require_int(max_batch_size, "max_batch_size", minimum=1)
        if eos_token_id is not None:
            require_int(eos_token_id, "eos_token_id", minimum=0)
        self.blocks = BlockManager(num_blocks, block_size, enable_prefix_caching)  # checks them, before any model
        self.model = as_decoder(model)
        check_cache_fits(self.model, num_blocks, block_size)
        self.block_size = block_size
        self.max_batch_size = max_batch_size
        self.eos_token_id = eos_token_id
        m = self.model
        shape = (num_blocks, block_size, m.num_kv_heads, m.head_dim)
        self.k_cache = [torch.zeros(shape, dtype=m.dtype, device=m.device) for _ in range(m.num_layers)]
        self.v_cache = [torch.zeros(shape, dtype=m.dtype, device=m.device) for _ in range(m.num_layers)]
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self._next_id = 0
        self.num_preemptions = 0

    # --8<-- [start:add_request]
    def add_request(self, prompt_ids: list[int], max_new_tokens: int) -> Request:
        """Return a queued request for ``prompt_ids``; it is served by the next calls to step()."""
        require_int(max_new_tokens, "max_new_tokens", minimum=1)
        prompt_ids = require_token_ids(prompt_ids, "prompt_ids", self.model.vocab_size)  # no float or str ids
        if len(prompt_ids) + max_new_tokens > self.model.max_positions:
            raise ValueError(
                f"prompt ({len(prompt_ids)} tokens) + max_new_tokens ({max_new_tokens}) exceeds the "
                f"model's {self.model.max_positions} positions"
            )
        # The cache holds the prompt and every new token but the last (which is never fed back).
        blocks_needed = -(-(len(prompt_ids) + max_new_tokens - 1) // self.block_size)
        if blocks_needed > self.blocks.num_blocks:  # it could never run, and would block every later request
            raise ValueError(
                f"max_new_tokens={max_new_tokens} with a {len(prompt_ids)}-token prompt needs {blocks_needed} "
                f"blocks of {self.block_size} tokens, more than the cache's {self.blocks.num_blocks}"
            )
        request = Request(self._next_id, prompt_ids, max_new_tokens, arrival_s=time.perf_counter())
        self._next_id += 1
        self.waiting.append(request)
        return request

    # --8<-- [end:add_request]

    # --8<-- [start:step]
    def step(self) -> list[Request]:
        """Run one continuous-batching iteration; return the requests that finished in it."""
        decode_slots = self._reserve_decode_slots()  # running requests first, as vLLM schedules
        if len(decode_slots) == len(self.running):  # no one was preempted: room for newcomers
            self._admit_waiting()
        if not self.running:
            return []
        tokens, positions, slots, rows = [], [], [], []  # rows: (request, first row, number of rows)
        for request in self.running:
            if request.request_id in decode_slots:  # decode: the token sampled last step
                new = request.output_ids[-1:]
                first = request.num_tokens - 1
                new_slots = [decode_slots[request.request_id]]
            else:  # prefill: only the tokens the prefix cache did not have
                first = request.num_cached_now
                new = request.context_ids[first:]
                table = self.blocks.block_table(request.request_id)
                new_slots = [
                    table[p // self.block_size] * self.block_size + p % self.block_size
                    for p in range(first, first + len(new))
                ]
            rows.append((request, len(tokens), len(new)))
            tokens += new
            positions += range(first, first + len(new))
            slots += new_slots
        logits = self._forward(tokens, positions, slots, rows)
        return self._sample_and_retire(logits, rows)

    # --8<-- [end:step]

    def run(self, prompts: list[list[int]], max_new_tokens: int) -> list[Request]:
        """Return the finished requests for ``prompts`` (all queued at once), in prompt order."""
        requests = [self.add_request(p, max_new_tokens) for p in prompts]
        while self.waiting or self.running:
            self.step()
        return requests

    # ----- the pieces of a step ---------------------------------------------------------------

    def _admit_waiting(self) -> None:
        """Move waiting requests into the batch while there is room and there are blocks."""
        while self.waiting and len(self.running) < self.max_batch_size:
            request = self.waiting[0]
            try:
                _, cached = self.blocks.allocate(request.request_id, request.context_ids)
            except OutOfBlocksError:
                if not self.running:  # nothing will ever free a block for it
                    raise
                break  # wait until a running request finishes and frees its blocks
            if not request.output_ids:  # first admission (not a return after preemption)
                request.cached_tokens = cached
            request.num_cached_now = cached
            request.prefilled = False
            self.running.append(self.waiting.popleft())

    # --8<-- [start:preempt]
    def _reserve_decode_slots(self) -> dict[int, int]:
        """Return {request id: cache slot} for every decoding request's next token, preempting if full."""
        slots = {}
        for request in list(self.running):
            if not request.prefilled or request not in self.running:
                continue
            while request in self.running:
                try:
                    block, offset = self.blocks.append(request.request_id, request.output_ids[-1])
                    slots[request.request_id] = block * self.block_size + offset
                    break
                except OutOfBlocksError:
                    # No free block: push the youngest request back to the queue (vLLM's
                    # "recompute" preemption). Its blocks go to the free queue, still cached, so
                    # when it returns its prefill is mostly served from the prefix cache.
                    victim = self.running.pop()
                    self.num_preemptions += 1
                    self.blocks.free(victim.request_id)
                    self.waiting.appendleft(victim)
        return slots

    # --8<-- [end:preempt]

    # --8<-- [start:forward]
    @torch.no_grad()
    def _forward(self, tokens, positions, slots, rows) -> torch.Tensor:
        """Return next-token logits (requests, vocab): all new tokens of all requests in one pass."""
        device = self.model.device
        ids = torch.tensor([tokens], device=device)
        pos = torch.tensor([positions], device=device)
        slot_index = torch.tensor(slots, device=device)
        decode_rows = [r for r in rows if r[0].prefilled]  # one new token each
        prefill_rows = [r for r in rows if not r[0].prefilled]  # the uncached part of a context
        # Block tables and lengths are the same in every layer: build them once per step.
        if decode_rows:
            decode_index = torch.tensor([first for _, first, _ in decode_rows], device=device)
            decode_tables, decode_lengths = self._tables([r for r, _, _ in decode_rows])
            one_query = torch.empty(
                len(decode_rows), self.model.num_heads, 1, self.model.head_dim, dtype=self.model.dtype
            )
            check_paged_inputs(one_query, self.k_cache[0], self.v_cache[0], decode_tables, decode_lengths)  # once
            decode_allowed = decode_mask(decode_tables, decode_lengths, self.block_size)
        prefill_tables = [
            (torch.tensor(self.blocks.block_table(r.request_id), device=device), self.blocks.num_tokens(r.request_id))
            for r, _, _ in prefill_rows
        ]
        h = self.model.embed_ids(ids)  # (1, N, hidden): every request's new tokens side by side
        for layer, k_cache, v_cache in zip(self.model.layers, self.k_cache, self.v_cache, strict=True):
            q, k, v = layer.qkv(h, pos)  # (1, heads, N, head_dim)
            # Write first, read after: a request may hit blocks that another request fills in this pass.
            write_kv(k_cache, v_cache, k[0].transpose(0, 1), v[0].transpose(0, 1), slot_index)
            out = torch.empty_like(q)
            if decode_rows:  # all one-token requests in one batched paged-attention call
                one_query_each = q[0][:, decode_index].transpose(0, 1)[:, :, None]  # (S, heads, 1, head_dim)
                att = paged_decode_attention(one_query_each, k_cache, v_cache, decode_tables, decode_allowed)
                out[0][:, decode_index] = att[:, :, 0].transpose(0, 1)
            for (_, first, count), (table, length) in zip(prefill_rows, prefill_tables, strict=True):
                # Prompts differ in length: one call each, through the fused kernel.
                out[:, :, first : first + count] = paged_prefill_attention(
                    q[:, :, first : first + count], k_cache, v_cache, table, length
                )
            h = layer.finish(h, out)
        last_rows = torch.tensor([first + count - 1 for _, first, count in rows], device=device)
        return self.model.final_logits(h[0, last_rows])

    # --8<-- [end:forward]

    def _tables(self, requests: list[Request]) -> tuple[torch.Tensor, torch.Tensor]:
        """Return padded block tables (S, max_blocks) and token counts (S,) for some running requests."""
        tables = [self.blocks.block_table(r.request_id) for r in requests]
        width = max(len(t) for t in tables)
        padded = torch.tensor([t + [0] * (width - len(t)) for t in tables], device=self.model.device)
        lengths = torch.tensor([self.blocks.num_tokens(r.request_id) for r in requests], device=self.model.device)
        return padded, lengths

    def _sample_and_retire(self, logits: torch.Tensor, rows) -> list[Request]:
        """Append each request's greedy token; free the requests that are done; return those."""
        now = time.perf_counter()
        next_tokens = logits.argmax(-1).tolist()
        finished = []
        for (request, _, _), token in zip(rows, next_tokens, strict=True):
            request.prefilled = True
            request.output_ids.append(token)
            if request.first_token_s is None:
                request.first_token_s = now
            if len(request.output_ids) == request.max_new_tokens or token == self.eos_token_id:
                request.finish_s = now
                finished.append(request)
        for request in finished:
            self.blocks.free(request.request_id)  # its full blocks stay cached until evicted
            self.running.remove(request)
        return finished
