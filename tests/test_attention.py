"""attention.py: the per-head table by hand, and the command end to end on a tiny checkpoint."""

import torch

import attention
from minibert import BertForPreTraining
from minibert.text import train_wordpiece

from conftest import tiny_config


def test_the_head_table_by_hand():
    """Tokens [CLS] a b c [SEP] d [SEP]. Head 1 puts everything on the next token (the last one on
    itself), head 2 spreads evenly (1/7 each). Pairs of neighbouring words: a->b, b->c (d has no
    word after it), so head 1 gives 1.0 on the next token and 0.0 on the previous; head 2 gives
    1/7 = 0.143 for both. [CLS] (row 0) in head 1 looks at a only: 0 on [CLS], 0 on the [SEP]s;
    in head 2, 1/7 on [CLS] and 2/7 = 0.286 on the two [SEP]s."""
    tokens = ["[CLS]", "a", "b", "c", "[SEP]", "d", "[SEP]"]
    T = len(tokens)
    nxt = torch.zeros(T, T)
    for i in range(T):
        nxt[i, min(i + 1, T - 1)] = 1
    probs = torch.stack([nxt, torch.full((T, T), 1 / T)])[None]          # (L=1, H=2, T, T)
    assert attention.head_table(tokens, probs) == [["1", "1", "1.000", "0.000", "0.000", "0.000"],
                                                   ["1", "2", "0.143", "0.143", "0.143", "0.286"]]


def test_the_command_draws_every_layer_and_head(tmp_path, capsys):
    """Two checkpoints of one size are drawn one below the other; each gets its table (a row per
    layer and head); the picture is written."""
    tok = train_wordpiece(["the story is simple and the ending is easy to guess ."] * 20, vocab_size=60)
    for name, seed in (("a", 0), ("b", 1)):
        torch.manual_seed(seed)
        BertForPreTraining(tiny_config(vocab_size=tok.get_vocab_size())).save_pretrained(tmp_path / name, tokenizer=tok)
    attention.main(["--checkpoint", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "att.png")])
    out = capsys.readouterr().out
    assert out.count("| 2 | 4 |") == 2 and out.count("| 1 | 1 |") == 2, out   # 2 layers x 4 heads, twice
    assert (tmp_path / "att.png").stat().st_size > 10_000
