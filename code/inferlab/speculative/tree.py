"""Token trees: verify many drafted continuations in one target call (SpecInfer, Miao et al. 2024).

A chain of drafts dies at its first wrong token. SpecInfer drafts a *tree* instead: at each depth
the draft proposes its few most likely next tokens for every branch, and the target checks every
node of the tree in a single forward pass. The trick that makes one pass enough is the *tree
attention mask*: each node attends to the shared prefix (whose keys and values are cached once)
and to its own ancestors in the tree, never to its siblings or cousins, and gets the position id
of its depth. Greedy verification then walks down from the root, following the child that equals
the target's argmax, and stops where no child does; the output is the target's greedy output.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from inferlab.speculative.runner import IncrementalModel, check_logits
from inferlab.speculative.sampler import SpeculativeResult, check_decode_args, check_models_fit


@dataclass
class TreeNode:
    """One drafted token in the tree: its id, its parent's index (-1: the root) and its depth (>= 1)."""

    token: int
    parent: int
    depth: int


def path_to(nodes: list[TreeNode], index: int) -> list[int]:
    """Return the tokens from the root's first child down to node ``index``."""
    tokens = []
    while index != -1:
        tokens.append(nodes[index].token)
        index = nodes[index].parent
    return tokens[::-1]


# --8<-- [start:tree_mask]
def tree_attention_mask(prefix_length: int, nodes: list[TreeNode]) -> torch.Tensor:
    """Return a (nodes, prefix + nodes) boolean mask: True where a node may attend."""
    allowed = torch.zeros(len(nodes), prefix_length + len(nodes), dtype=torch.bool)
    allowed[:, :prefix_length] = True  # every branch shares the whole prefix
    for i in range(len(nodes)):
        ancestor = i
        while ancestor != -1:  # itself, its parent, ... up to the root: one root-to-node path
            allowed[i, prefix_length + ancestor] = True
            ancestor = nodes[ancestor].parent
    return allowed


# --8<-- [end:tree_mask]


class TreeModel(IncrementalModel):
    """An incremental model that can also read tree nodes, each seeing only its own branch."""

    def __init__(self, model: Any, who: str = "model"):
        super().__init__(model, who)
        self.nodes_cached = 0  # tree nodes whose keys and values sit in the cache after the prefix

    def tree_logits(self, ids: torch.Tensor, nodes: list[TreeNode], feed: list[int]) -> torch.Tensor:
        """Return logits rows for the unseen tokens of ``ids`` and then for the tree nodes in ``feed``.

        Nodes are appended to the cache in the order ``nodes`` lists them, so feed them in that order
        (each node after its parent).
        """
        self.calls += 1
        chain = ids[:, self.seen :]
        if self.kind == "fn":  # a plain logits function: read each branch as its own sequence
            rows = [self.logits_fn(ids)[0, self.seen :]] if chain.shape[1] else []
            rows += [self.logits_fn(torch.cat([ids, torch.tensor([path_to(nodes, i)])], 1))[0, -1:] for i in feed]
            self.seen = ids.shape[1]
            return check_logits(torch.cat(rows).float(), self.who)
        # The cache holds the prefix, then the nodes fed by earlier calls (nodes_cached of them).
        prefix_length, first_node = ids.shape[1], self.nodes_cached
        if feed != list(range(first_node, first_node + len(feed))) or (chain.shape[1] and first_node):
            raise RuntimeError("read the prefix first, then tree nodes in list order, each exactly once")
        allowed_nodes = tree_attention_mask(prefix_length, nodes[: first_node + len(feed)])[first_node:]
        # Unseen prefix tokens attend causally: token i of the chain sees cache slots 0 .. seen + i.
        allowed_chain = torch.ones(chain.shape[1], allowed_nodes.shape[1], dtype=torch.bool).tril(self.seen)
        allowed = torch.cat([allowed_chain, allowed_nodes])
        positions = list(range(self.seen, prefix_length)) + [prefix_length - 1 + nodes[i].depth for i in feed]
        new_ids = torch.cat([chain, torch.tensor([[nodes[i].token for i in feed]], dtype=torch.long)], 1)
        logits = self.forward_new(new_ids, torch.tensor(positions), allowed)
        self.seen = prefix_length  # nodes are cached after the prefix; rollback(prefix) drops them
        self.nodes_cached = first_node + len(feed)
        return logits

    def rollback(self, length: int) -> None:
        """Forget the tree nodes and every token after the first ``length``."""
        super().rollback(min(length, self.seen))
        self.nodes_cached = 0


def check_branching(branching: Any) -> None:
    """Raise ValueError unless branching is a non-empty sequence of integers >= 1."""
    if (
        not isinstance(branching, Sequence)
        or not branching
        or any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in branching)
    ):
        raise ValueError(
            f"branching must be a non-empty sequence of integers >= 1 (children per node at each depth), got {branching!r}"
        )


def tree_level_sizes(branching: Sequence[int]) -> list[int]:
    """Return how many nodes each depth of a full tree with this branching holds (2, 2, 1 -> 2, 4, 4)."""
    sizes, width = [], 1
    for children in branching:
        width *= children
        sizes.append(width)
    return sizes


# --8<-- [start:build_tree]
def draft_tree(draft: TreeModel, ids: torch.Tensor, branching: Sequence[int]) -> list[TreeNode]:
    """Return a token tree: at depth d every node gets the draft's branching[d-1] most likely next tokens."""
    nodes: list[TreeNode] = []
    frontier = [-1]  # start from the root: the last token of the sequence
    for depth, width in enumerate(branching, start=1):
        feed = [] if depth == 1 else frontier  # depth 1 needs only the prefix's last row
        rows = draft.tree_logits(ids, nodes, feed)[-len(frontier) :]
        next_frontier = []
        for parent, row in zip(frontier, rows, strict=True):
            for token in row.topk(width).indices.tolist():
                nodes.append(TreeNode(token, parent, depth))
                next_frontier.append(len(nodes) - 1)
        frontier = next_frontier
    return nodes


# --8<-- [end:build_tree]


# --8<-- [start:walk_tree]
def accept_greedy_path(nodes: list[TreeNode], root_row: torch.Tensor, node_rows: torch.Tensor) -> list[int]:
    """Return the tokens kept: follow the child equal to the target's argmax, then add its own token."""
    kept, current, row = [], -1, root_row
    while True:
        choice = int(row.argmax())
        child = next((i for i, n in enumerate(nodes) if n.parent == current and n.token == choice), None)
        kept.append(choice)  # the target's own choice is kept, matched by a draft or not
        if child is None:
            return kept
        current, row = child, node_rows[child]


# --8<-- [end:walk_tree]


def tree_speculative_decode(
    target: Any, draft: Any, input_ids: torch.Tensor, max_new_tokens: int, branching: Sequence[int] = (2, 2, 1, 1)
) -> SpeculativeResult:
    """Return the target's greedy continuation, drafted as a token tree and verified one tree per target call."""
    check_decode_args(input_ids, max_new_tokens)
    check_branching(branching)
    # The cache holds the prefix and then a whole tree: room for max_new_tokens plus one tree.
    check_models_fit(target, draft, input_ids, max_new_tokens, extra=sum(tree_level_sizes(branching)))
    target_model, draft_model = TreeModel(target, "target"), TreeModel(draft, "draft")
    ids = input_ids.cpu()
    result = SpeculativeResult(ids, prompt_length=ids.shape[1])
    while ids.shape[1] - result.prompt_length < max_new_tokens:
        budget = max_new_tokens - (ids.shape[1] - result.prompt_length) - 1
        nodes = draft_tree(draft_model, ids, branching[:budget]) if budget else []
        logits = target_model.tree_logits(ids, nodes, list(range(len(nodes))))
        root_row, node_rows = logits[-len(nodes) - 1], logits[len(logits) - len(nodes) :]
        kept = accept_greedy_path(nodes, root_row, node_rows)
        target_model.rollback(ids.shape[1])  # drop all tree nodes: the kept path is re-read next call
        draft_model.rollback(ids.shape[1])
        ids = torch.cat([ids, torch.tensor([kept], dtype=torch.long)], 1)
        result.accepted += len(kept) - 1
        result.drafted += len(nodes)
        result.accepted_per_round.append(len(kept) - 1)
        result.rounds += 1
    result.sequences = ids
    result.target_calls, result.draft_calls = target_model.calls, draft_model.calls
    return result
