"""Token trees: verify many drafted continuations in one target call (SpecInfer, Miao et al. 2024).

A chain of drafts dies at its first wrong token. SpecInfer drafts a *tree* instead: at each depth
the draft proposes its few most likely next tokens for every branch, and the target checks every
node of the tree in a single forward pass. The trick that makes one pass enough is the *tree
attention mask*: each node attends to the shared prefix (whose keys and values are cached once)
and to its own ancestors in the tree, never to its siblings or cousins, and gets the position id
of its depth. Greedy verification then walks down from the root, following the child that equals
the target's argmax, and stops where no child does; the output is the target's greedy output.

A tree of fixed shape spends its nodes the same way every round. A *dynamic* tree (EAGLE-2, Li et
al. 2024) lets the draft's own confidence decide: at each depth it keeps the few partial paths the
draft thinks most likely, and the target checks the ``nodes`` most likely of everything drafted.
When the draft is sure, that is a long chain; where it hesitates, the tree branches there.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
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


def tree_mask_rows(prefix_length: int, nodes: list[TreeNode], rows: list[int]) -> torch.Tensor:
    """Return the rows ``rows`` (consecutive node indices) of ``tree_attention_mask``, up to the last of them.

    The same mask, built the fast way: the decoders call this every depth of every round, and one
    indexed write is far cheaper than a Python-level write per (node, ancestor) pair.
    """
    row_index, column_index = [], []
    for row, node in enumerate(rows):
        while node != -1:  # the node itself, its parent, ... up to the root
            row_index.append(row)
            column_index.append(prefix_length + node)
            node = nodes[node].parent
    allowed = torch.zeros(len(rows), prefix_length + (rows[-1] + 1 if rows else 0), dtype=torch.bool)
    allowed[:, :prefix_length] = True
    allowed[row_index, column_index] = True
    return allowed


class TreeModel(IncrementalModel):
    """An incremental model that can also read tree nodes, each seeing only its own branch."""

    def __init__(self, model: Any, who: str = "model"):
        super().__init__(model, who)
        self.nodes_cached = 0  # tree nodes whose keys and values sit in the cache after the prefix
        self.tree: list[TreeNode] = []  # the node list they came from (its first nodes_cached were read)

    def tree_logits(
        self, ids: torch.Tensor, nodes: list[TreeNode], feed: list[int], project: bool = True
    ) -> torch.Tensor:
        """Return logits rows for the last token of ``ids`` if unseen, then for the tree nodes in ``feed``.

        Every unseen token of ``ids`` is read, but only the last one's row is returned: the tree grows
        from there, and the rows before it are never needed. Nodes are appended to the cache in the
        order ``nodes`` lists them, so feed them in that order (each node after its parent).
        ``project=False``: hidden states instead, on inferlab's decoder (see
        :meth:`IncrementalModel.project`).
        """
        self.calls += 1
        chain = ids[:, self.seen :]
        if self.kind == "fn":  # a plain logits function: read each branch as its own sequence
            rows = [self.logits_fn(ids)[0, -1:]] if chain.shape[1] else []
            rows += [self.logits_fn(torch.cat([ids, torch.tensor([path_to(nodes, i)])], 1))[0, -1:] for i in feed]
            self.seen = ids.shape[1]
            return check_logits(torch.cat(rows).float(), self.who)
        # The cache holds the prefix, then the nodes fed by earlier calls (nodes_cached of them).
        prefix_length, first_node = ids.shape[1], self.nodes_cached
        if feed != list(range(first_node, first_node + len(feed))) or (chain.shape[1] and first_node):
            raise RuntimeError("read the prefix first, then tree nodes in list order, each exactly once")
        allowed_nodes = tree_mask_rows(prefix_length, nodes, feed)
        # Unseen prefix tokens attend causally: token i of the chain sees cache slots 0 .. seen + i.
        allowed_chain = torch.ones(chain.shape[1], allowed_nodes.shape[1], dtype=torch.bool).tril(self.seen)
        allowed = torch.cat([allowed_chain, allowed_nodes])
        positions = list(range(self.seen, prefix_length)) + [prefix_length - 1 + nodes[i].depth for i in feed]
        new_ids = torch.cat([chain, torch.tensor([[nodes[i].token for i in feed]], dtype=torch.long)], 1)
        rows = self.forward_new(new_ids, torch.tensor(positions), allowed, project=False)[max(chain.shape[1] - 1, 0) :]
        self.seen = prefix_length  # nodes are cached after the prefix; rollback(prefix) drops them
        self.nodes_cached, self.tree = first_node + len(feed), nodes
        return self.project(rows) if project else rows

    def rollback(self, length: int) -> None:
        """Forget the tree nodes and every token after the first ``length``."""
        super().rollback(min(length, self.seen))
        self.nodes_cached = 0

    def keep_tokens(self, prefix_length: int, tokens: list[int]) -> None:
        """Keep the cached branch that spells ``tokens`` after the prefix, as if read in order; drop the rest.

        On inferlab's decoder the branch's keys and values move into the slots right after the prefix:
        a node at depth d was read at position prefix_length - 1 + d, which is exactly the slot it
        moves to, so the moved keys are the ones a plain read would have computed and no token is read
        twice. The branch is found by its tokens (siblings never share one), so a model can keep what
        it read even when the caller numbers the nodes differently. Tokens past the branch this model
        read stay unread, and so do all of them on other kinds of model: the next call reads them.
        """
        path = self.cached_branch(tokens) if self.kind == "decoder" else []
        if not path:
            self.rollback(prefix_length)
            return
        slots = torch.tensor([prefix_length + i for i in path], dtype=torch.long)
        moved = slice(prefix_length, prefix_length + len(path))
        self.cache.keys[:, :, :, moved] = self.cache.keys[:, :, :, slots]  # indexing copies first: no overlap
        self.cache.values[:, :, :, moved] = self.cache.values[:, :, :, slots]
        self.cache.length = self.seen = prefix_length + len(path)
        self.nodes_cached = 0

    def cached_branch(self, tokens: list[int]) -> list[int]:
        """Return the indices of the cached nodes along ``tokens`` from the root, as far as they match."""
        path, current, cached = [], -1, self.tree[: self.nodes_cached]
        for token in tokens:
            current = child_with_token(cached, current, token)
            if current is None:
                break
            path.append(current)
        return path


@dataclass(frozen=True)
class DynamicTree:
    """A dynamic tree's budget: ``nodes`` checked by the target, drafted ``depth`` deep, ``width`` paths grown per depth.

    Each grown path gets the draft's ``children`` likeliest next tokens (by default ``width``, as in
    EAGLE-2, whose one top-k sets both); every one of them is a candidate for the tree, grown or not.
    ``width=1, children=2`` drafts exactly what a chain does and adds each depth's second guess as a
    leaf. Paths are ranked by the draft's probabilities at ``temperature`` (logits / temperature): 1
    takes the draft as it is; a fitted value (:func:`inferlab.speculative.alpha.fit_draft_temperature`)
    makes them match how often the target's greedy choice really is the draft's token.
    """

    nodes: int
    depth: int
    width: int
    temperature: float = 1.0
    children: int | None = None

    def __post_init__(self) -> None:
        for name in ("nodes", "depth", "width", "children"):
            value = getattr(self, name)
            if name == "children" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"DynamicTree {name} must be an integer >= 1, got {value!r}")
        if isinstance(self.temperature, bool) or not isinstance(self.temperature, (int, float)):
            raise ValueError(f"DynamicTree temperature must be a number > 0, got {self.temperature!r}")
        if not math.isfinite(self.temperature) or self.temperature <= 0:
            raise ValueError(f"DynamicTree temperature must be a finite number > 0, got {self.temperature!r}")
        if self.nodes > self.drafted:
            raise ValueError(
                f"DynamicTree nodes must be at most the {self.drafted} tokens drafted "
                f"(depth {self.depth}, width {self.width}, children {self.top_k}), got {self.nodes}"
            )

    @property
    def top_k(self) -> int:
        """Return the next tokens drafted under each grown path."""
        return self.width if self.children is None else self.children

    def grown_per_depth(self) -> list[int]:
        """Return how many paths the draft grows (reads) at each depth: 1 (the root), then up to width."""
        grown, sizes = 1, []
        for _ in range(self.depth):
            sizes.append(grown)
            grown = min(self.width, grown * self.top_k)
        return sizes

    @property
    def drafted(self) -> int:
        """Return how many candidate tokens the draft proposes: top_k under every grown path."""
        return sum(self.grown_per_depth()) * self.top_k

    def shallower(self, depth: int) -> DynamicTree:
        """Return this budget drafted at most ``depth`` deep, keeping no more nodes than that drafts."""
        shallow = replace(self, nodes=1, depth=min(self.depth, depth))  # nodes=1 always fits: just to count
        return replace(shallow, nodes=min(self.nodes, shallow.drafted))


def check_branching(branching: Any) -> None:
    """Raise ValueError unless branching is a DynamicTree or a non-empty sequence of integers >= 1."""
    if isinstance(branching, DynamicTree):
        return
    if (
        not isinstance(branching, Sequence)
        or not branching
        or any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in branching)
    ):
        raise ValueError(
            "branching must be a DynamicTree or a non-empty sequence of integers >= 1 "
            f"(children per node at each depth), got {branching!r}"
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


# --8<-- [start:dynamic_tree]
def draft_dynamic_tree(draft: TreeModel, ids: torch.Tensor, shape: DynamicTree) -> list[TreeNode]:
    """Return the ``shape.nodes`` drafted tokens whose whole path the draft finds most likely (EAGLE-2)."""
    candidates: list[TreeNode] = []  # every token drafted, each after its parent
    log_probs: list[float] = []  # of each candidate's whole path under the draft
    grown: list[TreeNode] = []  # the candidates the draft reads to draft their children, in reading order
    grown_index = {-1: -1}  # candidate index -> index in grown (the root: -1 in both)
    frontier = [-1]  # the candidates grown at this depth
    for depth in range(1, shape.depth + 1):
        feed = list(range(len(grown) - len(frontier), len(grown))) if depth > 1 else []  # depth 1: the root row
        rows = draft.tree_logits(ids, grown, feed)[-len(frontier) :]
        next_token_log_probs = (rows / shape.temperature).log_softmax(-1)
        new = []
        for parent, row in zip(frontier, next_token_log_probs, strict=True):
            best = row.topk(shape.top_k)
            base = log_probs[parent] if parent >= 0 else 0.0
            for log_prob, token in zip(best.values.tolist(), best.indices.tolist(), strict=True):
                candidates.append(TreeNode(token, parent, depth))
                log_probs.append(base + log_prob)
                new.append(len(candidates) - 1)
        if depth == shape.depth:
            break
        frontier = sorted(new, key=lambda i: -log_probs[i])[: shape.width]  # grow only the likeliest paths
        for i in frontier:
            grown_index[i] = len(grown)
            grown.append(TreeNode(candidates[i].token, grown_index[candidates[i].parent], depth))
    return most_likely_subtree(candidates, log_probs, shape.nodes)


def most_likely_subtree(nodes: list[TreeNode], log_probs: list[float], keep: int) -> list[TreeNode]:
    """Return the ``keep`` likeliest nodes, renumbered; a path is never likelier than its parent's, so
    with ties broken by depth every kept node's parent is kept too."""
    chosen = sorted(sorted(range(len(nodes)), key=lambda i: (-log_probs[i], nodes[i].depth))[:keep])
    new_index = {old: new for new, old in enumerate(chosen)}
    return [
        TreeNode(nodes[i].token, new_index[nodes[i].parent] if nodes[i].parent >= 0 else -1, nodes[i].depth)
        for i in chosen
    ]


# --8<-- [end:dynamic_tree]


# --8<-- [start:walk_tree]
def child_with_token(nodes: list[TreeNode], parent: int, token: int) -> int | None:
    """Return the index of the child of ``parent`` (-1: the root) that drafted ``token``, or None."""
    return next((i for i, n in enumerate(nodes) if n.parent == parent and n.token == token), None)


def accept_greedy_path(
    nodes: list[TreeNode], root_row: torch.Tensor, node_rows: torch.Tensor | RowsOnDemand
) -> list[int]:
    """Return the tokens kept: follow the child equal to the target's argmax, then add its own token."""
    kept, current, row = [], -1, root_row
    while True:
        choice = int(row.argmax())
        child = child_with_token(nodes, current, choice)
        kept.append(choice)  # the target's own choice is kept, matched by a draft or not
        if child is None:
            return kept
        current, row = child, node_rows[child]


# --8<-- [end:walk_tree]


class RowsOnDemand:
    """The target's logits rows for a checked tree, projected only where the greedy walk goes.

    ``rows[0]`` is the root's row (the prefix's last token), ``rows[1 + i]`` node i's; on inferlab's
    decoder they are hidden states. The projection onto the vocabulary is a matrix of vocab x hidden
    (8192 x 384 for the bundled target): on a CPU, projecting 13 rows costs about an eighth of a
    13-token call, yet the walk reads only the rows of one path. Asking for a row projects it with its
    first-child chain (the draft's own likeliest continuation from there, where the walk usually goes
    on) in one batched product; a chain is therefore projected in one product, as before, and a
    wide tree's other branches only when the walk takes one.
    """

    def __init__(self, model: IncrementalModel, rows: torch.Tensor, nodes: list[TreeNode]):
        self.model, self.rows, self.projected = model, rows, {}
        self.first_child: dict[int, int] = {}
        for i, node in enumerate(nodes):  # children come in the draft's order: its likeliest first
            self.first_child.setdefault(node.parent, i)

    @property
    def root(self) -> torch.Tensor:
        return self[-1]

    def __getitem__(self, node: int) -> torch.Tensor:
        if node not in self.projected:
            chain = [node]
            while chain[-1] in self.first_child and self.first_child[chain[-1]] not in self.projected:
                chain.append(self.first_child[chain[-1]])
            logits = self.model.project(self.rows[[1 + i for i in chain]])
            self.projected.update(zip(chain, logits, strict=True))
        return self.projected[node]


def tree_cache_room(branching: Sequence[int] | DynamicTree) -> int:
    """Return how many tree nodes a model's cache may have to hold at once."""
    if isinstance(branching, DynamicTree):  # the target holds the nodes kept, the draft those it grew
        return max(branching.nodes, sum(branching.grown_per_depth()[1:]))  # [0] is the root: no node
    return sum(tree_level_sizes(branching))


def draft_any_tree(draft: TreeModel, ids: torch.Tensor, branching: Sequence[int] | DynamicTree, depth: int):
    """Return a fixed-shape or dynamic tree, at most ``depth`` deep (the tokens still to generate)."""
    if isinstance(branching, DynamicTree):
        return draft_dynamic_tree(draft, ids, branching.shallower(depth))
    return draft_tree(draft, ids, branching[:depth])


def tree_speculative_decode(
    target: Any,
    draft: Any,
    input_ids: torch.Tensor,
    max_new_tokens: int,
    branching: Sequence[int] | DynamicTree = (2, 2, 1, 1),
) -> SpeculativeResult:
    """Return the target's greedy continuation, drafted as a token tree and verified one tree per target call.

    ``branching`` is a fixed shape (children per node at each depth) or a :class:`DynamicTree` budget.
    """
    check_decode_args(input_ids, max_new_tokens)
    check_branching(branching)
    # The cache holds the prefix and then a whole tree: room for max_new_tokens plus one tree.
    check_models_fit(target, draft, input_ids, max_new_tokens, extra=tree_cache_room(branching))
    target_model, draft_model = TreeModel(target, "target"), TreeModel(draft, "draft")
    ids = input_ids.cpu()
    result = SpeculativeResult(ids, prompt_length=ids.shape[1])
    while ids.shape[1] - result.prompt_length < max_new_tokens:
        budget = max_new_tokens - (ids.shape[1] - result.prompt_length) - 1
        nodes = draft_any_tree(draft_model, ids, branching, budget) if budget else []
        node_rows = RowsOnDemand(
            target_model, target_model.tree_logits(ids, nodes, list(range(len(nodes))), False), nodes
        )
        kept = accept_greedy_path(nodes, node_rows.root, node_rows)
        # Both models keep the accepted branch's keys (moved into place), as far as each one read it;
        # each next call reads only the rest of the kept tokens.
        target_model.keep_tokens(ids.shape[1], kept[:-1])
        draft_model.keep_tokens(ids.shape[1], kept[:-1])
        ids = torch.cat([ids, torch.tensor([kept], dtype=torch.long)], 1)
        result.accepted += len(kept) - 1
        result.drafted += len(nodes)
        result.accepted_per_round.append(len(kept) - 1)
        result.rounds += 1
    result.sequences = ids
    result.target_calls, result.draft_calls = target_model.calls, draft_model.calls
    return result
