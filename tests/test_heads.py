"""The three heads: MLM (tied decoder, sparse projection), HF's classifier, the exercise's."""

import pytest
import torch
import torch.nn.functional as F

from minibert import BertConfig, BertForClassification, BertForMaskedLM, BertForSequenceClassification, BertModel

from conftest import assert_close, perturb_, tiny_config


def _labels(ids, positions):
    labels = torch.full_like(ids, -100)
    for b, t in positions:
        labels[b, t] = ids[b, t]
    return labels


def test_mlm_decoder_weight_is_the_word_embedding(batch):
    """The decoder IS the word-embedding matrix E (tied): logits = LN(GELU(dense(h))) @ E^T + b.
    Zeroing row 7 of E makes logit 7 equal the bias b[7] at every position, and the model has
    exactly one (V, C) = (99, 32) parameter."""
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
    logits at those positions, and loss and every gradient agree (fp32, atol 1e-6)."""
    ids, mask, types = batch
    labels = _labels(ids, [(0, 1), (0, 8), (1, 2), (2, 5)])
    dense = perturb_(BertForMaskedLM(tiny_config())).eval()
    sparse = BertForMaskedLM(tiny_config()).eval()
    sparse.load_state_dict(dense.state_dict())
    a = dense(ids, mask, types, labels=labels)
    b = sparse(ids, mask, types, labels=labels, masked_only=True)
    assert b.logits.shape == (4, 99)
    assert_close(b.logits, a.logits[labels != -100], atol=1e-6, what="logits at targets")
    assert_close(b.loss, a.loss, atol=1e-6, what="loss")
    a.loss.backward()
    b.loss.backward()
    for (name, p), q in zip(dense.named_parameters(), sparse.parameters(), strict=True):
        assert_close(q.grad, p.grad, atol=1e-6, what=f"grad {name}")
    with pytest.raises(ValueError, match="needs labels"):
        sparse(ids, mask, types, masked_only=True)


def test_sequence_classification_is_pooler_dropout_linear(batch):
    """HF's layout: logits = classifier(dropout(tanh(pooler([CLS])))); the loss is the mean
    cross-entropy over the batch."""
    ids, mask, types = batch
    model = perturb_(BertForSequenceClassification(tiny_config(), num_labels=3)).eval()
    labels = torch.tensor([0, 2, 1])
    out = model(ids, mask, types, labels=labels)
    pooled = model.bert(ids, mask, types).pooler_output
    assert_close(out.logits, model.classifier(pooled), atol=1e-6, what="logits")
    assert_close(out.loss, F.cross_entropy(out.logits, labels), atol=1e-7, what="loss")
    assert model.config.id2label == {0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"}
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 3\)"):
        model(ids, mask, types, labels=torch.tensor([0, 3, 1]))


def test_s6_exercise_head_uses_cls_and_one_linear(batch):
    """S6: logits = Linear(last_hidden_state[:, 0, :]); with labels it returns
    (cross_entropy(logits, labels), logits), without labels just the logits."""
    ids, mask, _ = batch
    backbone = perturb_(BertModel(tiny_config()))
    model = BertForClassification(backbone, num_labels=2).eval()
    assert model.bert is backbone and isinstance(model.classifier, torch.nn.Linear)
    labels = torch.tensor([1, 0, 1])
    loss, logits = model(ids, mask, labels)
    cls = backbone(ids, mask).last_hidden_state[:, 0, :]  # (B, C)
    assert_close(logits, model.classifier(cls), atol=1e-6, what="logits from [CLS]")
    assert_close(loss, F.cross_entropy(logits, labels), atol=1e-7, what="loss")
    only = model(ids, mask)
    assert torch.is_tensor(only) and torch.equal(only, logits)


def test_s7_linear_head_of_bert_base_width_has_1538_parameters():
    """S7: hidden 768, 2 labels: a 768x2 weight plus 2 biases = 768*2 + 2 = 1538.
    (One layer and a 100-word vocabulary keep the backbone small; the head only sees C.)"""
    backbone = BertModel(BertConfig(hidden_size=768, num_hidden_layers=1, vocab_size=100))
    model = BertForClassification(backbone, num_labels=2)
    assert sum(p.numel() for p in model.classifier.parameters()) == 1538
    total = sum(p.numel() for p in model.parameters())
    assert total - sum(p.numel() for p in backbone.parameters()) == 1538
