"""Parity with HuggingFace transformers, offline: tiny random HF models are built here,
saved, loaded into minibert (and the reverse), and compared on outputs, loss and the
gradient of every parameter, fp32. The two codes compute the same function in other orders (e.g.
q.k x D^-0.5 there, / sqrt D here): about 20 chained sums of at most 37 terms of size <= 4, 740
roundings. Roundings of either sign, independent, add up as the square root of their number:
sqrt(740) x 6.0e-8 x 4 = 6.5e-6, hence atol 1e-5, the parity minibert promises; measured <= 8e-7.
(Every rounding falling the same way would give 740 x 6.0e-8 x 4 = 1.8e-4, the bound conftest's
TINY_REORDER rounds up to 1e-3 for the other comparisons; it has never been seen.) A wrong weight
name, transpose, mask or head moves some output or gradient by 0.1 or more."""

import pytest
import torch
import transformers

import minibert
from minibert.checkpoint import to_hf_name

from conftest import perturb_, tiny_config

ATOL = 1e-5
PAIRS = [(minibert.BertModel, transformers.BertModel),
         (minibert.BertForMaskedLM, transformers.BertForMaskedLM),
         (minibert.BertForPreTraining, transformers.BertForPreTraining),
         (minibert.BertForNextSentencePrediction, transformers.BertForNextSentencePrediction),
         (minibert.BertForSequenceClassification, transformers.BertForSequenceClassification)]
IDS = [ours.__name__ for ours, _ in PAIRS]


def hf_config(attn="eager"):
    c = tiny_config()
    return transformers.BertConfig(
        vocab_size=c.vocab_size, hidden_size=c.hidden_size, num_hidden_layers=c.num_hidden_layers,
        num_attention_heads=c.num_attention_heads, intermediate_size=c.intermediate_size,
        max_position_embeddings=c.max_position_embeddings, num_labels=3, attn_implementation=attn)


def run(model, batch, is_hf):
    """Forward + backward with a loss that touches every output; returns (outputs, loss)."""
    ids, mask, types = batch
    g = torch.Generator().manual_seed(99)
    if isinstance(model, (minibert.BertModel, transformers.BertModel)):
        out = model(input_ids=ids, attention_mask=mask, token_type_ids=types)
        h, p = out.last_hidden_state, out.pooler_output
        w_h, w_p = torch.randn(h.shape, generator=g), torch.randn(p.shape, generator=g)
        # an O(1) scalar, like the other heads' losses; padding positions are left out
        loss = (h * w_h * mask[..., None]).sum() / mask.sum() + (p * w_p).mean()
        outputs = {"last_hidden_state": h * mask[..., None], "pooler_output": p}
    elif isinstance(model, (minibert.BertForMaskedLM, transformers.BertForMaskedLM)):
        labels = torch.full_like(ids, -100)
        labels[0, 3], labels[1, 2], labels[2, 8], labels[2, 1] = 17, 40, 3, 98
        out = model(input_ids=ids, attention_mask=mask, token_type_ids=types, labels=labels)
        loss, outputs = out.loss, {"logits": out.logits, "loss": out.loss}
    elif isinstance(model, (minibert.BertForPreTraining, transformers.BertForPreTraining)):
        labels = torch.full_like(ids, -100)
        labels[0, 3], labels[1, 2], labels[2, 8], labels[2, 1] = 17, 40, 3, 98
        out = model(input_ids=ids, attention_mask=mask, token_type_ids=types, labels=labels,
                    next_sentence_label=torch.tensor([0, 1, 1]))
        loss, outputs = out.loss, {"prediction_logits": out.prediction_logits,
                                   "seq_relationship_logits": out.seq_relationship_logits, "loss": out.loss}
    elif isinstance(model, (minibert.BertForNextSentencePrediction, transformers.BertForNextSentencePrediction)):
        out = model(input_ids=ids, attention_mask=mask, token_type_ids=types, labels=torch.tensor([0, 1, 1]))
        loss, outputs = out.loss, {"logits": out.logits, "loss": out.loss}
    else:
        out = model(input_ids=ids, attention_mask=mask, token_type_ids=types, labels=torch.tensor([2, 0, 1]))
        loss, outputs = out.loss, {"logits": out.logits, "loss": out.loss}
    loss.backward()
    return outputs, loss


def compare(ours, hf, batch):
    """Max |difference| over every output and every parameter's gradient."""
    ours.eval(), hf.eval()
    a, _ = run(ours, batch, False)
    b, _ = run(hf, batch, True)
    worst = {}
    for k in a:
        worst[k] = (a[k] - b[k]).abs().max().item()
    hf_params = dict(hf.named_parameters())
    grad = 0.0
    for name, p in ours.named_parameters():
        q = hf_params[to_hf_name(name)]
        assert p.shape == q.shape, name
        if p.grad is None or q.grad is None:
            assert p.grad is None and q.grad is None, name
            continue
        grad = max(grad, (p.grad - q.grad).abs().max().item())
    worst["every gradient"] = grad
    worst_grad_size = max(p.grad.abs().max().item() for p in ours.parameters() if p.grad is not None)
    assert worst_grad_size > 1e-2, "gradients too small for atol to mean anything"
    assert len(hf_params) == len(list(ours.parameters()))
    print(f"\nPARITY {type(ours).__name__}: " + ", ".join(f"{k} {v:.2e}" for k, v in worst.items()))
    for k, v in worst.items():
        assert v < ATOL, f"{type(ours).__name__} {k}: max |diff| {v:.3e} >= {ATOL}"
    return worst


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("ours_cls,hf_cls", PAIRS, ids=IDS)
def test_transformers_safetensors_into_minibert(tmp_path, batch, ours_cls, hf_cls, attn):
    """HF model (random, every parameter perturbed) -> save_pretrained (safetensors) ->
    minibert.from_pretrained; HF eager vs our manual path, HF sdpa vs our SDPA path."""
    hf = perturb_(hf_cls(hf_config(attn)))
    hf.save_pretrained(tmp_path)
    ours = ours_cls.from_pretrained(tmp_path, use_sdpa=attn == "sdpa")
    compare(ours, hf, batch)


@pytest.mark.parametrize("ours_cls,hf_cls", PAIRS, ids=IDS)
def test_transformers_bin_into_minibert(tmp_path, batch, ours_cls, hf_cls):
    """A pytorch_model.bin written with torch.save of the FULL state dict (tied aliases
    cls.predictions.decoder.* included, as real .bin checkpoints have them)."""
    hf = perturb_(hf_cls(hf_config()))
    hf.config.save_pretrained(tmp_path)
    state = hf.state_dict()
    if hf_cls is transformers.BertForMaskedLM:
        assert "cls.predictions.decoder.weight" in state and "cls.predictions.decoder.bias" in state
    torch.save(state, tmp_path / "pytorch_model.bin")
    ours = ours_cls.from_pretrained(tmp_path)
    compare(ours, hf, batch)


@pytest.mark.parametrize("ours_cls,hf_cls", PAIRS, ids=IDS)
def test_minibert_checkpoint_into_transformers(tmp_path, batch, ours_cls, hf_cls):
    """minibert (random, perturbed) -> save_pretrained -> transformers.from_pretrained with no
    missing, unexpected or mismatched key -> same numbers."""
    ours = perturb_(ours_cls(tiny_config(), 3) if ours_cls is minibert.BertForSequenceClassification
                    else ours_cls(tiny_config()))
    ours.save_pretrained(tmp_path)
    hf, info = hf_cls.from_pretrained(tmp_path, output_loading_info=True, attn_implementation="eager")
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    compare(ours, hf, batch)
