"""Speculative decoding: exactness against the target's own distribution, greedy identity, formulas.

References used (never the code's own output):
- exact sequence probabilities of small table models, enumerated by brute force;
- the law of total probability over the two uniforms one accept/resample step consumes;
- plain greedy decoding of the target (``inferlab.models.greedy_generate``, no cache);
- a per-path full forward of the Hugging Face model for the tree attention mask;
- Leviathan et al. (2022), Section 3: Eq. (1), the gamma = 1 corollary, the arithmetic factor, and brute-force
  enumeration of the number of accepted drafts.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from scipy.stats import chisquare

from inferlab.models import greedy_generate
from inferlab.speculative import (
    arithmetic_cost_increase,
    best_gamma,
    expected_accepted_fraction,
    expected_speedup,
    expected_tokens_per_step,
    find_draft,
    prompt_lookup_decode,
    sample_token,
    speculative_sample,
    speculative_sample_reference,
    tree_attention_mask,
    tree_speculative_decode,
    verify_drafts,
)
from inferlab.speculative.alpha import fit_draft_temperature
from inferlab.speculative.tree import DynamicTree, TreeModel, TreeNode, most_likely_subtree

# A chi-square test at a fixed seed is deterministic; we demand p > 1e-3. To show the test has power,
# the same samples must be far (total variation) from the draft's own, uncorrected distribution.
P_VALUE_FLOOR = 1e-3


class TableLM:
    """A second-order table model: the next token's logits depend only on the last two tokens."""

    def __init__(self, vocab: int, seed: int, scale: float = 1.5):
        generator = torch.Generator().manual_seed(seed)
        self.table = torch.randn(vocab, vocab, vocab, generator=generator) * scale
        self.vocab_size = vocab

    def __call__(self, ids: torch.Tensor) -> torch.Tensor:
        previous = torch.cat([ids[:, :1], ids[:, :-1]], dim=1)  # the first position repeats itself
        return self.table[previous, ids]

    def next_probs(self, context: list[int], keep=None) -> torch.Tensor:
        """Exact next-token distribution, optionally restricted by a filter written here in the test."""
        logits = self.table[context[-2], context[-1]].double()
        probs = logits.softmax(-1)
        return keep(probs) if keep else probs


def keep_top_k_then_top_p(k: int, top_p: float, temperature: float):
    """Brute-force filter: temperature, then the k most likely, then the smallest set reaching top_p."""

    def keep(probs: torch.Tensor) -> torch.Tensor:
        tempered = (probs.log() / temperature).softmax(-1)
        order = sorted(range(len(tempered)), key=lambda i: -float(tempered[i]))[:k]
        mass = torch.zeros_like(tempered)
        mass[order] = tempered[order] / tempered[order].sum()
        chosen, total = [], 0.0
        for i in order:  # most likely first, until the kept mass reaches top_p
            chosen.append(i)
            total += float(mass[i])
            if total >= top_p:
                break
        out = torch.zeros_like(tempered)
        out[chosen] = tempered[chosen] / tempered[chosen].sum()
        return out

    return keep


def exact_sequence_probs(model: TableLM, prompt: list[int], length: int, keep=None) -> dict[tuple, float]:
    """Brute force: the probability of every continuation of ``length`` tokens (chain rule)."""
    probs = {}
    for tail in itertools.product(range(model.vocab_size), repeat=length):
        context, p = list(prompt), 1.0
        for token in tail:
            p *= float(model.next_probs(context, keep)[token])
            context.append(token)
        probs[tail] = p
    return probs


def chi_square_p(counts: dict[tuple, int], probs: dict[tuple, float], draws: int) -> float:
    """Chi-square goodness of fit, pooling cells whose expected count is below 5."""
    observed, expected, pooled_o, pooled_e = [], [], 0, 0.0
    for cell, p in probs.items():
        if p * draws < 5:
            pooled_o, pooled_e = pooled_o + counts.get(cell, 0), pooled_e + p * draws
        else:
            observed.append(counts.get(cell, 0))
            expected.append(p * draws)
    if pooled_e > 0:
        observed.append(pooled_o)
        expected.append(pooled_e)
    assert sum(observed) == draws, "a sampled sequence fell outside the enumerated support"
    return float(chisquare(observed, expected).pvalue)


pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest


@pytest.mark.slow
@pytest.mark.parametrize(
    "settings",
    [
        {"temperature": 1.0, "top_k": None, "top_p": None},
        {"temperature": 0.8, "top_k": 3, "top_p": 0.8},
    ],
    ids=["plain", "top_k_top_p"],
)
def test_speculative_sampling_is_exactly_the_target_distribution(settings, one_thread):
    vocab, length, draws, prompt = 4, 3, 20_000, [1, 2]
    target, draft = TableLM(vocab, seed=0), TableLM(vocab, seed=1, scale=1.0)
    keep = None
    if settings["top_k"] is not None:
        keep = keep_top_k_then_top_p(settings["top_k"], settings["top_p"], settings["temperature"])
    exact = exact_sequence_probs(target, prompt, length, keep)
    generator = torch.Generator().manual_seed(1234)
    counts: dict[tuple, int] = {}
    accepted = drafted = 0
    for _ in range(draws):
        result = speculative_sample(
            target, draft, torch.tensor([prompt]), length, gamma=2, generator=generator, **settings
        )
        cell = tuple(result.new_tokens[0].tolist())
        counts[cell] = counts.get(cell, 0) + 1
        accepted, drafted = accepted + result.accepted, drafted + result.drafted
    assert 0.2 < accepted / drafted < 0.95, "the draft must disagree with the target for this test to mean anything"
    assert chi_square_p(counts, exact, draws) > P_VALUE_FLOOR
    # Power: the samples sit far closer to p than to the draft's own distribution, which differs a lot.
    draft_dist = exact_sequence_probs(draft, prompt, length, keep)
    empirical = {cell: counts.get(cell, 0) / draws for cell in exact}
    to_target = sum(abs(empirical[c] - exact[c]) for c in exact) / 2
    to_draft = sum(abs(empirical[c] - draft_dist[c]) for c in exact) / 2
    assert to_draft > 0.1 and to_draft > 5 * to_target


def test_one_accept_or_resample_step_yields_p_exactly(monkeypatch):
    """Law of total probability over the uniforms: sum_x q(x) P(output y | draft x) must equal p(y)."""
    p = torch.tensor([0.45, 0.05, 0.3, 0.2], dtype=torch.float64)
    q = torch.tensor([0.1, 0.4, 0.3, 0.2], dtype=torch.float64)
    grid = 2000  # midpoints of [0, 1): the code's decisions are step functions of each uniform
    uniforms = [(i + 0.5) / grid for i in range(grid)]
    queue: list[float] = []

    def fake_rand(*size, **kwargs):
        shape = size[0] if size and isinstance(size[0], tuple) else size
        count = math.prod(shape) if shape else 1
        values = [queue.pop(0) for _ in range(count)]
        return torch.tensor(values if shape else values[0], dtype=torch.float64).reshape(shape)

    monkeypatch.setattr(torch, "rand", fake_rand)
    output = torch.zeros(4, dtype=torch.float64)
    p_rows, q_rows = torch.stack([p, p]), q[None]
    for x in range(4):
        # P(accept | x): run the code once per acceptance uniform (the resample uniform is then unused).
        accepts = 0
        for u in uniforms:
            queue[:] = [u, 0.5]
            kept, n_accepted, _ = verify_drafts(p_rows, q_rows, [x], None)
            accepts += n_accepted == 1
        accept_fraction = accepts / grid
        # P(resampled token = y | rejected): force a rejection (u just below 1) and sweep the second uniform.
        resample = torch.zeros(4, dtype=torch.float64)
        if accepts < grid:  # p(x) < q(x): a rejection is possible
            for u in uniforms:
                queue[:] = [1 - 1e-12, u]
                kept, n_accepted, _ = verify_drafts(p_rows, q_rows, [x], None)
                assert n_accepted == 0
                resample[kept[0]] += 1 / grid
        output[x] += q[x] * accept_fraction
        output += q[x] * (1 - accept_fraction) * resample
    torch.testing.assert_close(output, p, atol=4 / grid, rtol=0)


def test_sample_token_follows_the_weights(one_thread):
    generator = torch.Generator().manual_seed(0)
    weights = torch.tensor([0.0, 3.0, 1.0, 0.0, 6.0])
    counts = torch.zeros(5)
    for _ in range(20_000):
        counts[sample_token(weights, generator)] += 1
    assert counts[0] == counts[3] == 0  # zero weight: never drawn
    assert chisquare(counts[[1, 2, 4]].tolist(), [6000, 2000, 12000]).pvalue > P_VALUE_FLOOR


def test_q_equal_p_accepts_every_draft():
    model = TableLM(5, seed=3)
    generator = torch.Generator().manual_seed(0)
    result = speculative_sample(model, model, torch.tensor([[0, 1]]), 40, gamma=4, generator=generator)
    assert result.accepted == result.drafted > 0
    assert result.alpha == 1.0
    assert result.alpha_per_token == pytest.approx(1.0)
    # Every round yields gamma + 1 tokens, so 40 tokens take ceil(40 / 5) target calls.
    assert result.target_calls == math.ceil(40 / 5)


def test_q_equal_p_on_a_transformer(tiny_pair):
    target, _ = tiny_pair
    result = speculative_sample(
        target, target, torch.tensor([[1, 2, 3]]), 24, gamma=3, generator=torch.Generator().manual_seed(0)
    )
    assert result.accepted == result.drafted
    assert result.target_calls == math.ceil(24 / 4)


@pytest.mark.parametrize("gamma", [1, 3, 6])
def test_greedy_speculative_equals_plain_greedy(tiny_pair, gamma):
    target, draft = tiny_pair
    prompt = torch.tensor([[5, 17, 3, 88, 41]])
    expected = greedy_generate(target, prompt, 30)
    result = speculative_sample(target, draft, prompt, 30, gamma=gamma, temperature=0)
    assert torch.equal(result.sequences, expected)
    assert result.target_calls == result.rounds
    # Target as its own draft: every draft agrees, so each call yields gamma + 1 tokens.
    same = speculative_sample(target, target, prompt, 30, gamma=gamma, temperature=0)
    assert torch.equal(same.sequences, expected)
    assert same.target_calls == math.ceil(30 / (gamma + 1))


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("gamma", [1, 4])
def test_cached_sampler_matches_the_cache_free_reference_draw_for_draw(tiny_pair, seed, gamma):
    target, draft = tiny_pair
    prompt = torch.tensor([[7, 8, 9]])
    settings = {"temperature": 1.3, "top_k": 40, "top_p": 0.95}
    fast = speculative_sample(
        target, draft, prompt, 25, gamma, generator=torch.Generator().manual_seed(seed), **settings
    )
    reference = speculative_sample_reference(
        target, draft, prompt, 25, gamma, generator=torch.Generator().manual_seed(seed), **settings
    )
    assert torch.equal(fast.sequences, reference.sequences)
    assert fast.accepted_per_round == reference.accepted_per_round
    assert fast.target_calls == reference.target_calls and fast.draft_calls == reference.draft_calls
    # Every round's acceptance probabilities, in order: the whole run's, not just its last round's.
    assert fast.rounds > 1 and fast.acceptance_probs == pytest.approx(reference.acceptance_probs)


def test_measured_tokens_per_call_follow_the_formula(one_thread):
    """A context-free pair has the same acceptance probability alpha everywhere: Eq. (1) must hold."""
    p = torch.tensor([0.5, 0.3, 0.2])
    q = torch.tensor([0.2, 0.3, 0.5])
    alpha = float(torch.minimum(p, q).sum())  # 0.7

    def constant(probs):
        return lambda ids: probs.log().expand(ids.shape[0], ids.shape[1], 3)

    gamma, rounds = 4, []
    generator = torch.Generator().manual_seed(0)
    result = speculative_sample(constant(p), constant(q), torch.tensor([[0]]), 6000, gamma, generator=generator)
    full_rounds = result.accepted_per_round[:-1]  # the last round may be cut short by max_new_tokens
    rounds = torch.tensor(full_rounds, dtype=torch.float64) + 1
    standard_error = float(rounds.std()) / math.sqrt(len(rounds))
    assert abs(float(rounds.mean()) - expected_tokens_per_step(alpha, gamma)) < 4 * standard_error
    measured_fraction = sum(full_rounds) / (gamma * len(full_rounds))
    assert abs(measured_fraction - expected_accepted_fraction(alpha, gamma)) < 4 * standard_error / gamma


def enumerated_tokens_per_step(alpha: float, gamma: int) -> float:
    """Brute force: k drafts accepted then a stop (prob alpha^k (1-alpha)), or all gamma; each adds 1."""
    outcomes = [(alpha**k * (1 - alpha), k + 1) for k in range(gamma)] + [(alpha**gamma, gamma + 1)]
    return sum(probability * tokens for probability, tokens in outcomes)


@pytest.mark.parametrize("alpha", [0.0, 0.3, 0.6, 0.8, 0.95, 1.0])
@pytest.mark.parametrize("gamma", [1, 2, 5, 10])
def test_formulas_match_enumeration(alpha, gamma):
    tokens = enumerated_tokens_per_step(alpha, gamma)
    assert expected_tokens_per_step(alpha, gamma) == pytest.approx(tokens)
    assert expected_speedup(alpha, gamma, 0.1) == pytest.approx(tokens / (gamma * 0.1 + 1))
    # A target call over gamma + 1 tokens that costs 1.7 plain steps instead of 1.
    assert expected_speedup(alpha, gamma, 0.1, verify=1.7) == pytest.approx(tokens / (gamma * 0.1 + 1.7))
    # Leviathan et al., Section 3: arithmetic grows by (1 - a)(g c^ + g + 1) / (1 - a^(g+1)); alpha = 1 as a limit.
    c_hat = 0.05
    assert arithmetic_cost_increase(alpha, gamma, c_hat) == pytest.approx((gamma * c_hat + gamma + 1) / tokens)
    assert expected_accepted_fraction(alpha, gamma) == pytest.approx((tokens - 1) / gamma)


def test_formulas_against_leviathan_section_3():
    # Section 3: with gamma = 1 the improvement factor is (1 + alpha) / (1 + c).
    for alpha, c in [(0.5, 0.1), (0.8, 0.05), (0.3, 0.4)]:
        assert expected_speedup(alpha, 1, c) == pytest.approx((1 + alpha) / (1 + c))
    # Section 3: speculation can only help when alpha > c; at gamma = 1 the speed-up is < 1 otherwise.
    assert expected_speedup(0.2, 1, 0.3) < 1 < expected_speedup(0.4, 1, 0.3)
    # Eq. (1) limits: alpha -> 1 gives gamma + 1 tokens, alpha = 0 gives exactly one.
    assert expected_tokens_per_step(1 - 1e-9, 7) == pytest.approx(8, rel=1e-6)
    assert expected_tokens_per_step(0.0, 7) == 1.0


def test_a_free_verification_is_refused():
    with pytest.raises(ValueError, match="verify"):
        expected_speedup(0.5, 3, 0.1, verify=0.0)
    with pytest.raises(ValueError, match="verify"):
        expected_speedup(0.5, 3, 0.1, verify=-1.0)


@pytest.mark.parametrize("alpha", [0.5, 0.7, 0.9])
@pytest.mark.parametrize("c", [0.01, 0.05, 0.2])
def test_best_gamma_is_the_brute_force_optimum(alpha, c):
    speedups = {g: enumerated_tokens_per_step(alpha, g) / (g * c + 1) for g in range(1, 65)}
    best = best_gamma(alpha, c)
    assert speedups[best] == pytest.approx(max(speedups.values()))


def test_find_draft_copies_what_followed_the_latest_match():
    # Last 3-gram [1, 2, 3] occurred twice before; the latest occurrence was followed by 5, 6.
    assert find_draft([1, 2, 3, 4, 9, 1, 2, 3, 5, 6, 1, 2, 3], max_ngram=3, num_draft=2) == [5, 6]
    # No 3- or 2-gram match: fall back to the last token alone.
    assert find_draft([1, 2, 3, 4, 9, 2, 3, 5, 6, 7, 3], max_ngram=3, num_draft=5) == [5, 6, 7, 3]
    assert find_draft([1, 2, 3, 4, 9, 2, 3, 5, 6, 7, 3], max_ngram=3, num_draft=2) == [5, 6]
    assert find_draft([4, 5, 6], max_ngram=3, num_draft=4) == []  # nothing repeats
    assert find_draft([7], max_ngram=2, num_draft=4) == []


def test_prompt_lookup_equals_plain_greedy(tiny_pair):
    target, _ = tiny_pair
    prompt = torch.tensor([[3, 4, 5, 6, 7, 8, 3, 4, 5, 6, 7, 8, 3, 4]])
    result = prompt_lookup_decode(target, prompt, 30, max_ngram=3, num_draft=4)
    assert torch.equal(result.sequences, greedy_generate(target, prompt, 30))
    assert result.drafted > 0 and result.target_calls == result.rounds


def test_prompt_lookup_on_a_copying_model_needs_few_calls():
    """A model that continues a cycle 0,1,...,5: after one period in the prompt every copy is right."""
    period = 6

    def cycle(ids):
        logits = torch.full((*ids.shape, period), -10.0)
        logits.scatter_(-1, ((ids + 1) % period).unsqueeze(-1), 10.0)
        return logits

    prompt = torch.tensor([list(range(period)) + [0]])
    result = prompt_lookup_decode(cycle, prompt, 24, max_ngram=2, num_draft=5)
    assert result.new_tokens[0].tolist() == [(1 + i) % period for i in range(24)]
    assert result.accepted == result.drafted
    assert result.target_calls == math.ceil(24 / 6)


def test_tree_mask_gives_each_node_its_own_branch(tiny_pair):
    """Tree logits from one masked call equal a plain forward over prefix + that node's path."""
    target, _ = tiny_pair
    prefix = torch.tensor([[11, 12, 13, 14]])
    nodes = [TreeNode(20, -1, 1), TreeNode(21, -1, 1), TreeNode(30, 0, 2), TreeNode(31, 0, 2), TreeNode(40, 3, 3)]
    model = TreeModel(target)
    model.new_logits(prefix[:, :2])  # part of the prefix is cached already, part is new
    rows = model.tree_logits(prefix, nodes, list(range(len(nodes))))
    assert rows.shape[0] == 1 + len(nodes)  # the prefix's last token, then every node
    paths = {0: [20], 1: [21], 2: [20, 30], 3: [20, 31], 4: [20, 31, 40]}
    with torch.no_grad():
        torch.testing.assert_close(rows[0], target(prefix).logits[0, -1], atol=1e-4, rtol=1e-4)
        for i, path in paths.items():
            expected = target(torch.cat([prefix, torch.tensor([path])], 1)).logits[0, -1]
            torch.testing.assert_close(rows[1 + i], expected, atol=1e-4, rtol=1e-4)
    mask = tree_attention_mask(1, nodes)
    assert mask[4].tolist() == [True, True, False, False, True, True]  # prefix, node 0, node 3, itself


@pytest.mark.parametrize("seed", range(4))
def test_fast_tree_mask_rows_equal_the_readable_mask(seed):
    from inferlab.speculative.tree import tree_mask_rows

    generator = torch.Generator().manual_seed(seed)
    nodes = []
    for i in range(12):
        parent = -1 if i < 2 else int(torch.randint(-1, i, (1,), generator=generator))
        nodes.append(TreeNode(i, parent, 1 if parent == -1 else nodes[parent].depth + 1))
    full = tree_attention_mask(5, nodes)
    for first in (0, 3, 7):
        rows = list(range(first, 12))
        assert torch.equal(tree_mask_rows(5, nodes, rows), full[first:])
        assert torch.equal(tree_mask_rows(5, nodes, rows[:2]), full[first : first + 2, : 5 + first + 2])
    assert tree_mask_rows(5, nodes, []).shape == (0, 5)


@pytest.mark.parametrize("branching", [(1,), (2, 2, 1, 1), (3, 2), (1, 1, 1, 1, 1)])
def test_tree_decoding_equals_plain_greedy(tiny_pair, branching):
    target, draft = tiny_pair
    prompt = torch.tensor([[2, 40, 60, 9]])
    expected = greedy_generate(target, prompt, 25)
    assert torch.equal(tree_speculative_decode(target, draft, prompt, 25, branching).sequences, expected)
    # With the target drafting for itself the first branch is always right: depth + 1 tokens per call.
    same = tree_speculative_decode(target, target, prompt, 25, branching)
    assert torch.equal(same.sequences, expected)
    assert same.target_calls == math.ceil(25 / (len(branching) + 1))


def test_tree_decoding_on_table_models_equals_greedy():
    target, draft = TableLM(6, seed=5, scale=2.0), TableLM(6, seed=6, scale=2.0)
    prompt = torch.tensor([[1, 2]])
    expected = greedy_generate(target, prompt, 15)
    assert torch.equal(tree_speculative_decode(target, draft, prompt, 15, (3, 2)).sequences, expected)


def test_wider_trees_need_fewer_target_calls_than_chains():
    """A draft whose second choice is often the target's first: branches catch what a chain misses."""
    target, draft = TableLM(6, seed=7, scale=2.0), TableLM(6, seed=7, scale=2.0)
    draft.table = draft.table + torch.randn(draft.table.shape, generator=torch.Generator().manual_seed(8)) * 1.5
    prompt = torch.tensor([[1, 2]])
    chain = tree_speculative_decode(target, draft, prompt, 60, (1, 1, 1))
    tree = tree_speculative_decode(target, draft, prompt, 60, (3, 3, 3))
    assert torch.equal(chain.sequences, tree.sequences)
    assert tree.target_calls < chain.target_calls


@pytest.mark.parametrize(
    "shape", [DynamicTree(4, 4, 2), DynamicTree(6, 3, 3, temperature=0.3), DynamicTree(1, 1, 1), DynamicTree(9, 5, 2)]
)
def test_dynamic_tree_decoding_equals_plain_greedy(tiny_pair, shape):
    target, draft = tiny_pair
    prompt = torch.tensor([[2, 40, 60, 9]])
    expected = greedy_generate(target, prompt, 25)
    result = tree_speculative_decode(target, draft, prompt, 25, shape)
    assert torch.equal(result.sequences, expected)
    assert result.drafted <= shape.nodes * result.target_calls  # the target never checks more than `nodes`


def test_dynamic_tree_on_table_models_equals_greedy_and_beats_the_chain_on_a_hesitant_draft():
    """The draft of test_wider_trees...: where it hesitates, the dynamic tree branches and saves calls."""
    target, draft = TableLM(6, seed=7, scale=2.0), TableLM(6, seed=7, scale=2.0)
    draft.table = draft.table + torch.randn(draft.table.shape, generator=torch.Generator().manual_seed(8)) * 1.5
    prompt = torch.tensor([[1, 2]])
    chain = tree_speculative_decode(target, draft, prompt, 60, (1,) * 6)
    tree = tree_speculative_decode(target, draft, prompt, 60, DynamicTree(6, 6, 3))
    assert torch.equal(tree.sequences, greedy_generate(target, prompt, 60))
    assert tree.target_calls < chain.target_calls


def ancestor_closed(nodes: list[TreeNode], chosen: set[int]) -> bool:
    return all(nodes[i].parent == -1 or nodes[i].parent in chosen for i in chosen)


@pytest.mark.parametrize("seed", range(6))
def test_most_likely_subtree_is_the_best_ancestor_closed_subset(seed):
    """Brute force: of every subset of the drafted nodes that keeps each node's parent, none has more
    probability mass than the one kept (the expected tokens a calibrated draft gets accepted)."""
    generator = torch.Generator().manual_seed(seed)
    nodes, log_probs = [], []
    for i in range(9):  # a random tree; a child's path is at most as likely as its parent's
        parent = -1 if i < 2 else int(torch.randint(0, i, (1,), generator=generator))
        step = (
            float(torch.rand(1, generator=generator).log())
            if seed % 2
            else -float(torch.randint(0, 2, (1,), generator=generator))
        )
        nodes.append(TreeNode(100 + i, parent, 1 if parent == -1 else nodes[parent].depth + 1))
        log_probs.append((0.0 if parent == -1 else log_probs[parent]) + step)  # seed even: ties of 0 steps
    for keep in range(1, len(nodes) + 1):
        kept = most_likely_subtree(nodes, log_probs, keep)
        assert len(kept) == keep
        assert all(node.parent < index for index, node in enumerate(kept))  # parents first, renumbered
        mass = sum(math.exp(log_probs[n.token - 100]) for n in kept)
        best = max(
            sum(math.exp(log_probs[i]) for i in subset)
            for subset in itertools.combinations(range(len(nodes)), keep)
            if ancestor_closed(nodes, set(subset))
        )
        assert mass == pytest.approx(best)
        # The renumbered tree is the original one: every kept node's parent token is its original parent's.
        for node in kept:
            original = nodes[node.token - 100]
            assert (node.parent == -1) == (original.parent == -1)
            if node.parent != -1:
                assert kept[node.parent].token == nodes[original.parent].token


def test_fit_draft_temperature_matches_the_closed_form():
    """The target's greedy choice is token 0 three times in four, else token 1; the draft's logits are
    always (s, 0, 0, 0). Maximum likelihood sets softmax(s/T)[0] = 3/4, so e^(s/T) = 9: T = s / ln 9."""

    def target(ids):
        choice = (torch.arange(ids.shape[1]) % 4 == 3).long()  # the position decides the argmax
        return torch.nn.functional.one_hot(choice, 4).float()[None] * 5

    def draft(ids):
        return torch.tensor([2.0, 0.0, 0.0, 0.0]).expand(1, ids.shape[1], 4)

    fitted = fit_draft_temperature(target, draft, [torch.tensor([[0]])], new_tokens=400)
    grid_step = 10 ** (1 / 20)
    assert 2 / math.log(9) / grid_step <= fitted <= 2 / math.log(9) * grid_step
    with pytest.raises(ValueError, match="prompts must hold at least one"):
        fit_draft_temperature(target, draft, [], new_tokens=4)
    with pytest.raises(ValueError, match="new_tokens must be an integer >= 1, got 0"):
        fit_draft_temperature(target, draft, [torch.tensor([[0]])], new_tokens=0)
    with pytest.raises(ValueError, match=r"prompts must be \(1, T\) tensors of token ids with T >= 1, got \(3,\)"):
        fit_draft_temperature(target, draft, [torch.tensor([0, 1, 2])], new_tokens=4)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ((0, 2, 2), "DynamicTree nodes must be an integer >= 1"),
        ((True, 2, 2), "DynamicTree nodes must be an integer >= 1"),
        ((7, 2, 2), "DynamicTree nodes must be at most the 6 tokens drafted"),
        ((2, 2, 2, 0.0), "temperature must be a finite number > 0"),
        ((2, 2, 2, float("nan")), "temperature must be a finite number > 0"),
        ((2, 2, 2, "1"), "temperature must be a number > 0"),
    ],
)
def test_dynamic_tree_refuses_bad_budgets(arguments, message):
    with pytest.raises(ValueError, match=message):
        DynamicTree(*arguments)


class CallCounter:
    """A logits function that fails the test if an invalid call gets as far as running the model."""

    vocab_size = 5

    def __call__(self, ids):
        raise AssertionError("the model ran before the arguments were checked")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"gamma": 0}, "gamma must be an integer >= 1"),
        ({"gamma": 2.0}, "gamma must be an integer >= 1"),
        ({"max_new_tokens": -1}, "max_new_tokens must be an integer >= 0"),
        ({"temperature": -0.5}, "temperature must be >= 0"),
        ({"top_k": 0}, "top_k must be an integer >= 1"),
        ({"top_p": 1.5}, "top_p must be a number in (0, 1]"),
        ({"input_ids": torch.tensor([[1, 2], [3, 4]])}, "batch size must be 1, got 2"),
        ({"input_ids": torch.tensor([1, 2])}, "must have shape (1, length >= 1)"),
    ],
)
@pytest.mark.parametrize("sampler", [speculative_sample, speculative_sample_reference])
def test_bad_input_is_rejected_before_any_work(sampler, kwargs, message):
    arguments = {"input_ids": torch.tensor([[1, 2]]), "max_new_tokens": 4, "gamma": 2} | kwargs
    with pytest.raises(ValueError) as error:
        sampler(CallCounter(), CallCounter(), **arguments)
    assert message in str(error.value)


def test_vocabulary_mismatch_names_both_sizes(tiny_pair):
    from conftest import tiny_llama  # pytest puts tests/ on sys.path for its conftest

    target, _ = tiny_pair
    small_vocab_draft = tiny_llama(vocab_size=50, hidden=16, layers=1, heads=2, kv_heads=1)
    for call in (
        lambda: speculative_sample(target, small_vocab_draft, torch.tensor([[1]]), 3, 2),
        lambda: tree_speculative_decode(target, small_vocab_draft, torch.tensor([[1]]), 3),
    ):
        with pytest.raises(ValueError, match="target has 97 logits, draft has 50"):
            call()


def test_other_decoders_reject_bad_input():
    with pytest.raises(ValueError, match="num_draft must be an integer >= 1"):
        prompt_lookup_decode(CallCounter(), torch.tensor([[1, 2]]), 4, num_draft=0)
    with pytest.raises(ValueError, match="max_ngram must be an integer >= 1"):
        prompt_lookup_decode(CallCounter(), torch.tensor([[1, 2]]), 4, max_ngram=0)
    with pytest.raises(ValueError, match="branching must be a DynamicTree or a non-empty sequence"):
        tree_speculative_decode(CallCounter(), CallCounter(), torch.tensor([[1, 2]]), 4, branching=(2, 0))
    with pytest.raises(ValueError, match="batch size must be 1"):
        tree_speculative_decode(CallCounter(), CallCounter(), torch.tensor([[1], [2]]), 4)
    for bad in (
        {"alpha": 1.5, "gamma": 2, "c": 0.1},
        {"alpha": 0.5, "gamma": 0, "c": 0.1},
        {"alpha": 0.5, "gamma": 2, "c": -1},
    ):
        with pytest.raises(ValueError, match=next(k for k in ("alpha", "gamma", "c") if bad[k] in (1.5, 0, -1))):
            expected_speedup(**bad)


@pytest.mark.skipif(
    not __import__("inferlab.models").models.bundled_available(), reason="the bundled pair is not trained yet"
)
def test_all_greedy_decoders_equal_plain_greedy_on_the_bundled_pair(bundled_pair):
    target, draft, tokenizer = bundled_pair
    prompt = tokenizer("def area(width, height):\n    return width * height\n\ndef ", return_tensors="pt").input_ids
    expected = greedy_generate(target, prompt, 24)
    speculative = speculative_sample(target, draft, prompt, 24, gamma=4, temperature=0)
    lookup = prompt_lookup_decode(target, prompt, 24, max_ngram=3, num_draft=4)
    tree = tree_speculative_decode(target, draft, prompt, 24, (2, 2, 1))
    for result in (speculative, lookup, tree):
        assert torch.equal(result.sequences, expected)
    assert speculative.accepted > 0, "a trained draft should agree with its target at least sometimes"


def test_bench_chi_square_p_value_matches_scipy():
    from scipy.stats import chisquare

    from inferlab.speculative.bench import chi_square_p_value

    observed, expected = [12.0, 25.0, 31.0, 40.0, 2.0], [15.0, 20.0, 30.0, 40.0, 5.0]
    assert chi_square_p_value(torch.tensor(observed), torch.tensor(expected)) == pytest.approx(
        chisquare(observed, expected).pvalue, rel=1e-6
    )


# ----------------------------------------------------------------------------------------------
# The fast path on inferlab's own decoder (a preallocated KV cache; rollback moves a length).


def decoder_pair(tiny_pair):
    """Return the tiny transformers pair as inferlab LlamaDecoders with the same weights."""
    from inferlab.kvcache import LlamaDecoder

    return tuple(LlamaDecoder.from_pretrained(model) for model in tiny_pair)


@pytest.mark.parametrize("gamma", [1, 3, 6])
def test_decoder_fast_path_equals_transformers_generate(tiny_pair, gamma):
    target, draft = decoder_pair(tiny_pair)
    prompt = torch.tensor([[5, 17, 3, 42, 8]])
    with torch.no_grad():  # the independent reference: transformers' own greedy generate
        expected = tiny_pair[0].generate(prompt, max_new_tokens=30, do_sample=False, min_new_tokens=30)
    for result in (
        speculative_sample(target, draft, prompt, 30, gamma, temperature=0),
        prompt_lookup_decode(target, prompt, 30, num_draft=gamma),
        tree_speculative_decode(target, draft, prompt, 30, (2,) + (1,) * (gamma - 1)),
    ):
        assert torch.equal(result.sequences, expected)


def test_decoder_fast_path_never_recomputes_a_prefix(tiny_pair):
    target, draft = decoder_pair(tiny_pair)
    target.reset_counts()
    prompt = torch.tensor([[1, 2, 3, 4, 5, 6]])
    result = speculative_sample(target, draft, prompt, 40, 4, temperature=0)
    # Each round feeds the target the token kept last round plus its new drafts, nothing older:
    # the prompt once, then (drafts + 1) keys per later round, in every layer.
    fed = prompt.shape[1] + result.drafted + (result.rounds - 1)
    assert target.keys_computed == target.num_layers * fed
    assert result.rounds > 1 and result.drafted > 0


@pytest.mark.parametrize("shape", [(2, 1, 1), (3, 2), DynamicTree(6, 5, 2, temperature=0.5)])
def test_tree_decoding_on_the_decoder_keeps_the_accepted_branch_and_never_rereads_it(tiny_pair, shape):
    """The target moves the accepted branch's keys into place, so each call reads only the token the
    target added last round and the new tree; the output equals transformers' own greedy generate."""
    target, draft = decoder_pair(tiny_pair)
    prompt = torch.tensor([[5, 17, 3, 42, 8]])
    with torch.no_grad():
        expected = tiny_pair[0].generate(prompt, max_new_tokens=30, do_sample=False, min_new_tokens=30)
    target.reset_counts()
    result = tree_speculative_decode(target, draft, prompt, 30, shape)
    assert torch.equal(result.sequences, expected)
    fed = prompt.shape[1] + result.drafted + (result.rounds - 1)  # the prompt, every node, one token per later round
    assert target.keys_computed == target.num_layers * fed
    assert result.accepted > 0  # some branch was kept, so the moved keys were used


@pytest.mark.parametrize("seed", [0, 3])
def test_decoder_sampling_matches_the_transformers_pair_draw_for_draw(tiny_pair, seed):
    target, draft = decoder_pair(tiny_pair)
    prompt = torch.tensor([[7, 1, 30]])
    on_hf = speculative_sample(
        *tiny_pair, prompt, 25, 3, temperature=1.0, generator=torch.Generator().manual_seed(seed)
    )
    ours = speculative_sample(
        target, draft, prompt, 25, 3, temperature=1.0, generator=torch.Generator().manual_seed(seed)
    )
    assert torch.equal(ours.sequences, on_hf.sequences)
    assert ours.accepted_per_round == on_hf.accepted_per_round


def test_load_pair_inferlab_backend_gives_decoders_with_the_same_logits(bundled_pair):
    from inferlab.kvcache import LlamaDecoder
    from inferlab.models import load_pair

    target, draft, tokenizer = load_pair(backend="inferlab")
    assert isinstance(target, LlamaDecoder) and isinstance(draft, LlamaDecoder)
    ids = tokenizer("for item in items:\n", return_tensors="pt").input_ids
    for ours, theirs in ((target, bundled_pair[0]), (draft, bundled_pair[1])):
        with torch.no_grad():
            torch.testing.assert_close(ours(ids), theirs(ids).logits, atol=2e-4, rtol=1e-4)
    with pytest.raises(ValueError, match="backend must be one of"):
        load_pair(backend="vllm")


def test_greedy_alpha_counts_agreement_along_the_target_greedy_path(tiny_pair):
    from inferlab.speculative.alpha import greedy_alpha

    target, draft = tiny_pair
    prompt = torch.tensor([[4, 9, 2]])
    with torch.no_grad():  # by hand: the target's greedy path, then both argmaxes at every position
        path = target.generate(prompt, max_new_tokens=20, do_sample=False, min_new_tokens=20)
        want = target(path).logits[0, 2:-1].argmax(-1) == draft(path).logits[0, 2:-1].argmax(-1)
    assert greedy_alpha(target, draft, prompt, 20) == pytest.approx(want.float().mean().item())
    assert greedy_alpha(*decoder_pair(tiny_pair), prompt, 20) == pytest.approx(want.float().mean().item())
    assert greedy_alpha(target, target, prompt, 20) == 1.0  # a draft equal to its target always agrees


# ----------------------------------------------------------------------------------------------
# Bad input and broken models: a clear error before any work, never a plausible-looking token.


def nan_model(ids):
    return torch.full((ids.shape[0], ids.shape[1], 5), float("nan"))


@pytest.mark.parametrize(
    "bad",
    [
        torch.full((4,), float("nan")),
        torch.zeros(4),
        torch.tensor([0.5, -0.1, 0.3, 0.3]),
        torch.tensor([1.0, float("inf"), 0.0, 0.0]),
    ],
)
def test_sample_token_refuses_what_is_not_a_distribution(bad):
    with pytest.raises(ValueError, match="probs must"):
        sample_token(bad)


def test_check_logits_refuses_exactly_the_rows_with_nan_or_plus_inf():
    """Against the elementwise definition: any NaN or +inf anywhere is refused; -inf (a ruled-out token) is not."""
    from inferlab.speculative.runner import check_logits

    generator = torch.Generator().manual_seed(3)
    specials = (float("nan"), float("inf"), float("-inf"))
    for trial in range(300):
        rows = int(torch.randint(1, 4, (1,), generator=generator))
        logits = torch.randn(rows, 7, generator=generator)
        for _ in range(int(torch.randint(0, 3, (1,), generator=generator))):  # 0, 1 or 2 special entries
            at = int(torch.randint(0, logits.numel(), (1,), generator=generator))
            logits.view(-1)[at] = specials[int(torch.randint(0, 3, (1,), generator=generator))]
        if trial % 50 == 0:
            logits[0] = float("-inf")  # a row that rules out every token is still not NaN
        bad = bool(torch.isnan(logits).any() or torch.isposinf(logits).any())
        if bad:
            with pytest.raises(ValueError, match="the draft returned NaN or \\+inf"):
                check_logits(logits, "draft")
        else:
            assert check_logits(logits, "draft") is logits
    assert check_logits(torch.empty(0, 7), "target").shape == (0, 7)


@pytest.mark.parametrize("temperature", [0, 1.0])
def test_nan_logits_are_refused_not_decoded(temperature):
    for sampler in (speculative_sample, speculative_sample_reference):
        with pytest.raises(ValueError, match="NaN"):
            sampler(nan_model, nan_model, torch.tensor([[1, 2]]), 4, 2, temperature=temperature)
    with pytest.raises(ValueError, match="NaN"):
        prompt_lookup_decode(nan_model, torch.tensor([[1, 2]]), 4)
    with pytest.raises(ValueError, match="NaN"):
        tree_speculative_decode(nan_model, nan_model, torch.tensor([[1, 2]]), 4)


def test_a_tiny_temperature_is_the_greedy_limit_not_an_overflow(tiny_pair):
    prompt = torch.tensor([[3, 1, 4, 1, 5]])
    greedy = speculative_sample(*tiny_pair, prompt, 12, 3, temperature=0)
    tiny = speculative_sample(*tiny_pair, prompt, 12, 3, temperature=1e-39, generator=torch.Generator().manual_seed(0))
    assert torch.equal(tiny.sequences, greedy.sequences)


@pytest.mark.parametrize("max_new_tokens", [300, 10**9])
def test_running_past_the_model_positions_is_refused(tiny_pair, max_new_tokens):
    target, draft = tiny_pair  # max_position_embeddings = 256
    for models in (tiny_pair, decoder_pair(tiny_pair)):
        for call in (
            lambda pair=models: speculative_sample(*pair, torch.tensor([[1, 2]]), max_new_tokens, 2, temperature=0),
            lambda pair=models: prompt_lookup_decode(pair[0], torch.tensor([[1, 2]]), max_new_tokens),
            lambda pair=models: tree_speculative_decode(*pair, torch.tensor([[1, 2]]), max_new_tokens),
        ):
            with pytest.raises(ValueError, match="exceeds the target's 256 positions"):
                call()


@pytest.mark.parametrize("bad_id", [-1, 97, 10**6])
def test_out_of_vocabulary_ids_are_refused(tiny_pair, bad_id):
    prompt = torch.tensor([[1, bad_id, 2]])
    for models in (tiny_pair, decoder_pair(tiny_pair)):
        with pytest.raises(ValueError, match=r"input_ids must be token ids in 0\.\.96"):
            speculative_sample(*models, prompt, 4, 2, temperature=0)
        with pytest.raises(ValueError, match=r"input_ids must be token ids in 0\.\.96"):
            tree_speculative_decode(*models, prompt, 4)
        with pytest.raises(ValueError, match=r"input_ids must be token ids in 0\.\.96"):
            prompt_lookup_decode(models[0], prompt, 4)


def test_verify_drafts_refuses_ids_outside_the_vocabulary():
    p = torch.full((2, 4), 0.25)
    with pytest.raises(ValueError, match=r"drafts must be token ids in 0\.\.3, got -1"):
        verify_drafts(p, p[:1], [-1])
    with pytest.raises(ValueError, match="p_rows must hold at least 2 rows"):
        verify_drafts(p[:1], p[:1], [0])


def test_whole_run_speedup_is_the_paper_formula_without_a_prompt_and_adds_the_prompt_to_both_loops():
    from inferlab.speculative.formulas import expected_run_speedup

    for alpha, gamma, c in [(0.8, 4, 0.1), (0.5, 1, 0.0), (1.0, 3, 0.2)]:
        paper = expected_speedup(alpha, gamma, c, verify=1.3)
        assert expected_run_speedup(alpha, gamma, 100, gamma * c + 1.3, prompt=0.0) == pytest.approx(paper)
    # By hand: alpha 0.5, gamma 1 gives 1.5 tokens per round, so 60 tokens take 40 rounds of 0.2 + 1.5.
    assert expected_run_speedup(0.5, 1, 60, 1.7, prompt=20, draft_prompt=2) == pytest.approx(80 / (22 + 40 * 1.7))
    from inferlab.speculative.formulas import run_steps

    assert run_steps(60, 40, 1.7, prompt=20, draft_prompt=2) == pytest.approx((80, 22 + 40 * 1.7))
    with pytest.raises(ValueError, match="new_tokens must be an integer >= 1"):
        expected_run_speedup(0.5, 1, 0, 1.7, prompt=1)
    with pytest.raises(ValueError, match="prompt must be a finite number >= 0"):
        expected_run_speedup(0.5, 1, 5, 1.7, prompt=float("nan"))


@pytest.fixture(scope="module")
def bundled_pairs():
    from inferlab.models import bundled_available, load_pair

    if not bundled_available():
        pytest.skip("the bundled pair is not trained yet")
    pairs = {backend: load_pair(backend=backend) for backend in ("inferlab", "transformers")}
    for model in pairs["transformers"][:2]:
        model.generation_config.eos_token_id = None
        model.generation_config.pad_token_id = 0
    return {backend: models[:2] for backend, models in pairs.items()}, pairs["inferlab"][2]


def test_gamma_sweep_predicts_each_run_from_its_own_measured_costs(bundled_pairs):
    """A tiny sweep: every row's whole-run prediction is the closed form at the costs the run recorded."""
    from inferlab.speculative import bench
    from inferlab.speculative.formulas import expected_run_speedup

    pairs, tokenizer = bundled_pairs
    record = bench.sweep_regime(pairs, tokenizer, "short", [1, 2], repeat=1, new_tokens=6)
    assert record["outputs_identical_to_greedy"]
    costs = bench.runtime_costs(pairs, tokenizer(bench.SHORT_PROMPT, return_tensors="pt").input_ids, [1], 1)
    assert all(costs["inferlab"][name][1] > 0 for name in ("verify", "round")) and costs["inferlab"]["prompt"] > 0
    # With no prompt, a round costing one step and one token a round, the counted prediction is 1.
    from inferlab.speculative.formulas import run_speedup

    assert run_speedup(6, 6, 1.0, prompt=0.0, draft_prompt=0.0) == 1.0
    assert record["measured_over_cost_model_min"] <= record["measured_over_cost_model_max"]
    for row in (r for r in record["rows"] if r["method"] == "ours_speculative"):
        assert row["measured_over_predicted"] == pytest.approx(
            row["speedup_same_runtime"] / row["predicted_whole_run"], abs=2e-3
        )
    assert expected_run_speedup(record["alpha"], 1, 6, 1.0, prompt=0.0) == pytest.approx(
        expected_tokens_per_step(record["alpha"], 1)
    )
    # The theory check pools every prompt of the regime, each with its own alpha.
    assert record["theory_prompts"] == len(bench.THEORY_PROMPTS["short"]) == len(record["theory_alphas"])
    assert [t["gamma"] for t in record["theory"]] == [1, 2]
    assert record["pooled_measured_over_predicted_min"] == min(t["measured ÷ predicted"] for t in record["theory"])
    assert record["pooled_measured_over_cost_model_max"] == max(t["measured ÷ cost model"] for t in record["theory"])


def _theory_entry(alpha, step, round_cost, prompt, plain, speculative, calls):
    cost = {"target_step": step, "round": {3: round_cost}, "prompt": prompt, "draft_prompt": 0.5}
    return {"alpha": alpha, "cost": cost, "plain": {3: [plain]}, "speculative": {3: speculative}, "calls": {3: calls}}


def test_pooled_theory_of_one_prompt_is_that_prompts_whole_run_prediction():
    from inferlab.speculative import bench
    from inferlab.speculative.formulas import expected_run_speedup, run_speedup

    pool = {"prompt 1": _theory_entry(0.7, 0.006, 2.2, 4.0, plain=0.5, speculative=0.3, calls=12)}
    theory = bench.pooled_theory(pool, 3, 40)
    assert theory["measured"] == pytest.approx(0.5 / 0.3, abs=1e-3)
    assert theory["predicted, whole run measured"] == pytest.approx(
        expected_run_speedup(0.7, 3, 40, 2.2, 4.0, 0.5), abs=1e-3
    )
    counted = run_speedup(40, 12, 2.2, 4.0, 0.5)
    assert theory["measured ÷ cost model"] == pytest.approx((0.5 / 0.3) / counted, abs=1e-3)
    assert theory["target calls, formula"] == pytest.approx(40 / expected_tokens_per_step(0.7, 3), abs=0.05)


def test_each_speedup_divides_by_the_plain_runs_of_its_own_block():
    """A slow spell during gamma 2's block slows its plain runs too: the ratio uses that block's plain median."""
    from inferlab.speculative import bench
    from inferlab.speculative.formulas import expected_run_speedup

    plain = {"plain_inferlab": {1: [1.0, 1.2, 1.1], 2: [2.0, 2.2, 2.1]}, "plain_transformers": {1: [1.5], 2: [3.0]}}
    cost = {"c": 0.1, "verify": {1: 1.2, 2: 1.4}, "round": {1: 1.3, 2: 1.6}, "prompt": 2.0, "draft_prompt": 0.2}
    rows = [
        {"gamma": 1, "method": "ours_speculative", "seconds": 0.55, "target_calls": 6},
        {"gamma": 2, "method": "ours_speculative", "seconds": 1.05, "target_calls": 4},
        {"gamma": 2, "method": "hf_assisted", "seconds": 1.5},
        {"gamma": 2, "method": "ours_speculative_transformers", "seconds": 1.2, "target_calls": 4},
    ]
    bench.add_speedups(rows, plain, "plain_inferlab", {"inferlab": cost, "transformers": cost}, 0.5, 8)
    assert [r["speedup"] for r in rows] == [round(1.1 / 0.55, 3), round(2.1 / 1.05, 3), 1.4, 1.75]
    assert rows[1]["speedup_same_runtime"] == 2.0 and rows[3]["speedup_same_runtime"] == 2.5  # 3.0 / 1.2
    assert "speedup_same_runtime" not in rows[2]
    predicted = expected_run_speedup(0.5, 2, 8, 1.6, 2.0, 0.2)
    assert rows[1]["measured_over_predicted"] == round(2.0 / predicted, 3)


def test_pooled_theory_sums_seconds_across_prompts_before_dividing():
    """Two prompts: the pooled ratios are total plain time over total speculative time, worked by hand."""
    from inferlab.speculative import bench

    # alpha = 0 makes one token a round: rounds = new tokens = 10. alpha = 1 makes gamma + 1 = 4 a round.
    slow = _theory_entry(0.0, 0.010, 2.0, 0.0, plain=0.10, speculative=0.20, calls=10)
    fast = _theory_entry(1.0, 0.005, 2.0, 0.0, plain=0.05, speculative=0.02, calls=3)
    theory = bench.pooled_theory({"a": slow, "b": fast}, 3, 10)
    assert theory["measured"] == pytest.approx(0.15 / 0.22, abs=1e-3)
    # Plain: 10 steps each. Speculative: 0.5 + 10 * 2 steps at 10 ms, 0.5 + 2.5 * 2 steps at 5 ms.
    predicted = (10 * 0.010 + 10 * 0.005) / (20.5 * 0.010 + 5.5 * 0.005)
    assert theory["predicted, whole run measured"] == pytest.approx(predicted, abs=1e-3)
    assert theory["target calls, counted"] == 13 and theory["target calls, formula"] == 12.5
    counted = (10 * 0.010 + 10 * 0.005) / (20.5 * 0.010 + 6.5 * 0.005)
    assert theory["measured ÷ cost model"] == pytest.approx((0.15 / 0.22) / counted, abs=2e-3)


def test_within_spread_compares_the_gap_with_the_larger_spread():
    from inferlab.speculative.bench import within_spread

    assert within_spread({"speedup": 1.5, "spread": 1.05}, {"speedup": 1.6, "spread": 1.1})  # 1.067 < 1.1
    assert not within_spread({"speedup": 1.5, "spread": 1.05}, {"speedup": 1.7, "spread": 1.1})  # 1.133
    assert not within_spread({"speedup": 1.0, "spread": 1.1}, {"speedup": 1.1, "spread": 1.1})  # equal: no tie


def test_paired_ratios_divide_repeat_by_repeat():
    from inferlab.speculative.bench import paired_ratios

    # Repeat 2 was a slow spell for both: paired, it divides out (3 / 3); unpaired medians would not.
    assert paired_ratios([2.0, 3.0, 2.2], [1.0, 3.0, 2.0]) == {"median": 1.1, "min": 1.0, "max": 2.0}
    assert paired_ratios([1.0], [4.0]) == {"median": 0.25, "min": 0.25, "max": 0.25}
    for bad in (([], []), ([1.0], [1.0, 2.0])):
        with pytest.raises(ValueError, match="need paired timings of one length >= 1"):
            paired_ratios(*bad)


def test_the_committed_tree_result_says_what_the_token_trees_page_says():
    """The page: the first pass flatters the winning tree; the rematch of the two winners is a tie."""
    from inferlab.bench import read_result

    values = read_result("speculative_tree")["values"]
    rematch = values["rematch"]
    assert (rematch["tree"], rematch["chain"]) == (values["best_tree"], values["best_chain"])
    assert rematch["outputs_identical_to_greedy"] and values["outputs_identical_to_greedy"]
    ratio = rematch["tree_over_chain_speed"]
    assert ratio["min"] < 1 < ratio["max"] and 0.98 <= ratio["median"], (
        "re-measured: the rematch is no longer a tie; rewrite the wall-time paragraph of token-trees.md"
    )
    assert values["best_tree_over_best_chain_time"] > ratio["median"]  # "that first ratio flatters the tree"
    assert values["dynamic_over_chain_min"] >= 1  # the page: at least as many tokens per call at every budget


def test_tree_experiment_compares_equal_budgets_and_keeps_greedy_output(bundled_pairs):
    from inferlab.speculative import bench

    pairs, tokenizer = bundled_pairs
    values = bench.tree_experiment(pairs, tokenizer, repeat=1, new_tokens=4)
    assert values["outputs_identical_to_greedy"]
    assert 0 < values["draft_temperature"] <= 10
    rows = {r["shape"]: r for r in values["rows"]}
    for budget in values["same_budget"]:
        nodes = budget["nodes"]
        assert rows[f"chain {nodes}"]["nodes_per_tree"] == rows[f"dynamic {nodes}"]["nodes_per_tree"] == nodes
        assert budget["dynamic / chain"] == pytest.approx(budget["dynamic tree"] / budget["chain"], abs=2e-3)
    assert rows["fixed 2-2-1"]["nodes_per_tree"] == 2 + 4 + 4
    rematch = values["rematch"]
    assert (rematch["tree"], rematch["chain"], rematch["repeats"]) == (values["best_tree"], values["best_chain"], 2)
    assert rematch["outputs_identical_to_greedy"]
    assert rematch["tree_over_chain_speed"]["min"] <= rematch["tree_over_chain_speed"]["median"]


# ----------------------------------------------------------------------------------------------
# The cache-free reference, round by round, against an independent walk of the two models.


def hesitant_table_pair() -> tuple[TableLM, TableLM]:
    """A target and a noisy copy of it as the draft: some rounds keep every draft, some none, some part."""
    target, draft = TableLM(6, seed=7, scale=2.0), TableLM(6, seed=7, scale=2.0)
    draft.table = draft.table + torch.randn(draft.table.shape, generator=torch.Generator().manual_seed(8)) * 1.5
    return target, draft


def drafts_per_round(accepted_per_round: list[int], gamma: int, max_new_tokens: int) -> list[int]:
    """How many drafts each round proposed: gamma, but one fewer than still needed (the target adds one)."""
    drafted, produced = [], 0
    for accepted in accepted_per_round:
        drafted.append(min(gamma, max_new_tokens - produced - 1))
        produced += accepted + 1  # the accepted drafts and the target's own token
    return drafted


def wrong_every_fifth_position(target):
    """A draft equal to the target except at every fifth position, where its argmax is the next token id."""

    def draft(ids):
        logits = target(ids).clone()
        wrong = torch.arange(ids.shape[1]) % 5 == 3
        logits[:, wrong] = logits[:, wrong].roll(1, dims=-1)  # moves the argmax from token i to i + 1
        return logits

    return draft


@pytest.mark.parametrize("gamma", [1, 3])
def test_reference_greedy_is_plain_greedy_and_counts_what_each_round_did(gamma):
    target = TableLM(6, seed=5, scale=2.0)
    draft = wrong_every_fifth_position(target)
    prompt, new = torch.tensor([[1, 2]]), 40
    greedy = greedy_generate(target, prompt, new)[0].tolist()
    result = speculative_sample_reference(target, draft, prompt, new, gamma, temperature=0)
    assert result.sequences.tolist() == [greedy]
    # Walk the rounds by hand: each round starts from a prefix of the target's greedy output; the draft
    # continues it greedily, and the target keeps the drafts up to the first that leaves its greedy path.
    produced, accepted_per_round, probs, drafted = 0, [], [], 0
    while produced < new:
        n_draft = min(gamma, new - produced - 1)
        start = prompt.shape[1] + produced
        proposal = greedy_generate(draft, torch.tensor([greedy[:start]]), n_draft)[0, start:].tolist()
        agree = next((i for i in range(n_draft) if proposal[i] != greedy[start + i]), n_draft)
        accepted_per_round.append(agree)
        probs += [1.0] * agree + ([0.0] if agree < n_draft else [])  # a rejection is a checked draft too
        drafted += n_draft
        produced += agree + 1
    # The walk must meet all three kinds of round, or it would not test the counters.
    assert 0 in accepted_per_round and gamma in accepted_per_round
    assert result.accepted_per_round == accepted_per_round
    assert result.acceptance_probs == probs
    assert result.accepted == sum(accepted_per_round) and result.drafted == drafted
    assert result.rounds == result.target_calls == len(accepted_per_round)
    assert result.draft_calls == drafted  # no cache: one draft call per drafted token


def test_reference_sampling_records_each_checked_drafts_acceptance_probability():
    """Leviathan et al.'s acceptance probability sum_x min(p(x), q(x)), computed from the tables for every
    draft the target checked: the accepted ones (their context is in the output) and each round's rejection."""
    target, draft = hesitant_table_pair()
    prompt, new, gamma = [1, 2], 40, 3
    result = speculative_sample_reference(
        target, draft, torch.tensor([prompt]), new, gamma, generator=torch.Generator().manual_seed(0)
    )
    tokens = result.sequences[0].tolist()
    expected, produced = [], 0
    for accepted, n_draft in zip(
        result.accepted_per_round, drafts_per_round(result.accepted_per_round, gamma, new), strict=True
    ):
        checked = accepted + (accepted < n_draft)  # the accepted drafts, then the rejected one if any
        for i in range(checked):
            context = tokens[: len(prompt) + produced + i]
            expected.append(float(torch.minimum(target.next_probs(context), draft.next_probs(context)).sum()))
        produced += accepted + 1
    assert 0 < min(expected) and max(expected) < 1  # sampling: fractions, not greedy's 0 or 1
    assert result.acceptance_probs == pytest.approx(expected)
    assert result.rounds == result.target_calls == len(result.accepted_per_round) > 1
    assert result.accepted == sum(result.accepted_per_round) and result.accepted > 0
    assert result.drafted == result.draft_calls == sum(drafts_per_round(result.accepted_per_round, gamma, new))


def test_reference_samples_at_temperature_one_by_default():
    target, draft = hesitant_table_pair()
    prompt = torch.tensor([[1, 2]])
    default = speculative_sample_reference(target, draft, prompt, 30, 3, generator=torch.Generator().manual_seed(0))
    explicit = speculative_sample_reference(
        target, draft, prompt, 30, 3, temperature=1.0, generator=torch.Generator().manual_seed(0)
    )
    assert torch.equal(default.sequences, explicit.sequences)
    # And it really samples: under the same uniforms the cached sampler, at temperature 1, draws the same.
    fast = speculative_sample(target, draft, prompt, 30, 3, temperature=1.0, generator=torch.Generator().manual_seed(0))
    assert torch.equal(default.sequences, fast.sequences)
    assert default.accepted_per_round == fast.accepted_per_round


def nan_after(length: int, healthy):
    """A logits function that is ``healthy`` on short inputs and returns NaN once it reads ``length`` tokens."""

    def logits(ids):
        out = healthy(ids)
        return torch.full_like(out, float("nan")) if ids.shape[1] >= length else out

    return logits


@pytest.mark.parametrize("temperature", [0, 1.0])
@pytest.mark.parametrize("sampler", [speculative_sample, speculative_sample_reference])
def test_nan_logits_error_names_the_model_that_produced_them(sampler, temperature):
    target, draft = hesitant_table_pair()
    prompt = torch.tensor([[1, 2]])
    settings = {"temperature": temperature, "generator": torch.Generator().manual_seed(0)}
    with pytest.raises(ValueError, match="the draft returned NaN"):
        sampler(target, nan_after(1, draft), prompt, 6, 2, **settings)
    with pytest.raises(ValueError, match="the target returned NaN"):
        sampler(nan_after(1, target), draft, prompt, 6, 2, **settings)


@pytest.mark.parametrize("sampler", [speculative_sample, speculative_sample_reference])
def test_samplers_check_the_draft_and_the_generator_before_any_work(sampler):
    class SevenTokens(CallCounter):
        vocab_size = 7

    with pytest.raises(ValueError, match="target has 5 logits, draft has 7"):
        sampler(CallCounter(), SevenTokens(), torch.tensor([[1, 2]]), 4, 2)
    with pytest.raises(TypeError, match="generator must be None or a CPU torch.Generator"):
        sampler(CallCounter(), CallCounter(), torch.tensor([[1, 2]]), 4, 2, temperature=0, generator=0)


@pytest.mark.parametrize(("top_k", "top_p"), [(2, None), (None, 0.6), (3, 0.7)])
def test_next_token_probs_applies_top_k_and_top_p(top_k, top_p):
    from inferlab.speculative.sampler import next_token_probs

    logits = torch.tensor([2.0, 0.5, 1.5, -1.0, 0.0, 1.0])
    # The brute-force filter above, with k = 6 (keep all) or top_p = 1 (keep all) where one is off.
    keep = keep_top_k_then_top_p(top_k or 6, top_p or 1.0, temperature=0.8)
    expected = keep(logits.double().softmax(-1))
    assert (expected == 0).any()  # the filter rules something out
    torch.testing.assert_close(next_token_probs(logits, 0.8, top_k, top_p).double(), expected, atol=1e-6, rtol=0)


# ----------------------------------------------------------------------------------------------
# The formulas at the points where each term decides, and the tree helpers on trees worked by hand.


def test_best_gamma_at_the_ends_of_its_range():
    # alpha = 1 and free drafts (c = 0): a round of gamma drafts yields gamma + 1 tokens for one target
    # step, so the speed-up gamma + 1 grows without end and the best gamma is the largest allowed.
    assert best_gamma(1.0, 0.0) == 64
    assert best_gamma(1.0, 0.0, max_gamma=5) == 5
    # alpha = 0: every round yields exactly one token; with c = 0 every gamma ties at speed-up 1, and a
    # tie goes to the smaller gamma.
    assert best_gamma(0.0, 0.0) == 1
    # alpha = 0.5, c = 0.3: gamma 1 gives 1.5 / 1.3 = 1.154, gamma 2 gives 1.75 / 1.6 = 1.094; more is worse.
    assert best_gamma(0.5, 0.3) == 1


def test_arithmetic_cost_increase_refuses_a_negative_cost_by_name():
    with pytest.raises(ValueError, match="c_hat must be a finite number >= 0"):
        arithmetic_cost_increase(0.5, 2, -1.0)


def test_path_to_reads_a_branch_from_the_root_down():
    from inferlab.speculative.tree import path_to

    # Two roots (10, 11); 20 under 10; 30 under 20; 31 under 11.
    nodes = [TreeNode(10, -1, 1), TreeNode(11, -1, 1), TreeNode(20, 0, 2), TreeNode(30, 2, 3), TreeNode(31, 1, 2)]
    assert path_to(nodes, 3) == [10, 20, 30]
    assert path_to(nodes, 4) == [11, 31]
    assert path_to(nodes, 1) == [11]
    assert path_to(nodes, -1) == []  # the root itself: no drafted token yet


def test_tree_attention_mask_on_a_tree_worked_by_hand():
    nodes = [TreeNode(10, -1, 1), TreeNode(11, -1, 1), TreeNode(20, 0, 2), TreeNode(30, 2, 3), TreeNode(31, 1, 2)]
    T, F = True, False
    expected = [  # 2 prefix columns, then one per node: each row sees the prefix, its ancestors and itself
        [T, T, T, F, F, F, F],
        [T, T, F, T, F, F, F],
        [T, T, T, F, T, F, F],
        [T, T, T, F, T, T, F],
        [T, T, F, T, F, F, T],
    ]
    mask = tree_attention_mask(2, nodes)
    # A boolean mask says where attention may look; a float one would be *added* to the scores by
    # torch's scaled_dot_product_attention, so 0/1 floats would block nothing.
    assert mask.dtype == torch.bool
    assert mask.tolist() == expected


# ----------------------------------------------------------------------------------------------
# One round of verification at its edges: which uniform decides, ties, a residual of zero, bad rows.


def use_uniforms(monkeypatch, values: list[float]) -> None:
    """Make torch.rand hand out ``values`` in order (float64), so a test chooses each uniform itself."""
    queue = list(values)

    def fake_rand(*size, **kwargs):
        shape = size[0] if size and isinstance(size[0], tuple) else size
        drawn = [queue.pop(0) for _ in range(math.prod(shape))]
        return torch.tensor(drawn if shape else drawn[0], dtype=torch.float64).reshape(shape)

    monkeypatch.setattr(torch, "rand", fake_rand)


def rows_with_ratios(ratios: list[float]) -> tuple[torch.Tensor, torch.Tensor]:
    """Two-token rows where drafting token 0 is accepted with probability p(0) / q(0) = ratio (q uniform)."""
    p = torch.tensor([[r / 2, 1 - r / 2] for r in ratios] + [[0.5, 0.5]], dtype=torch.float64)
    return p, torch.full((len(ratios), 2), 0.5, dtype=torch.float64)


def test_draft_i_is_kept_when_the_generators_i_th_float64_uniform_is_below_p_over_q():
    """The stream contract both samplers share: first one float64 uniform per draft, in order."""
    u = torch.rand(3, generator=torch.Generator().manual_seed(0), dtype=torch.float64).tolist()
    eps = 1e-9
    p_rows, q_rows = rows_with_ratios([u[0] + eps, u[1] + eps, u[2] - eps])  # keep, keep, reject
    kept, accepted, probs = verify_drafts(p_rows, q_rows, [0, 0, 0], torch.Generator().manual_seed(0))
    # Rejected token 0: the residual max(0, p - q) lives on token 1 alone.
    assert (kept, accepted) == ([0, 0, 1], 2)
    assert probs == pytest.approx([0.5 + (u[0] + eps) / 2, 0.5 + (u[1] + eps) / 2, 0.5 + (u[2] - eps) / 2])
    p_rows, q_rows = rows_with_ratios([u[0] - eps, 1.0, 1.0])  # the first uniform alone now rejects
    assert verify_drafts(p_rows, q_rows, [0, 0, 0], torch.Generator().manual_seed(0))[:2] == ([1], 0)


def test_a_draft_the_target_rules_out_is_rejected_even_at_a_uniform_of_zero(monkeypatch):
    # torch.rand draws from [0, 1), zero included; min(1, p/q) = 0 must mean never, so the test is u q < p.
    use_uniforms(monkeypatch, [0.0, 0.5])
    p = torch.tensor([[0.0, 1.0], [0.5, 0.5]], dtype=torch.float64)
    q = torch.tensor([[0.5, 0.5]], dtype=torch.float64)
    assert verify_drafts(p, q, [0])[:2] == ([1], 0)


def test_a_rejection_with_nothing_left_in_the_residual_draws_from_p(monkeypatch):
    """Rounding can leave p a hair below q everywhere (each sums to 1 only up to rounding): then
    max(0, p - q) is all zero and the replacement token is drawn from p itself."""
    use_uniforms(monkeypatch, [1 - 1e-15, 0.9])  # reject; then the second uniform picks from p's CDF
    p = torch.tensor([[0.4 - 1e-12, 0.6 - 1e-12], [0.5, 0.5]], dtype=torch.float64)
    q = torch.tensor([[0.4, 0.6]], dtype=torch.float64)
    # 0.9 of p's mass lies past p(0) ~ 0.4, so the draw is token 1.
    assert verify_drafts(p, q, [0])[:2] == ([1], 0)


@pytest.mark.parametrize(
    ("rows", "drafts", "message"),
    [
        ({"q_rows": torch.full((0, 4), 0.25)}, [0], r"q_rows must hold at least 1 rows for 1 drafts, got 0"),
        ({"p_rows": torch.tensor([[0.25] * 4, [float("nan")] * 4])}, [0], r"p_rows\[1\] must be finite"),
        ({"q_rows": torch.tensor([[0.5, -0.1, 0.3, 0.3]])}, [0], r"q_rows\[0\] must be non-negative"),
        ({}, [4], r"drafts must be token ids in 0\.\.3, got 4"),  # one past the last id
        ({}, [True], r"drafts must be token ids in 0\.\.3, got True"),
        ({}, [1.0], r"drafts must be token ids in 0\.\.3, got 1\.0"),
    ],
)
def test_verify_drafts_names_the_bad_row_or_draft(rows, drafts, message):
    arguments = {"p_rows": torch.full((2, 4), 0.25), "q_rows": torch.full((1, 4), 0.25)} | rows
    with pytest.raises(ValueError, match=message):
        verify_drafts(drafts=drafts, **arguments)
