"""The three heads: MLM (tied decoder, sparse projection), HF's classifier, the exercise's."""

import contextlib
import math

import pytest
import torch

from minibert import BertConfig, BertForClassification, BertForMaskedLM, BertForSequenceClassification, BertModel

from conftest import TINY_REORDER, assert_close, perturb_, tiny_config


def _labels(ids, positions):
    labels = torch.full_like(ids, -100)
    for b, t in positions:
        labels[b, t] = ids[b, t]
    return labels


def test_mlm_decoder_weight_is_the_word_embedding(batch):
    """The decoder IS the word-embedding matrix E (tied): logits = LN(GELU(dense(h))) @ E^T + b.
    Zeroing row 7 of E makes logit 7 equal the bias b[7] at every position, and the model has
    exactly one (V, C) = (99, 32) parameter. Exact in float32 (0 x h sums to 0, plus b[7]);
    atol 1e-6 is slack, far below |h . E[7]| ~ 0.5 that an untied decoder would leave."""
    ids, mask, types = batch
    model = perturb_(BertForMaskedLM(tiny_config())).eval()
    with torch.no_grad():
        model.bert.embeddings.word_embeddings.weight[7] = 0.0
        logits = model(ids, mask, types).logits  # (B, T, V)
    assert_close(logits[..., 7], model.mlm_head.bias[7].expand(3, 10), atol=1e-6, what="logit of token 7")
    assert sum(p.shape == (99, 32) for p in model.parameters()) == 1


def test_mlm_gradient_reaches_embeddings_through_the_decoder(batch):
    """Token 50 never occurs in the input, so its embedding row can only get a gradient
    through the tied decoder."""
    ids, mask, types = batch
    ids = ids.masked_fill(ids == 50, 51)
    model = BertForMaskedLM(tiny_config())
    model(ids, mask, types, labels=_labels(ids, [(0, 3), (2, 4)])).loss.backward()
    assert model.bert.embeddings.word_embeddings.weight.grad[50].abs().sum() > 0


def test_sparse_mlm_head_equals_dense(batch):
    """masked_only=True scores only the N labelled positions: its logits are the dense
    logits at those positions, and loss and every gradient agree. The encoder runs the same
    kernels on one shape; the head's matmuls run on 4 rows against 30, which may sum in another
    order (atol TINY_REORDER, conftest; 0 and 1.5e-8 measured). Logits at the neighbouring
    positions differ by up to 2.2."""
    ids, mask, types = batch
    labels = _labels(ids, [(0, 1), (0, 8), (1, 2), (2, 5)])
    dense = perturb_(BertForMaskedLM(tiny_config())).eval()
    sparse = BertForMaskedLM(tiny_config()).eval()
    sparse.load_state_dict(dense.state_dict())
    a = dense(ids, mask, types, labels=labels)
    b = sparse(ids, mask, types, labels=labels, masked_only=True)
    assert b.logits.shape == (4, 99)
    assert_close(b.logits, a.logits[labels != -100], atol=TINY_REORDER, what="logits at targets")
    assert_close(b.loss, a.loss, atol=TINY_REORDER, what="loss")
    a.loss.backward()
    b.loss.backward()
    for (name, p), q in zip(dense.named_parameters(), sparse.parameters(), strict=True):
        assert_close(q.grad, p.grad, atol=TINY_REORDER, what=f"grad {name}")
    with pytest.raises(ValueError, match="needs labels"):
        sparse(ids, mask, types, masked_only=True)


@contextlib.contextmanager
def watching(**modules):
    """Forward hooks that record, per name, the (positional inputs, output) of the module's last
    call during the `with` block; they change nothing and are removed on exit."""
    seen = {}
    handles = [m.register_forward_hook(lambda mod, args, out, name=name: seen.__setitem__(name, (args, out)))
               for name, m in modules.items()]
    try:
        yield seen
    finally:
        for h in handles:
            h.remove()


LN3 = math.log(3)


def _hand_classifier_(linear):
    """Weight 0, bias (0, ln 3): every row's logits are (0, ln 3) whatever the encoder says, so
    softmax = (e^0, e^ln3) / (1 + 3) = (1/4, 3/4)."""
    with torch.no_grad():
        linear.weight.zero_()
        linear.bias.copy_(torch.tensor([0.0, LN3]))


HAND_LOSS_101 = 0.6538862
"""Mean cross-entropy of labels (1, 0, 1) under softmax (1/4, 3/4) in every row:
-ln(3/4) = ln 4 - ln 3 = 1.3862944 - 1.0986123 = 0.2876821 for label 1, -ln(1/4) = ln 4 =
1.3862944 for label 0; (0.2876821 + 1.3862944 + 0.2876821) / 3 = 1.9616586 / 3 = 0.6538862.
(Swapped labels (0, 1, 0) would give (2 * 1.3862944 + 0.2876821) / 3 = 1.0200903; a sum instead
of a mean 1.9616586.)"""


def test_sequence_classification_is_pooler_dropout_linear(batch):
    """HF's layout, observed on the model's own tensors in one eval forward: the pooler reads
    the [CLS] row of the encoder output, pooler_output = tanh(pooler(h[:, 0])), the classifier's
    input is that pooled vector (eval: dropout is the identity), and the returned logits are the
    classifier's output. No labels, no loss. The torch.equal checks compare a tensor with itself
    as two hooks saw it (exact); tanh(pooler_out) recomputes the model's own tanh on the same
    values, one rounding at most (u |tanh| <= 6.0e-8 < atol 1e-7)."""
    ids, mask, types = batch
    model = perturb_(BertForSequenceClassification(tiny_config(), num_labels=2)).eval()
    with torch.no_grad(), watching(bert=model.bert, pooler=model.bert.pooler, classifier=model.classifier) as seen:
        out = model(ids, mask, types)
    encoded = seen["bert"][1]
    (pooler_in,), pooler_out = seen["pooler"]
    (classifier_in,), classifier_out = seen["classifier"]
    assert torch.equal(pooler_in, encoded.last_hidden_state[:, 0])  # (B, C): the [CLS] row
    assert_close(encoded.pooler_output, torch.tanh(pooler_out), atol=1e-7, what="tanh pooler")
    assert torch.equal(classifier_in, encoded.pooler_output)
    assert torch.equal(out.logits, classifier_out) and out.logits.shape == (3, 2)
    assert out.loss is None
    assert model.config.id2label == {0: "LABEL_0", 1: "LABEL_1"}
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 2\)"):
        model(ids, mask, types, labels=torch.tensor([0, 2, 1]))


def test_sequence_classification_loss_by_hand(batch):
    """Classifier weight 0 and bias (0, ln 3): logits (0, ln 3) = (0, 1.0986123) in every row,
    softmax (1/4, 3/4). Labels (1, 0, 1) give the mean cross-entropy
    (0.2876821 + 1.3862944 + 0.2876821) / 3 = 0.6538862 (see HAND_LOSS_101); atol 1e-6: a zero
    weight gives the bias exactly (logits: the float32 ln 3 is within u x 1.1 = 6.6e-8), and the
    loss is a few float32 roundings of values <= 1.4 (log-softmax of 2 terms, mean of 3): ~6 u x 1.4
    = 5e-7, plus HAND_LOSS_101's 7-decimal rounding (< 5e-8). Swapped labels are off by 0.37."""
    ids, mask, types = batch
    model = perturb_(BertForSequenceClassification(tiny_config(), num_labels=2)).eval()
    _hand_classifier_(model.classifier)
    with torch.no_grad():
        out = model(ids, mask, types, labels=torch.tensor([1, 0, 1]))
    assert_close(out.logits, torch.tensor([[0.0, LN3]] * 3), atol=1e-6, what="logits")
    assert_close(out.loss, HAND_LOSS_101, atol=1e-6, what="loss")


@pytest.mark.parametrize("overrides, p, low, high", [
    (dict(classifier_dropout=0.25), 0.25, 0.073, 0.427),
    (dict(classifier_dropout=None, hidden_dropout_prob=0.3), 0.3, 0.113, 0.487),
], ids=["explicit-0.25", "none-means-hidden-0.3"])
def test_classifier_dropout_acts_in_train_mode_only(batch, overrides, p, low, high):
    """The classifier's dropout p is classifier_dropout, or hidden_dropout_prob when that is None
    (HF's rule): explicit p = 0.25 (the encoder keeps hidden dropout 0.1); None with hidden
    dropout 0.3 gives p = 0.3. In train mode each of the 3 x 32 = 96 units of the pooled vector
    reaching the classifier is either 0 (dropped) or pooled / (1 - p) (inverted dropout: the mean
    is kept): 4/3 = 1.3333333 for 0.25, 10/7 = 1.4285714 for 0.3. The dropped fraction is ~p
    with sd sqrt(p (1 - p) / 96): 0.0442 for 0.25, so 4 sd puts it in (0.073, 0.427); 0.0468 for
    0.3, so (0.113, 0.487). A classifier that used another rate (hidden 0.1 for the explicit
    value, 0 or the attention dropout 0.1 for None) would scale by 1, or by 1/0.9 = 1.1111111,
    and fail the atol 1e-6 check (kept = pooled / (1 - p), |pooled| <= 1: two float32 roundings,
    2 u x 1.43 = 1.7e-7, against a wrong scale's >= 0.2 x |pooled|); with p = 0 it would also drop nothing.
    Both tensors are the model's own, from the same forward (hooks on bert and classifier).
    torch.manual_seed(0) twice: equal logits (the same masks, the same kernels: bit for bit); seeds 0
    and 1: different logits. Eval mode: the classifier's input IS the pooled vector and any two
    forwards agree, whatever the seed."""
    ids, mask, types = batch
    model = perturb_(BertForSequenceClassification(tiny_config(**overrides), num_labels=2))

    def forward(seed):
        torch.manual_seed(seed)
        with torch.no_grad(), watching(bert=model.bert, classifier=model.classifier) as seen:
            logits = model(ids, mask, types).logits
        return logits, seen["bert"][1].pooler_output, seen["classifier"][0][0]

    model.train()
    logits0, pooled, classifier_in = forward(0)
    kept = classifier_in != 0
    assert_close(classifier_in[kept], pooled[kept] / (1 - p), atol=1e-6, what="kept units x 1/(1-p)")
    dropped = 1 - kept.float().mean().item()
    assert low < dropped < high, dropped
    again, _, _ = forward(0)
    other, _, _ = forward(1)
    assert torch.equal(again, logits0)
    assert (other - logits0).abs().max() > 1e-4

    model.eval()
    e0, pooled, classifier_in = forward(0)
    e1, _, _ = forward(1)
    assert torch.equal(classifier_in, pooled) and torch.equal(e0, e1)


def test_s6_exercise_head_uses_cls_and_one_linear(batch):
    """S6, observed on the model's own tensors: the classifier's input is the [CLS] row
    last_hidden_state[:, 0, :] of the backbone's output (not the pooler's output), and the
    returned logits are that one Linear's output (torch.equal: the hooks saw these very values).
    The backbone's pooler is removed (never computed, trained or saved). Without labels it
    returns the logits alone."""
    ids, mask, _ = batch
    backbone = perturb_(BertModel(tiny_config()))
    model = BertForClassification(backbone, num_labels=2).eval()
    assert model.bert is backbone and isinstance(model.classifier, torch.nn.Linear)
    with torch.no_grad(), watching(bert=backbone, classifier=model.classifier) as seen:
        logits = model(ids, mask)
    encoded = seen["bert"][1]
    (classifier_in,), classifier_out = seen["classifier"]
    assert torch.is_tensor(logits) and logits.shape == (3, 2)
    assert torch.equal(classifier_in, encoded.last_hidden_state[:, 0, :])  # (B, C)
    assert backbone.pooler is None and encoded.pooler_output is None  # no pooler between [CLS] and the head
    assert torch.equal(logits, classifier_out)


def test_s6_exercise_head_loss_by_hand(batch):
    """S6 with labels returns (loss, logits). Classifier weight 0, bias (0, ln 3): logits
    (0, 1.0986123) per row, softmax (1/4, 3/4); labels (1, 0, 1) give
    (0.2876821 + 1.3862944 + 0.2876821) / 3 = 0.6538862 (see HAND_LOSS_101); atol 1e-6, derived
    as in test_sequence_classification_loss_by_hand. Without labels the same call returns just those
    logits (the same kernels on the same input: bit for bit)."""
    ids, mask, _ = batch
    model = BertForClassification(perturb_(BertModel(tiny_config())), num_labels=2).eval()
    _hand_classifier_(model.classifier)
    with torch.no_grad():
        loss, logits = model(ids, mask, torch.tensor([1, 0, 1]))
        only = model(ids, mask)
    assert_close(logits, torch.tensor([[0.0, LN3]] * 3), atol=1e-6, what="logits")
    assert_close(loss, HAND_LOSS_101, atol=1e-6, what="loss")
    assert torch.is_tensor(only) and torch.equal(only, logits)


def test_s7_linear_head_of_bert_base_width_has_1538_parameters():
    """S7: hidden 768, 2 labels: a 768x2 weight plus 2 biases = 768*2 + 2 = 1538.
    (One layer and a 100-word vocabulary keep the backbone small; the head only sees C.)"""
    backbone = BertModel(BertConfig(hidden_size=768, num_hidden_layers=1, vocab_size=100))
    model = BertForClassification(backbone, num_labels=2)
    assert sum(p.numel() for p in model.classifier.parameters()) == 1538
    total = sum(p.numel() for p in model.parameters())
    assert total - sum(p.numel() for p in backbone.parameters()) == 1538
