"""The requirement list's BERT-base numbers, read off real tensors of a bert-base-sized model (S3, S4, S7)."""

import pytest
import torch

from minibert import BertConfig, BertForMaskedLM, BertForSequenceClassification, BertModel


@pytest.mark.slow
def test_s3_s4_shapes_and_attention_memory_of_bert_base(monkeypatch):
    """S3: batch 16, length 128, hidden 768, 12 heads, every shape read off the model's own
    tensors during ONE classifier forward `model(input_ids, attention_mask)`:
    encoder output 16x128x768; the per-head query the model hands to attention is
    (B, H, T, D) = 16x12x128x64, so one head's query is 16x128x64 (d_k = 768/12 = 64), and head
    h is columns 64h .. 64h+63 of the query projection's 768 outputs; classifier output 16x2.
    The query is caught where the model uses it: F.scaled_dot_product_attention (use_sdpa=True)
    is wrapped by a spy that records q and calls the real function, once per layer (12 calls).
    S4: one layer's attention probabilities (a second forward, output_attentions=True, which
    takes the written-out path) hold 16*12*128*128 = 3,145,728 elements; as float32 (4 bytes)
    that is 12,582,912 bytes = 12 MiB (12 * 1024 * 1024)."""
    torch.manual_seed(0)
    config = BertConfig.from_preset("bert-base", use_sdpa=True, unpad=False)
    model = BertForSequenceClassification(config, num_labels=2).eval()
    input_ids = torch.randint(1000, 30000, (16, 128))
    attention_mask = torch.ones(16, 128, dtype=torch.long)
    attention_mask[8:, 100:] = 0

    real_sdpa = torch.nn.functional.scaled_dot_product_attention
    seen_q = []

    def spy(q, k, v, *args, **kwargs):
        seen_q.append(q)
        return real_sdpa(q, k, v, *args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    seen = {}

    def keep_as(name):  # a forward hook that stores the module's output and changes nothing
        return lambda module, inputs, out: seen.__setitem__(name, out)

    hooks = [model.bert.register_forward_hook(keep_as("encoder")),
             model.bert.layers[0].attention.query.register_forward_hook(keep_as("query0"))]
    with torch.no_grad():
        logits = model(input_ids, attention_mask).logits
    for h in hooks:
        h.remove()
    monkeypatch.undo()

    assert seen["encoder"].last_hidden_state.shape == (16, 128, 768)
    assert len(seen_q) == 12  # one attention call per layer, each seen by the spy
    assert all(q.shape == (16, 12, 128, 64) for q in seen_q)
    q0 = seen_q[0]  # layer 0's per-head queries, as the model computed them
    assert q0[:, 0].shape == (16, 128, 64)
    for h in (0, 5, 11):  # head h = a contiguous 64-wide slice of the projection, (h d) order
        assert torch.equal(q0[:, h], seen["query0"][..., 64 * h:64 * (h + 1)]), h  # a view of the same values: exact
    assert logits.shape == (16, 2)

    with torch.no_grad():
        out = model.bert(input_ids, attention_mask, output_attentions=True)
    probs = out.attentions[0]
    assert len(out.attentions) == 12
    assert probs.shape == (16, 12, 128, 128) and probs.dtype == torch.float32
    assert probs.numel() == 3_145_728
    assert probs.numel() * probs.element_size() == 12_582_912 == 12 * 2**20


def _count(model):
    return sum(p.numel() for p in model.parameters())


def test_bert_base_parameter_counts():
    """bert-base (V=30522, C=768, L=12, I=3072, P=512, 2 segments):
    embeddings 30522*768 + 512*768 + 2*768 + 2*768 (LayerNorm)          =  23,837,184
    one layer  4*(768*768 + 768) + 2*768*3072 + 3072 + 768 + 4*768     =   7,087,872
    pooler     768*768 + 768                                            =     590,592
    BertModel  23,837,184 + 12*7,087,872 + 590,592                      = 109,482,240
    BertForMaskedLM has no pooler, and an MLM head: dense 590,592 + LayerNorm 1,536 + decoder
    bias 30,522 (the decoder matrix is the word embedding, counted once)
               109,482,240 - 590,592 + 590,592 + 1,536 + 30,522         = 109,514,298
    BertForSequenceClassification, 2 labels: + 768*2 + 2               = 109,483,778"""
    config = BertConfig.from_preset("bert-base")
    assert config == BertConfig()  # the preset is the default
    with torch.device("meta"):  # shapes only: no memory, no init time
        assert _count(BertModel(config)) == 109_482_240
        assert _count(BertForMaskedLM(config)) == 109_514_298
        assert _count(BertForSequenceClassification(config, num_labels=2)) == 109_483_778
