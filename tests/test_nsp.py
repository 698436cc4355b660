"""BERT's next-sentence head (BertForPreTraining, BertForNextSentencePrediction): the loss by
hand, and which classes keep, drop or start the head when a checkpoint is loaded. Parity with
transformers is in test_parity_hf.py."""

import logging
import math

import pytest
import torch

from minibert import BertForMaskedLM, BertForNextSentencePrediction, BertForPreTraining, BertModel
from minibert.model import load_model

from conftest import assert_close, perturb_, tiny_config


def test_nsp_loss_by_hand_and_the_sum_with_the_mlm_loss(batch):
    """With the NSP head's weight zero and bias (2, 0), every pair's logits are (2, 0). Label 0
    (B follows A) costs -log(e^2 / (e^2 + 1)) = log(1 + e^-2) = 0.126928, label 1 costs
    log(1 + e^2) = 2.126928; labels (0, 1, 1) average (0.126928 + 2 x 2.126928) / 3 = 1.460261.
    The total is that plus the MLM loss of the same weights in BertForMaskedLM (the encoder and
    MLM head are the same tensors, run by the same kernels on the same shapes: atol 0).
    Tolerances: 1.460261 is the float64 by_hand to 6 decimals (3.4e-7 off): abs 1e-6. The float32
    NSP loss: ~4 roundings of values <= 2.2 per log-softmax, then a mean of 3: <= 8e-7 < 1e-6. The
    total adds one float32 rounding of ~6.5 (u x 6.5 = 3.9e-7) to that: 1.2e-6, abs 2e-6. A loss that
    is not the sum (a mean, a part alone) is off by 1 or more."""
    ids, mask, types = batch
    torch.manual_seed(0)
    model = perturb_(BertForPreTraining(tiny_config())).eval()
    with torch.no_grad():
        model.nsp_head.weight.zero_()
        model.nsp_head.bias.copy_(torch.tensor([2.0, 0.0]))
    labels = torch.full_like(ids, -100)
    labels[0, 3], labels[1, 2], labels[2, 1] = 17, 40, 98
    out = model(ids, mask, types, labels=labels, next_sentence_label=torch.tensor([0, 1, 1]))
    by_hand = (math.log1p(math.exp(-2)) + 2 * math.log1p(math.exp(2))) / 3
    assert by_hand == pytest.approx(1.460261, abs=1e-6)
    assert out.nsp_loss.item() == pytest.approx(by_hand, abs=1e-6)
    mlm = BertForMaskedLM(tiny_config()).eval()
    mlm.load_state_dict({k: v for k, v in model.state_dict().items() if not k.startswith(("nsp_head", "bert.pooler"))})
    assert_close(out.mlm_loss, mlm(ids, mask, types, labels=labels).loss, atol=0, what="the MLM part")
    assert out.loss.item() == pytest.approx(out.mlm_loss.item() + by_hand, abs=2e-6)
    assert model(ids, mask, types, labels=labels).loss is None  # one label alone: no total, as in HF
    assert out.seq_relationship_logits.shape == (3, 2)


def test_nsp_head_is_kept_dropped_or_started_with_an_info_line(tmp_path, batch, caplog):
    """A BertForPreTraining checkpoint: BertForPreTraining and BertForNextSentencePrediction load
    its NSP head (same logits); BertForMaskedLM and BertModel drop it in an info line and give
    the same MLM logits / hidden states. An MLM checkpoint into BertForPreTraining starts a new
    pooler and NSP head, in an info line. The logits compared are exact (atol 0): the same bytes of
    weight, run by the same kernels on the same shapes."""
    ids, mask, types = batch
    src = perturb_(BertForPreTraining(tiny_config())).eval()
    src.save_pretrained(tmp_path / "pt")
    caplog.set_level(logging.INFO, logger="minibert")
    again = load_model(tmp_path / "pt").eval()
    assert type(again) is BertForPreTraining and not caplog.records
    assert_close(again(ids, mask, types).seq_relationship_logits, src(ids, mask, types).seq_relationship_logits,
                 atol=0, what="NSP logits after a round trip")
    nsp = BertForNextSentencePrediction.from_pretrained(tmp_path / "pt").eval()
    assert_close(nsp(ids, mask, types).logits, src(ids, mask, types).seq_relationship_logits, atol=0, what="NSP")
    assert "dropped the masked-LM head's tensors ['cls.predictions.bias'" in caplog.text
    caplog.clear()
    mlm = BertForMaskedLM.from_pretrained(tmp_path / "pt").eval()
    assert "dropped the next-sentence head's tensors ['cls.seq_relationship.bias', 'cls.seq_relationship.weight']" \
        in caplog.text
    assert_close(mlm(ids, mask, types).logits, src(ids, mask, types).prediction_logits, atol=0, what="MLM logits")
    caplog.clear()
    BertModel.from_pretrained(tmp_path / "pt")
    assert "'cls.seq_relationship.weight'" in caplog.text and "dropped the task head's tensors" in caplog.text
    caplog.clear()
    mlm.save_pretrained(tmp_path / "mlm")
    BertForPreTraining.from_pretrained(tmp_path / "mlm")
    assert "initialised a new pooler and next-sentence head ['bert.pooler.dense.bias'" in caplog.text
