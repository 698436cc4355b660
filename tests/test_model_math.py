"""Toy-size numbers worked out on paper, and the invariances BERT's math promises.

Each test names the requirement it checks (S-numbers: docs/spec.md).
"""

import pytest
import torch

from minibert import BertForClassification, BertForMaskedLM, BertForSequenceClassification, BertModel
from minibert.model import SelfAttention, additive_mask, sum_embeddings

from conftest import TINY_REORDER, assert_close, perturb_, tiny_config


def test_s1_embeddings_are_summed_then_layer_normed():
    """S1: token (1,0) + segment (0.5,0.5) + position (-0.5,1) = (1, 1.5).

    Then LayerNorm with eps 1e-12 (weight 1, bias 0): mean 1.25, variance
    ((1-1.25)^2 + (1.5-1.25)^2)/2 = 0.0625, sqrt(0.0625 + 1e-12) = 0.25, so
    ((1-1.25)/0.25, (1.5-1.25)/0.25) = (-1, 1). With PyTorch's default eps 1e-5 it would be
    0.25/sqrt(0.0625+1e-5) = 0.99992, outside atol 1e-6.
    Tolerances: the parts are dyadic, so the sum is exact in float32 in any order (atol 0); the
    LayerNorm is a few float32 roundings (mean, variance, rsqrt, product) of values <= 1, each
    <= u = 6.0e-8: ~4 u = 2.4e-7 < 1e-6, while eps 1e-5 is off by 8e-5.
    """
    model = BertModel(tiny_config(hidden_size=2, num_attention_heads=1)).eval()
    emb = model.embeddings
    with torch.no_grad():
        emb.word_embeddings.weight[7] = torch.tensor([1.0, 0.0])
        emb.token_type_embeddings.weight[0] = torch.tensor([0.5, 0.5])
        emb.position_embeddings.weight[0] = torch.tensor([-0.5, 1.0])
    ids, types = torch.tensor([[7]]), torch.tensor([[0]])
    seen = []  # the model's own sum: what its LayerNorm receives
    hook = emb.norm.register_forward_hook(lambda module, args, out: seen.append(args[0]))
    out = emb(ids, types)
    hook.remove()
    assert_close(seen[0], torch.tensor([[[1.0, 1.5]]]), atol=0.0, what="sum")
    assert_close(out, torch.tensor([[[-1.0, 1.0]]]), atol=1e-6, what="LayerNorm(sum)")


def test_s1_widths_must_match():
    """S1: parts of different widths are an error, never broadcast."""
    with pytest.raises(ValueError, match="share one width"):
        sum_embeddings(torch.zeros(1, 3, 2), torch.zeros(1, 3, 2), torch.zeros(3, 1))


def test_s1_the_model_cannot_split_the_sum_back():
    """S1: the model sees only the sum, so two decompositions with one sum look identical to it.
    On the model's own embedding tables (C = 4):
      position 0: token 7 (1, 0, 2, 0) + segment A (0.5, 0.5, 0, 1) + position (-0.5, 1, 0, 0.25)
      position 1: token 8 (0, 0, 0, 0) + segment B (1, 1, 1, 1)     + position (0, 0.5, 1, 0.25)
    both sum to (1, 1.5, 2, 1.25) (all dyadic: exact in float32). The input [7, 8] with segments
    [A, B] therefore gives the same embedding output at both positions, exactly (one LayerNorm call
    on two equal rows), and every later layer treats the two positions alike: their last hidden
    states agree (only the rows' place in a matmul differs, which a kernel may still sum in another
    order: about 18 chained sums of at most 37 terms at |h| <= 4, 18 x 37 x 6.0e-8 x 4 = 1.6e-4,
    atol TINY_REORDER; 0 measured). A sum that dropped or weighted a part would tell them apart by
    O(1) even after LayerNorm (which forgets only a shift and a scale): without positions
    (1.5, 0.5, 2, 1) against (1, 1, 1, 1); without segments (0.5, 1, 2, 0.25) against
    (0, 0.5, 1, 0.25); positions counted twice (0.5, 2.5, 2, 1.5) against (1, 2, 3, 1.5)."""
    model = perturb_(BertModel(tiny_config(hidden_size=4, num_attention_heads=2))).eval()
    emb = model.embeddings
    with torch.no_grad():
        emb.word_embeddings.weight[7] = torch.tensor([1.0, 0.0, 2.0, 0.0])
        emb.word_embeddings.weight[8] = torch.tensor([0.0, 0.0, 0.0, 0.0])
        emb.token_type_embeddings.weight[:2] = torch.tensor([[0.5, 0.5, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
        emb.position_embeddings.weight[:2] = torch.tensor([[-0.5, 1.0, 0.0, 0.25], [0.0, 0.5, 1.0, 0.25]])
        ids, types = torch.tensor([[7, 8]]), torch.tensor([[0, 1]])
        x = emb(ids, types)                                     # (1, 2, C)
        h = model(ids, token_type_ids=types).last_hidden_state  # (1, 2, C)
    assert torch.equal(x[0, 0], x[0, 1])
    assert_close(h[0, 0], h[0, 1], atol=TINY_REORDER, what="last hidden state, positions 0 and 1")


GELU_AT = torch.tensor([-1.0, 0.0, 1.0, 2.0], dtype=torch.float64)
GELU_BY_HAND = {
    # exact: x * Phi(x), Phi from a normal table
    "gelu": [-0.1586553, 0.0, 0.8413447, 1.9544997],
    # tanh approximation: x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
    "gelu_new": [-0.1588080, 0.0, 0.8411920, 1.9545977],
}


@pytest.mark.parametrize("hidden_act", ["gelu", "gelu_new"])
def test_gelu_at_hand_points(hidden_act):
    """The FFN activation of a built layer (BertModel(...).layers[0].act), at x = -1, 0, 1, 2.

    "gelu" (BERT's and HF's), exact x * Phi(x): Phi(1) = 0.8413447, Phi(2) = 0.9772499, so
      gelu(1) = 0.8413447, gelu(-1) = -1 * Phi(-1) = -(1 - 0.8413447) = -0.1586553,
      gelu(0) = 0, gelu(2) = 2 * 0.9772499 = 1.9544997.
    "gelu_new", x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))), sqrt(2/pi) = 0.7978846:
      x = 1: 0.7978846 * 1.044715 = 0.8335620, tanh = 0.6823840, 0.5 * 1.6823840 = 0.8411920;
      x = 2: 0.7978846 * 2.35772 = 1.8811884, tanh = 0.9545977, 1 * 1.9545977 = 1.9545977;
      x = -1: the function is x/2 + an odd function, so gelu_new(-1) = gelu_new(1) - 1 = -0.1588080;
      x = 0: 0.
    The two differ by 1.5e-4 at x = 1, so atol 1e-7 tells them apart. Evaluated in float64,
    so the only error is the 7-decimal rounding of the hand values (< 5e-8)."""
    act = BertModel(tiny_config(hidden_act=hidden_act)).layers[0].act
    expected = torch.tensor(GELU_BY_HAND[hidden_act], dtype=torch.float64)
    assert_close(act(GELU_AT), expected, atol=1e-7, what=f"{hidden_act} at {GELU_AT.tolist()}")


def _identity_attention(use_sdpa):
    """One head (H=1, C=D=2) whose Q, K, V and output projections are the identity."""
    attn = SelfAttention(tiny_config(hidden_size=2, num_attention_heads=1, use_sdpa=use_sdpa)).eval()
    with torch.no_grad():
        for lin in (attn.query, attn.key, attn.value, attn.output):
            lin.weight.copy_(torch.eye(2))
            lin.bias.zero_()
    return attn


@pytest.mark.parametrize("use_sdpa", [False, True], ids=["manual", "sdpa"])
def test_one_head_with_padding_mask_by_hand(use_sdpa):
    """x = [(1,0), (0,1), (5,5)], the third token is padding. D = 2, so scores are q.k / sqrt 2.

    Query 0: key 0 scores 1/sqrt 2 = 0.7071068, key 1 scores 0, key 2 is masked (+finfo.min).
      softmax: e^0.7071068 = 2.0281150; p = 2.0281150 / 3.0281150 = 0.6697615, 1 - p = 0.3302385.
      output = 0.6697615*(1,0) + 0.3302385*(0,1) = (0.6697615, 0.3302385).
    Query 1 is the mirror image: (0.3302385, 0.6697615).
    Query 2 (the padding token itself) scores 5/sqrt 2 against both real keys: (0.5, 0.5).
    A mask that failed to hide key 2 would put almost all weight on (5,5).
    atol 1e-6: the hand p is rounded to 7 decimals (< 5e-8), and float32 computes it in ~10
    roundings (scale, exp, sum, divide, products) of values <= 1: <= 10 x 6.0e-8 = 6e-7.
    """
    attn = _identity_attention(use_sdpa)
    x = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [5.0, 5.0]]])  # (B=1, T=3, C=2)
    mask = additive_mask(torch.tensor([[1, 1, 0]]), x)  # (B, 1, 1, T): 0, 0, finfo.min
    assert mask.tolist() == [[[[0.0, 0.0, torch.finfo(torch.float32).min]]]]
    out, probs = attn(x, mask, return_probs=not use_sdpa)
    p = 0.6697615
    expected = torch.tensor([[[p, 1 - p], [1 - p, p], [0.5, 0.5]]])
    assert_close(out, expected, atol=1e-6, what="attention output")
    if not use_sdpa:
        assert_close(probs[0, 0], torch.tensor([[p, 1 - p, 0.0], [1 - p, p, 0.0], [0.5, 0.5, 0.0]]),
                     atol=1e-6, what="attention probabilities")


def _pair(use_sdpa_b=True, **overrides):
    """Two eval-mode models with identical (perturbed) weights, differing only in use_sdpa."""
    a = perturb_(BertModel(tiny_config(**overrides))).eval()
    b = BertModel(tiny_config(use_sdpa=use_sdpa_b, **overrides)).eval()
    b.load_state_dict(a.state_dict())
    return a, b


def test_manual_and_sdpa_attention_agree(batch):
    """The SDPA fast path computes the same numbers as the written-out math, on a batch with
    padding and two segments: to float32 rounding only, for the fused kernel sums in its own order
    (atol TINY_REORDER, conftest: 1.8e-4 derived, 7e-7 measured); a missing mask or 1/sqrt(D) moves
    them by 0.5 or 0.3."""
    ids, mask, types = batch
    manual, sdpa = _pair()
    with torch.no_grad():
        a, b = manual(ids, mask, types), sdpa(ids, mask, types)
    assert sdpa.layers[0].attention.use_sdpa and not manual.layers[0].attention.use_sdpa
    assert_close(b.last_hidden_state, a.last_hidden_state, atol=TINY_REORDER, what="hidden")
    assert_close(b.pooler_output, a.pooler_output, atol=TINY_REORDER, what="pooled")


@pytest.mark.parametrize("use_sdpa", [False, True], ids=["manual", "sdpa"])
def test_s5_padding_ids_do_not_change_real_positions(batch, use_sdpa):
    """S5: with a correct attention mask, replacing the [PAD] ids (and their segment ids)
    by any other legal ids leaves every non-padding output unchanged. Padding keys get
    weight exp(finfo.min - max) = 0 exactly, and both calls run the same kernels on batches of one
    shape, so real positions agree bit for bit; atol 1e-6 is slack, far below the 0.5 that a
    missing mask moves them by."""
    ids, mask, types = batch
    model = perturb_(BertModel(tiny_config(use_sdpa=use_sdpa))).eval()
    other_ids, other_types = ids.clone(), types.clone()
    pad = mask == 0
    other_ids[pad] = torch.randint(3, 99, (int(pad.sum()),), generator=torch.Generator().manual_seed(5))
    other_types[pad] = 1
    with torch.no_grad():
        a, b = model(ids, mask, types), model(other_ids, mask, other_types)
    assert not torch.equal(ids, other_ids)
    real = mask.bool()
    assert_close(b.last_hidden_state[real], a.last_hidden_state[real], atol=1e-6, what="hidden at real tokens")
    assert_close(b.pooler_output, a.pooler_output, atol=1e-6, what="pooled")


def test_s22_padding_invariance_at_the_prediction_level(batch):
    """S22: a row classified alone (no padding, length 6) and inside a padded batch of length
    10 gets the same logits and hence the same predicted label. Tolerance: different matmul shapes
    may sum in other orders; at perturbation 0.3 a sum's terms add up to at most 6 in |.| (|z| <= 5.2),
    so TINY_REORDER's 20 chained sums of <= 37 terms give 20 x 37 x 6.0e-8 x 6 = 2.7e-4: atol 5e-4
    (measured 5e-7)."""
    ids, mask, types = batch
    model = perturb_(BertForSequenceClassification(tiny_config(), num_labels=3), scale=0.3).eval()
    with torch.no_grad():
        in_batch = model(ids, mask, types).logits[1]
        alone = model(ids[1:2, :6], mask[1:2, :6], types[1:2, :6]).logits[0]
    assert_close(alone, in_batch, atol=5e-4, what="logits")
    assert alone.argmax() == in_batch.argmax()


@pytest.mark.parametrize("use_sdpa", [False, True], ids=["manual", "sdpa"])
def test_fully_padded_row_gives_no_nan(batch, use_sdpa):
    """A row whose attention mask is all zero: every score is finfo.min, softmax is uniform
    (1/T each), never 0/0 = NaN as an -inf mask would give. The other rows are unaffected: the
    same kernels on a batch of the same shape, row by row, so bit for bit (atol 1e-6 is slack)."""
    ids, mask, types = batch
    model = perturb_(BertModel(tiny_config(use_sdpa=use_sdpa))).eval()
    empty = mask.clone()
    empty[2] = 0
    with torch.no_grad():
        out = model(ids, empty, types)
        ref = model(ids, mask, types)
    assert torch.isfinite(out.last_hidden_state).all() and torch.isfinite(out.pooler_output).all()
    assert_close(out.last_hidden_state[:2], ref.last_hidden_state[:2], atol=1e-6, what="other rows")


def test_attention_probabilities_are_returned_per_layer(batch):
    """output_attentions=True returns L tensors (B, H, T, T) whose rows sum to 1 and put
    zero weight on padding keys (row 1 is padded from position 6). It runs the written-out
    softmax where the plain call runs SDPA, so the hidden states agree to rounding only: a sum
    of n float32 terms in another order moves by at most n u of its scale (u = 2^-24); about 18
    chained sums of at most 37 terms, LayerNorm keeping values within |h| <= 4, give
    18 x 37 x 6.0e-8 x 4 = 1.6e-4, hence atol TINY_REORDER (conftest); a row sum: 10 terms <= 1,
    10 u = 6e-7 < 1e-6. A wrong mask or head order moves them by 0.1 or more."""
    ids, mask, types = batch
    model = perturb_(BertModel(tiny_config(use_sdpa=True))).eval()
    with torch.no_grad():
        out = model(ids, mask, types, output_attentions=True)
        plain = model(ids, mask, types)
    assert len(out.attentions) == 2
    for probs in out.attentions:
        assert probs.shape == (3, 4, 10, 10)
        assert_close(probs.sum(-1), torch.ones(3, 4, 10), atol=1e-6, what="row sums")
        assert probs[1, :, :, 6:].abs().max() == 0
    assert_close(out.last_hidden_state, plain.last_hidden_state, atol=TINY_REORDER, what="same output")


INIT_STD = 0.02


def initialised_tensors(model):
    """(name, kind, tensor) for every weight HF's _init_weights sets: 'normal' for Linear and
    Embedding weights (an Embedding's padding row left out, checked apart), 'zero' for biases
    (the MLM head's decoder bias included), 'one' for LayerNorm weights."""
    out = []
    for mname, m in model.named_modules():
        if isinstance(m, torch.nn.Linear):
            out += [(f"{mname}.weight", "normal", m.weight), (f"{mname}.bias", "zero", m.bias)]
        elif isinstance(m, torch.nn.Embedding):
            keep = torch.ones(m.num_embeddings, dtype=torch.bool)
            if m.padding_idx is not None:
                keep[m.padding_idx] = False
            out.append((f"{mname}.weight", "normal", m.weight[keep]))
        elif isinstance(m, torch.nn.LayerNorm):
            out += [(f"{mname}.weight", "one", m.weight), (f"{mname}.bias", "zero", m.bias)]
    return out


@pytest.mark.parametrize("build", [
    lambda c: BertModel(c), lambda c: BertForMaskedLM(c), lambda c: BertForSequenceClassification(c, 3),
    lambda c: BertForClassification(BertModel(c), 3)], ids=["BertModel", "MaskedLM", "SequenceClassification",
                                                            "Classification"])
def test_hf_initialisation(build):
    """HF's BertPreTrainedModel._init_weights (transformers 5: PreTrainedModel._init_weights plus
    the MLM decoder bias): Linear and Embedding weights N(0, initializer_range), Linear biases 0,
    an Embedding's padding_idx row 0 (the word table's row pad_token_id), LayerNorm weight 1 and
    bias 0; the MLM head's decoder bias 0. Every such tensor of every model class is checked.

    Statistics (seed 0, initializer_range 0.02, n values in one tensor): the sample mean of
    N(0, s) has sd s / sqrt(n), the sample std has sd s / sqrt(2n); each must lie within 5 sd
    (one false alarm in ~1.7 million per check). The smallest tensor, the token-type table (2 x 32,
    n = 64), thus allows std 0.02 +- 0.0088 and mean +- 0.0125; the word table (98 x 32) std
    0.02 +- 0.0013. PyTorch's own Linear init (Kaiming uniform, std 1/sqrt(3 * in) = 0.102 for
    in = 32) or std 0.01 fail by far. Normal, not merely the right std: pooled over every normal
    tensor (n = 18,208 for BertModel), the share of values within one sd is 0.6827 for a normal
    (0.5774 for a uniform of the same std) with binomial sd sqrt(0.6827 * 0.3173 / n) = 0.0034:
    5 sd is +-0.017."""
    torch.manual_seed(0)
    model = build(tiny_config())
    assert model.config.initializer_range == INIT_STD
    words = model.base_model.embeddings.word_embeddings
    assert words.padding_idx == model.config.pad_token_id == 0
    assert words.weight[0].abs().max() == 0, "padding row"
    pooled = []
    for name, kind, t in initialised_tensors(model):
        t = t.detach().flatten()
        if kind == "zero":
            assert t.abs().max() == 0, name
        elif kind == "one":
            assert torch.equal(t, torch.ones_like(t)), name
        else:
            n = t.numel()
            assert abs(t.mean().item()) < 5 * INIT_STD / n ** 0.5, (name, t.mean().item())
            assert abs(t.std().item() - INIT_STD) < 5 * INIT_STD / (2 * n) ** 0.5, (name, t.std().item())
            pooled.append(t)
    if isinstance(model, BertForMaskedLM):
        assert model.mlm_head.bias.abs().max() == 0, "decoder bias"
    pooled = torch.cat(pooled)
    share = (pooled.abs() < INIT_STD).float().mean().item()
    assert abs(share - 0.6827) < 5 * (0.6827 * 0.3173 / pooled.numel()) ** 0.5, share
    n_params = sum(p.numel() for p in model.parameters())
    n_checked = sum(t.numel() for _, _, t in initialised_tensors(model)) + (
        model.mlm_head.bias.numel() if isinstance(model, BertForMaskedLM) else 0) + model.config.hidden_size
    assert n_checked == n_params, "a parameter that no rule above covers"


def test_seed_decides_the_initial_weights():
    """torch.manual_seed(s) before building: the same seed gives bit-identical weights (and
    outputs), another seed other weights in every tensor drawn at random."""
    def build(seed):
        torch.manual_seed(seed)
        return BertForMaskedLM(tiny_config()).state_dict()

    a, b, c = build(0), build(0), build(1)
    assert all(torch.equal(a[k], b[k]) for k in a)
    drawn = [k for k in a if a[k].dim() == 2]
    assert drawn and all(not torch.equal(a[k], c[k]) for k in drawn)


def hf_twin(model, attn="eager"):
    """The same weights in transformers' class of the same name (saved and loaded in HF's layout)."""
    import tempfile

    import transformers

    with tempfile.TemporaryDirectory() as d:
        model.save_pretrained(d)
        return getattr(transformers, type(model).__name__).from_pretrained(d, attn_implementation=attn)


DROPOUT_SITES = {  # HF's BertModel: where each dropout acts, and which probability it uses
    "hidden": "the embeddings' output, the attention output before its residual add, the feed-forward "
              "output before its residual add (and the classification head's input, by default)",
    "attention": "the attention probabilities, after the softmax and before they weight the values",
}


@pytest.mark.parametrize("hidden, attention", [(0.3, 0.0), (0.0, 0.3), (0.2, 0.4)],
                         ids=["hidden-only", "attention-only", "both"])
@pytest.mark.parametrize("cls", [BertModel, BertForSequenceClassification])
def test_dropout_sites_and_order_are_hfs(batch, cls, hidden, attention):
    """Train mode, one seed: minibert and transformers' eager BertModel (same weights) draw the
    same dropout masks in the same order on tensors of the same shapes only if dropout acts at
    the same places (DROPOUT_SITES) with the same probabilities: the outputs then agree to float
    rounding (TINY_REORDER, as the eval-mode parity; dropout's 1/(1 - p) <= 1.67 scales some terms:
    20 x 37 x 6.0e-8 x 4 x 1.67 = 3.0e-4 < 1e-3), while a dropout that is missing, added or moved
    shifts every later mask and changes the output at O(1) scale. The written-out attention is
    compared (use_sdpa=False); SDPA's dropout draws its own masks, see the next test.
    The same check holds with one kind of dropout at a time (hidden-only, attention-only), so each
    kind is placed right on its own. And dropout must change something: the train-mode output
    differs from the eval-mode one by more than 1e-3."""
    ids, mask, types = batch
    config = tiny_config(use_sdpa=False, hidden_dropout_prob=hidden, attention_probs_dropout_prob=attention)
    torch.manual_seed(0)
    ours = perturb_(cls(config) if cls is BertModel else cls(config, 2))
    hf = hf_twin(ours)
    ours.train(), hf.train()

    def out(model, seed):
        torch.manual_seed(seed)
        o = model(input_ids=ids, attention_mask=mask, token_type_ids=types)
        return (o.logits if hasattr(o, "logits") else o.last_hidden_state * mask[..., None]).detach()

    a, b = out(ours, 5), out(hf, 5)
    assert_close(a, b, atol=TINY_REORDER, what="train-mode output, same seed")
    ours.eval()
    assert (out(ours, 5) - a).abs().max() > 1e-3, "dropout changed nothing in train mode"


@pytest.mark.parametrize("use_sdpa", [False, True], ids=["written-out", "sdpa"])
@pytest.mark.parametrize("site", ["hidden", "attention"])
def test_each_dropout_acts_in_train_mode_only(batch, site, use_sdpa):
    """One kind of dropout at p = 0.5, the other at 0: in train mode the output changes against
    eval mode and between two seeds (a 0.5 mask over hundreds of units cannot repeat by chance),
    and one seed repeats exactly (the same masks, kernels and inputs: bit for bit); in eval mode every
    forward is identical whatever the seed. With
    use_sdpa the attention dropout is SDPA's dropout_p, which must also act in train mode only."""
    ids, mask, types = batch
    p = dict(hidden=0.0, attention=0.0)
    p[site] = 0.5
    model = perturb_(BertModel(tiny_config(use_sdpa=use_sdpa, hidden_dropout_prob=p["hidden"],
                                           attention_probs_dropout_prob=p["attention"])))

    def out(seed):
        torch.manual_seed(seed)
        with torch.no_grad():
            return model(ids, mask, types).last_hidden_state * mask[..., None]

    model.train()
    t0, t0_again, t1 = out(0), out(0), out(1)
    model.eval()
    e0, e1 = out(0), out(1)
    assert torch.equal(t0, t0_again)
    assert (t0 - t1).abs().max() > 1e-2 and (t0 - e0).abs().max() > 1e-2
    assert torch.equal(e0, e1)


def test_bad_inputs_raise_clear_errors(batch):
    ids, mask, types = batch
    model = BertModel(tiny_config())
    with pytest.raises(ValueError, match="max_position_embeddings"):
        model(torch.ones(1, 65, dtype=torch.long))
    with pytest.raises(ValueError, match=r"input_ids must lie in \[0, 99\)"):
        model(torch.tensor([[1, 99]]))
    with pytest.raises(ValueError, match="token_type_ids must lie"):
        model(ids, mask, types + 1)
    with pytest.raises(ValueError, match="attention_mask has shape"):
        model(ids, mask[:, :5])
    with pytest.raises(ValueError, match=r"\(B, T\) tensor of token ids"):
        model(ids.float())


def test_an_attention_mask_of_other_values_than_0_and_1_is_refused():
    """A mask value 2 would be a weight in the additive mask of the padded path ((1 - 2) * min) but
    a real token to the unpadded path, so the two would disagree: the model refuses it, in one
    ValueError naming the values, before any layer runs."""
    model = BertModel(tiny_config())
    ids = torch.tensor([[2, 5, 6, 3]])
    with pytest.raises(ValueError, match=r"attention_mask must hold 0 \(padding\) and 1 \(real token\) only, got "
                                         r"values \[0, 1, 2\]"):
        model(ids, torch.tensor([[1, 2, 1, 0]]))
    model(ids, torch.tensor([[1, 1, 1, 0]]))  # 0 and 1 pass
