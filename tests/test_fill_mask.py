"""Fill-mask: minibert.fill_mask (the library) and fill_mask.py (the command).

The tokenizer is BERT's WordPiece over a fixed 14-token vocabulary ([MASK] = 4; `cats` is
`cat ##s`); the models are 2-layer, 32-wide BERTs with 16 positions.
"""

import io
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import transformers
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

import fill_mask as command
from data.prepare import fetch_minilm
from minibert import BertForMaskedLM, BertForSequenceClassification, BertModel
from minibert.fill_mask import FillMaskError, fill_mask
from minibert.text import SPECIAL_TOKENS, lines_of

from conftest import assert_close, perturb_, refusal, tiny_config

REPO = Path(__file__).resolve().parents[1]
VOCAB = [*SPECIAL_TOKENS, ".", "a", "the", "cat", "dog", "see", "like", "##s", "##d"]
TEXTS = ["the [MASK] sees the dogs .",             # one [MASK]
         "[MASK] cats like the [MASK] .",           # two, in different contexts
         "a [MASK]",                                # short: padded when batched with the others
         "the dog sees [MASK] cat [MASK] [MASK] ."]  # three
LONG = "the cat sees the dog the cats see the dogs . [MASK]"  # 15 tokens + [CLS] and [SEP]


def wordpiece() -> Tokenizer:
    """BERT's tokenizer (lower-cased, [CLS] text [SEP]) with the fixed vocabulary VOCAB."""
    tok = Tokenizer(models.WordPiece({t: i for i, t in enumerate(VOCAB)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.add_special_tokens(list(SPECIAL_TOKENS))
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]",
                                                       special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    return tok


@pytest.fixture(scope="module")
def tok():
    return wordpiece()


def config(tok):
    return tiny_config(vocab_size=tok.get_vocab_size(), max_position_embeddings=16)


@pytest.fixture(scope="module")
def model(tok):
    """Every parameter perturbed, so that each position has its own, peaked distribution."""
    torch.manual_seed(0)
    return perturb_(BertForMaskedLM(config(tok)), scale=0.5).eval()


def head_only(tok, logits: dict[str, float]) -> BertForMaskedLM:
    """A model whose logits are the same at every position: the head's dense layer is zeroed,
    so h = LayerNorm(GELU(0)) = LayerNorm's bias = 0, and logits = 0 @ E^T + b = b, with
    b[token] = `logits`' values and 0 for every other token."""
    m = BertForMaskedLM(config(tok))
    with torch.no_grad():
        m.mlm_head.dense.weight.zero_()
        m.mlm_head.dense.bias.zero_()
        for token, value in logits.items():
            m.mlm_head.bias[tok.token_to_id(token)] = value
    return m


def test_probabilities_are_the_softmax_of_the_logits_worked_by_hand(tok):
    """logits b: ln 6 for `cat`, ln 3 for the piece `##s`, 0 for the other 12 of V = 14 tokens.
    softmax: Z = 6 + 3 + 12 = 21, so p(cat) = 6/21 = 0.28571 and p(##s) = 3/21 = 0.14286; a
    piece comes back as the vocabulary entry `##s`, its `##` kept. atol 1e-6: the logits are the bias
    exactly, and softmax's 14-term sum and few roundings move p <= 0.29 by <= 16 u x 0.29 = 2.8e-7;
    a Z without the 12 zero logits would give 6/9 = 0.67."""
    assert tok.get_vocab_size() == 14
    m = head_only(tok, {"cat": math.log(6), "##s": math.log(3)})
    [[guesses]] = fill_mask(m, tok, ["the [MASK] sees the dogs ."], k=2)
    assert [g.token for g in guesses] == ["cat", "##s"]
    assert [g.token_id for g in guesses] == [tok.token_to_id("cat"), tok.token_to_id("##s")]
    assert_close(torch.tensor([g.probability for g in guesses]), torch.tensor([6 / 21, 3 / 21]), atol=1e-6)


def reference(model, tok, text: str, k: int):
    """Per [MASK] of one text, unbatched: the top k of softmax(the model's own (T, V) logits at
    that position) as (token ids, probabilities)."""
    ids = tok.encode(text).ids
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0]  # (T, V)
    top = [logits[t].softmax(-1).topk(k) for t, i in enumerate(ids) if i == tok.token_to_id("[MASK]")]
    return [(t.indices.tolist(), t.values) for t in top]


# Both sides of a comparison run the same float32 arithmetic on batches of other shapes (or in
# transformers' code), so the CPU's kernels may split and order each sum differently (they do: AVX-512
# and AVX2 machines differ). A sum of n float32 terms, reordered, moves by at most n u times the sum
# of its terms' |.| (u = 2^-24 = 6.0e-8). A logit here is the end of about 20 chained sums (9 a layer:
# a projection; attention's scores, normaliser and weighted sum; the output projection; two
# feed-forward sums; two LayerNorms; then the head's 2) of at most n = 37 terms, LayerNorm keeping
# each at the scale of the logits, |z| <= 6.4 in these fixtures, except the decoder's last sum, whose
# 32 terms add up to 19: 19 x 37 x 6.0e-8 x 6.4 + 32 x 6.0e-8 x 19 = 3.1e-4. A probability moves by
# at most half that (softmax's slope is at most 1/2): 1.5e-4, so 2e-4. (Measured: 1.8e-6 at most.)
ROUNDING = 2e-4


def test_every_mask_gets_the_softmax_at_its_own_position_in_order(model, tok):
    """Each [MASK] of each text gets its own list, left to right, equal to softmax of the model's
    logits at that position (atol ROUNDING); the masks of one text get different answers, so a
    mix-up of positions or of order shows."""
    got = fill_mask(model, tok, TEXTS, k=5, batch_size=2)
    assert [len(masks) for masks in got] == [1, 2, 1, 3]
    for text, masks in zip(TEXTS, got, strict=True):
        for guesses, (ids, probs) in zip(masks, reference(model, tok, text, 5), strict=True):
            assert [g.token_id for g in guesses] == ids
            assert [g.token for g in guesses] == [tok.id_to_token(i) for i in ids]
            assert_close(torch.tensor([g.probability for g in guesses]), probs, atol=ROUNDING, what=text)
    second = [[g.token_id for g in guesses] for guesses in got[1]]
    assert second[0] != second[1]


def test_batching_and_padding_change_nothing(model, tok):
    """All four texts in one padded batch (lengths 4 to 11) give what each text alone gives
    (atol ROUNDING): the attention mask keeps padding out of every real position. Without the
    mask, padding moves a probability by 0.24 here: 1,200 times the tolerance."""
    together = fill_mask(model, tok, TEXTS, k=5, batch_size=4)
    alone = [fill_mask(model, tok, [t], k=5, batch_size=1)[0] for t in TEXTS]
    for a, b in zip(together, alone, strict=True):
        for ga, gb in zip(a, b, strict=True):
            assert [g.token for g in ga] == [g.token for g in gb]
            assert_close(torch.tensor([g.probability for g in ga]), torch.tensor([g.probability for g in gb]),
                         atol=ROUNDING)


def test_runs_in_eval_mode_and_gives_the_mode_back(model, tok):
    """A model left in training mode (dropout 0.1) gives the eval-mode answer (the same calls on the
    same batch: equal floats), and is in training mode again afterwards."""
    expected = fill_mask(model, tok, TEXTS[:1])
    model.train()
    try:
        assert fill_mask(model, tok, TEXTS[:1]) == expected
        assert model.training
    finally:
        model.eval()


def test_refuses_a_text_without_mask_or_too_long_and_never_truncates(model, tok):
    """No [MASK]; 17 tokens ([CLS] + 15 + [SEP]) for 16 positions, also with a tokenizer set to
    truncate at 8 and pad to 12 (as a tokenizer.json may come), which must not cut the [MASK] off."""
    with pytest.raises(FillMaskError, match=r"^text 2 has no \[MASK\] to fill: 'the cat sees the dog \.'$"):
        fill_mask(model, tok, ["the [MASK] .", "the cat sees the dog ."])
    assert len(tok.encode(LONG).ids) == 17
    cutting = wordpiece()
    cutting.enable_truncation(8)
    cutting.enable_padding(pad_id=0, length=12)
    for t in (tok, cutting):
        with pytest.raises(FillMaskError, match=r"^text 1 is 17 tokens long .* the model's 16 positions"):
            fill_mask(model, t, [LONG])
    assert fill_mask(model, cutting, TEXTS) == fill_mask(model, tok, TEXTS)


def test_refuses_a_tokenizer_that_does_not_fit(model, tok):
    """A tokenizer of 14 tokens for a model of 13, one without [MASK], and a bare string for the
    list of texts (which would be read letter by letter)."""
    with pytest.raises(FillMaskError, match=r"^the tokenizer \(14 tokens\) does not belong to the model \(13 tokens\)$"):
        fill_mask(BertForMaskedLM(tiny_config(vocab_size=13, max_position_embeddings=16)), tok, TEXTS)
    no_mask = Tokenizer(models.WordPiece({t: i for i, t in enumerate(VOCAB) if t != "[MASK]"}, unk_token="[UNK]"))
    with pytest.raises(FillMaskError, match=r"^the tokenizer has no \[MASK\] token$"):
        fill_mask(model, no_mask, TEXTS)
    with pytest.raises(TypeError, match="put a single text in a list"):
        fill_mask(model, tok, TEXTS[0])


# ---- the command ------------------------------------------------------------------------------


def parse(out: str) -> list[list[list[tuple[str, float]]]]:
    """The command's output back into per text, per mask, (token, probability) pairs."""
    blocks = []
    for block in out.strip("\n").split("\n\n"):
        masks = []
        for line in block.splitlines()[1:]:
            _, guesses = line.split(": ", 1)
            masks.append([(g.rsplit(" (", 1)[0], float(g.rsplit(" (", 1)[1].rstrip(")"))) for g in guesses.split("  ")])
        blocks.append(masks)
    return blocks


def run(*args, stdin=""):
    return subprocess.run([sys.executable, "fill_mask.py", *args], cwd=REPO, input=stdin, capture_output=True,
                          text=True, timeout=120)


def test_command_on_a_minibert_checkpoint(model, tok, tmp_path):
    """Texts as arguments, --top-k 3: the output holds the texts and the library's guesses at
    three decimals, in the documented layout (the command runs the same calls on the same bytes of
    weight and the same batch: the same floats, so the same text)."""
    model.save_pretrained(tmp_path / "ckpt", tokenizer=tok)
    r = run("--checkpoint", str(tmp_path / "ckpt"), "--top-k", "3", *TEXTS[:2])
    assert r.returncode == 0 and r.stderr == "", r.stderr
    expected = fill_mask(model, tok, TEXTS[:2], k=3)
    lines = []
    for text, masks in zip(TEXTS[:2], expected, strict=True):
        lines += [text, *(f"  mask {j + 1}: " + "  ".join(f"{g.token} ({g.probability:.3f})" for g in guesses)
                          for j, guesses in enumerate(masks)), ""]
    assert r.stdout == "\n".join(lines[:-1]) + "\n"


def test_command_on_a_transformers_checkpoint_reading_stdin(tok, tmp_path):
    """A BertForMaskedLM saved by transformers (its tokenizer.json beside it); texts from
    standard input, one a line, a blank line skipped. The printed guesses are transformers' own:
    the top 5 of softmax(its logits) at each [MASK], to the 3 printed decimals and minibert's
    rounding: atol 5e-4 (half the last printed digit) + ROUNDING (the command runs minibert's code
    on the two texts padded together, the reference transformers' on each alone)."""
    hf_config = transformers.BertConfig(vocab_size=14, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                        intermediate_size=37, max_position_embeddings=16)
    torch.manual_seed(0)
    hf = perturb_(transformers.BertForMaskedLM(hf_config), scale=0.5).eval()
    hf.save_pretrained(tmp_path / "hf")
    tok.save(str(tmp_path / "hf" / "tokenizer.json"))
    r = run("--checkpoint", str(tmp_path / "hf"), stdin="\n".join([TEXTS[1], "", TEXTS[3]]) + "\n")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    printed = parse(r.stdout)
    assert [len(masks) for masks in printed] == [2, 3]
    for text, masks in zip([TEXTS[1], TEXTS[3]], printed, strict=True):
        for guesses, (ids, probs) in zip(masks, reference(hf, tok, text, 5), strict=True):
            assert [t for t, _ in guesses] == [tok.id_to_token(i) for i in ids]
            assert_close(torch.tensor([p for _, p in guesses]), probs, atol=5e-4 + ROUNDING, what=text)


def test_command_takes_a_run_folders_newest_checkpoint(tok, tmp_path, capsys):
    """In a train_mlm.py run folder, step-000002 is used (its head favours `cat`: p = e^5 / (e^5 + 13)
    = 148.41 / 161.41 = 0.9195, printed 0.919), not step-000001 (which favours `dog`)."""
    run_dir = tmp_path / "run"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"kind": "pretraining"}))
    head_only(tok, {"dog": 5.0}).save_pretrained(run_dir / "checkpoints" / "step-000001", tokenizer=tok)
    head_only(tok, {"cat": 5.0}).save_pretrained(run_dir / "checkpoints" / "step-000002", tokenizer=tok)
    command.main(["--checkpoint", str(run_dir), "--top-k", "1", "the [MASK] ."])
    assert capsys.readouterr().out == "the [MASK] .\n  mask 1: cat (0.919)\n"


@pytest.fixture(scope="module")
def checkpoints(model, tok, tmp_path_factory):
    """A masked-LM checkpoint, an encoder and a classifier saved by minibert, a transformers
    BertModel, and a run folder that has no checkpoint yet."""
    root = tmp_path_factory.mktemp("fill_mask")
    model.save_pretrained(root / "mlm", tokenizer=tok)
    BertModel(config(tok)).save_pretrained(root / "encoder", tokenizer=tok)
    BertForSequenceClassification(config(tok)).save_pretrained(root / "classifier", tokenizer=tok)
    transformers.BertModel(transformers.BertConfig(vocab_size=14, hidden_size=32, num_hidden_layers=1,
                                                   num_attention_heads=4, intermediate_size=37)).save_pretrained(root / "hf-encoder")
    (root / "run").mkdir()
    (root / "run" / "run.json").write_text(json.dumps({"kind": "pretraining"}))
    return root


class Stdin:
    def __init__(self, data: bytes):
        self.buffer = io.BytesIO(data)


@pytest.mark.parametrize("folder, texts, stdin, message", [
    ("mlm", ["the cat ."], None, r"text 1 has no \[MASK\] to fill: 'the cat \.'"),
    ("mlm", [LONG], None,
     r"text 1 is 17 tokens long with its special tokens, more than the model's 16 positions"),
    ("encoder", ["the [MASK] ."], None, r"cannot load --checkpoint .*encoder: .*encoder has no masked-LM head"),
    ("classifier", ["the [MASK] ."], None, r"classifier has no masked-LM head"),
    ("hf-encoder", ["the [MASK] ."], None, r"hf-encoder has no masked-LM head"),
    ("run", ["the [MASK] ."], None, r".*run is a pretraining run with no checkpoint yet"),
    ("missing", ["the [MASK] ."], None, r"--checkpoint .*missing: no such folder"),
    ("mlm", [], b"the [MASK] \xff\n", r"cannot read standard input: not UTF-8 text \(byte 0xff at offset 11 is no UTF-8\)"),
    ("mlm", [], "closed", r"cannot read standard input: it is closed"),
    ("mlm", [], b"\n  \n", r"no text given"),
])
def test_each_user_error_is_one_line_and_nothing_else(checkpoints, monkeypatch, capsys, folder, texts, stdin, message):
    """The script stops with SystemExit("error: ..."): Python prints that one line to standard
    error and exits with status 1. Nothing else reaches standard output or error first."""
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", None if stdin == "closed" else Stdin(stdin))
    with pytest.raises(SystemExit) as e:
        command.main(["--checkpoint", str(checkpoints / folder), *texts])
    assert isinstance(e.value.code, str) and "\n" not in e.value.code
    assert e.value.code.startswith("error: ")
    assert re.search(message, e.value.code), e.value.code
    assert capsys.readouterr() == ("", "")


def test_a_checkpoint_without_mlm_head_in_a_real_process(checkpoints):
    """The same, seen from outside: exit status 1, one line on standard error, nothing on
    standard output."""
    r = run("--checkpoint", str(checkpoints / "encoder"), "the [MASK] .")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: ") and "has no masked-LM head" in r.stderr, r.stderr


@pytest.mark.slow
def test_minilm_a_real_bert_without_mlm_head_is_refused_in_one_line(capsys):
    """all-MiniLM-L6-v2, a real BertModel saved by transformers, has an encoder and no head."""
    with pytest.raises(SystemExit) as e:
        command.main(["--checkpoint", fetch_minilm(), "the [MASK] ."])
    assert re.fullmatch(r"error: cannot load --checkpoint \S+: \S+minilm has no masked-LM head \(no cls\.predictions\.\* "
                        r"tensors: an encoder or classifier checkpoint\); fill-mask needs a BertForMaskedLM "
                        r"checkpoint, such as train_mlm.py writes", e.value.code), e.value.code
    assert capsys.readouterr() == ("", "")


def test_standard_input_is_split_at_line_ends_only(checkpoints, monkeypatch, capsys):
    """Two lines (a CR LF between them): the first holds a U+2028 and a form feed, which
    str.splitlines() would take for line ends, making a line `the cat .` with no [MASK] (an
    error). Split at line ends only, it is two texts, each with its one [MASK]."""
    assert lines_of("a\u2028b\x0cc\r\nd\re\n") == ["a\u2028b\x0cc", "d", "e"] and lines_of("") == []
    monkeypatch.setattr(sys, "stdin", Stdin("the [MASK] .\u2028the cat .\x0c\r\nthe [MASK] .\n".encode()))
    command.main(["--checkpoint", str(checkpoints / "mlm")])
    out = capsys.readouterr().out
    assert out.count("mask 1:") == 2 and "mask 2:" not in out, out


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-32-le"])
def test_input_in_utf16_or_utf32_without_a_byte_order_mark_is_named(checkpoints, monkeypatch, encoding):
    """Standard input in UTF-16 or UTF-32 without a byte-order mark: its bytes decode as UTF-8,
    every character beside NUL bytes. One line naming them and the iconv that mends it (the code
    before this one said "text 1 has no [MASK] to fill" of `t\x00h\x00e\x00 ...`; finetune.py
    predict, which reads its input the same way, predicted on it and echoed the NULs)."""
    monkeypatch.setattr(sys, "stdin", Stdin("the [MASK] .\n".encode(encoding)))
    name = encoding.upper().replace("-", "").replace("UTF", "UTF-")
    with refusal(rf"^error: cannot read standard input: it holds NUL bytes, as {name[:6]} without a byte-order mark "
                 rf"does: save it as UTF-8 \(e\.g\. iconv -f {name} -t UTF-8\)$"):
        command.main(["--checkpoint", str(checkpoints / "mlm")])


@pytest.mark.parametrize("encoding,said", [("utf-16", r"the file starts with a UTF-16 byte-order mark\): save it as UTF-8 "
                                                     r"\(e\.g\. iconv -f UTF-16 -t UTF-8\)"),
                                           ("utf-32", r"the file starts with a UTF-32 byte-order mark\): save it as UTF-8 "
                                                     r"\(e\.g\. iconv -f UTF-32 -t UTF-8\)"),
                                           ("cp1252", r"a byte 0x80-0x9f is a character in Windows-1252 \(as Excel saves\), "
                                                      r"a control in Latin-1\): save it as UTF-8 \(e\.g\. iconv -f CP1252")])
def test_input_in_another_encoding_is_named_with_a_fix_that_works(checkpoints, monkeypatch, encoding, said):
    """Standard input in UTF-16 or UTF-32 with a byte-order mark, or in Windows-1252 (don\u2019t: its
    byte 0x92): the code before this one gave Python's codec message ("'utf-8' codec can't decode
    byte 0xff"), naming no encoding; and the labelled files' advice for 0x92 was Latin-1, which
    reads it as an invisible control character that BERT's normalizer drops ("dont"). One line
    naming the encoding, with the iconv that mends it."""
    monkeypatch.setattr(sys, "stdin", Stdin("I don\u2019t like the [MASK] .\n".encode(encoding)))
    with refusal(r"^error: cannot read standard input: not UTF-8 text \(byte 0x[0-9a-f]{2} at offset \d+ is no UTF-8; "
                 + said):
        command.main(["--checkpoint", str(checkpoints / "mlm")])


@pytest.mark.parametrize("text", ["the [MASK] .\nthe cat .", "the [MASK] .\u2028the cat .", "the [MASK] .\rthe cat .",
                                  "the [MASK] .\\nthe cat ."])
def test_a_text_with_a_line_break_is_echoed_on_one_line(checkpoints, capsys, text):
    """A command-line text holding a line end (or a U+2028, a CR) is one text, with one [MASK]:
    its echo above the guesses is one line, the break shown as its escape, so the output stays
    a text line then its mask lines (a reader that splits lines must not see a line `the cat .`).
    A text that holds a backslash then n is shown with the backslash doubled (as Python's
    unicode_escape writes it), so that its echo is not the echo of a line end."""
    command.main(["--checkpoint", str(checkpoints / "mlm"), text])
    lines = lines_of(capsys.readouterr().out)
    assert len(lines) == 2 and lines[0] == text.encode("unicode_escape").decode(), lines
    assert lines[1].startswith("  mask 1: ") and "\u2028" not in lines[1]


def test_a_token_with_a_line_end_is_guessed_on_one_line(tmp_path, capsys):
    """A tokenizer.json (a transformers-style folder: no digest in config.json) whose token 'cat'
    became "ca\\nt\\tX": the model's guesses include it, and the mask's line stays one line, the
    line end and the tab shown as escapes."""
    tok = wordpiece()
    saved = json.loads(tok.to_str())
    vocab = saved["model"]["vocab"]
    vocab["ca\nt\tX"] = vocab.pop("cat")
    odd = Tokenizer.from_str(json.dumps(saved))
    head_only(odd, {"ca\nt\tX": 5.0}).save_pretrained(tmp_path, tokenizer=odd)
    config = json.loads((tmp_path / "config.json").read_text())
    config.pop("tokenizer_sha256")
    (tmp_path / "config.json").write_text(json.dumps(config))
    command.main(["--checkpoint", str(tmp_path), "--top-k", "2", "the [MASK] ."])
    lines = lines_of(capsys.readouterr().out)
    assert len(lines) == 2 and lines[1].startswith("  mask 1: ca\\nt\\tX (0."), lines


@pytest.mark.parametrize("family", ["roberta", "distilbert"])
def test_a_masked_lm_of_another_architecture_is_refused_for_what_it_is(family, tmp_path, capsys):
    """A RoBERTa or DistilBERT masked-LM checkpoint (transformers' own, tiny) has an MLM head, just
    not BERT's tensor names: the refusal names the architecture, not a missing head."""
    cls, config = {"roberta": (transformers.RobertaForMaskedLM, transformers.RobertaConfig(
                       vocab_size=30, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=20)),
                   "distilbert": (transformers.DistilBertForMaskedLM, transformers.DistilBertConfig(
                       vocab_size=30, dim=16, n_layers=1, n_heads=2, hidden_dim=20))}[family]
    cls(config).save_pretrained(tmp_path / family)
    with pytest.raises(SystemExit) as e:
        command.main(["--checkpoint", str(tmp_path / family), "the [MASK] ."])
    assert re.search(rf"model_type is '{family}', not 'bert'", e.value.code), e.value.code
    assert "masked-LM head" not in e.value.code
