"""The seed's BERT-base numbers, read off real tensors of a bert-base-sized model (S3, S4, S7)."""

import pytest
import torch
from einops import rearrange

from minibert import BertConfig, BertForMaskedLM, BertForSequenceClassification, BertModel


@pytest.mark.slow
def test_s3_s4_shapes_and_attention_memory_of_bert_base():
    """S3: batch 16, length 128, hidden 768, 12 heads: input_ids and attention_mask 16x128,
    encoder output 16x128x768, one head's query 16x128x64 (d_k = 768/12 = 64), classifier
    output 16x2.
    S4: one layer's attention probabilities hold 16*12*128*128 = 3,145,728 elements; as
    float32 (4 bytes) that is 12,582,912 bytes = 12 MiB (12 * 1024 * 1024)."""
    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig.from_preset("bert-base"), num_labels=2).eval()
    input_ids = torch.randint(1000, 30000, (16, 128))
    attention_mask = torch.ones(16, 128, dtype=torch.long)
    attention_mask[8:, 100:] = 0
    assert input_ids.shape == attention_mask.shape == (16, 128)
    queries = []
    layer0 = model.bert.layers[0].attention
    hook = layer0.query.register_forward_hook(lambda m, i, out: queries.append(out))
    with torch.no_grad():
        out = model.bert(input_ids, attention_mask, output_attentions=True)
        logits = model.classifier(model.dropout(out.pooler_output))
    hook.remove()
    assert out.last_hidden_state.shape == (16, 128, 768)
    q = rearrange(queries[0], "b t (h d) -> b h t d", h=layer0.n_head)  # as the model splits it
    assert q[:, 0].shape == (16, 128, 64)
    assert logits.shape == (16, 2)
    probs = out.attentions[0]
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
