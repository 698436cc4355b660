"""train_mlm.py --objective mlm+nsp end to end on documents written here (conftest's `documents`):
it learns the next sentence, its checkpoint is HF's BertForPreTraining, and every command that
reads a pretrained checkpoint takes it."""

import json

import pytest
import torch
import transformers

import fill_mask
import finetune
import train_mlm
from minibert import BertForMaskedLM, BertForPreTraining, load_tokenizer

TINY = ["--layers", "2", "--hidden", "64", "--heads", "2", "--vocab-size", "160", "--seq-len", "32",
        "--batch-size", "16", "--warmup", "0.02", "--log-every", "1", "--no-progress"]


@pytest.fixture(scope="module")
def nsp_run(tmp_path_factory, documents):
    """400 steps of MLM + NSP in one phase (--short-fraction 0: NSP from the first step), lr 3e-3,
    128 wide with 4 heads (64 wide with 2 learnt the next sentence three times slower)."""
    root = tmp_path_factory.mktemp("nsp")
    train_mlm.main(["--corpus", str(documents), "--data-root", str(root / "cache"), "--out", str(root / "run"), *TINY,
                    "--objective", "mlm+nsp", "--max-steps", "400", "--eval-every", "100", "--short-fraction", "0",
                    "--lr", "3e-3", "--dropout", "0", "--hidden", "128", "--heads", "4"])
    return root / "run"


def test_mlm_nsp_learns_the_next_sentence_beside_chance(nsp_run, capsys):
    """The documents keep one subject and object per document, so B's words say whether it follows
    A. On the held-out pairs (the validation documents cut four ways; about 200 pairs) chance is
    the commoner label's share, about 0.5. Under chance the accuracy of n pairs has standard
    deviation at most sqrt(0.25 / n) = 0.035 for n = 200: 0.75 is over 5 of them above 0.55
    (this seeded run: 0.914, loss 0.236). The log holds the NSP loss and accuracy of the training pairs."""
    summary = json.loads((nsp_run / "summary.json").read_text())
    n = summary["valid_nsp_pairs"]
    assert n > 150 and 0.5 <= summary["nsp_chance"] < 0.55 + 2 * (0.25 / n) ** 0.5, summary
    assert summary["valid_nsp_acc"] > 0.75, summary
    assert summary["valid_nsp_loss"] < 0.5, summary  # ln 2 = 0.693 is a coin
    records = [json.loads(line) for line in open(nsp_run / "metrics.jsonl")]
    trained = [r for r in records if "train_nsp_loss" in r]
    assert len(trained) == 400 and all(0 <= r["train_nsp_acc"] <= 1 for r in trained)


def test_the_checkpoint_is_hfs_bert_for_pretraining(nsp_run):
    """config.json names BertForPreTraining; transformers' class loads it with no missing or
    unexpected key and gives the same MLM and NSP logits on a pair, to float32 rounding: the two
    codes sum in other orders, and a logit ends 2 layers of 9 chained sums and the head's 3, holding
    about 2,800 terms in all (C = 128, I = 512, T = 15), at |values| <= 10 (the MLM logits'):
    2,800 x 6.0e-8 x 10 = 1.7e-3, atol 2e-3 (2e-6 measured); a wrong tensor or head is off by 0.1 or more."""
    ckpt = json.loads((nsp_run / "summary.json").read_text())["checkpoint"]
    assert json.loads(open(f"{ckpt}/config.json").read())["architectures"] == ["BertForPreTraining"]
    enc = load_tokenizer(ckpt).encode("The cat sees the ball.", "The cat likes the ball.")
    ids, types = torch.tensor([enc.ids]), torch.tensor([enc.type_ids])
    ours = BertForPreTraining.from_pretrained(ckpt).eval()
    hf, info = transformers.BertForPreTraining.from_pretrained(ckpt, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    with torch.no_grad():
        a, b = ours(ids, token_type_ids=types), hf.eval()(input_ids=ids, token_type_ids=types)
    assert (a.prediction_logits - b.prediction_logits).abs().max() < 2e-3
    assert (a.seq_relationship_logits - b.seq_relationship_logits).abs().max() < 2e-3


def test_fill_mask_and_finetune_take_the_checkpoint(nsp_run, tmp_path, capsys):
    """fill_mask.py reads the MLM head (the NSP head is dropped, said on one line); finetune.py's
    [CLS] head starts from the pooler NSP trained, and runs to its summary."""
    fill_mask.main(["--checkpoint", str(nsp_run), "--top-k", "3", "The cat sees the [MASK]."])
    out = capsys.readouterr().out
    assert "[MASK]" in out or "the cat sees the" in out.lower(), out
    data = tmp_path / "data"
    data.mkdir()
    for split, n in (("train", 80), ("valid", 20), ("test", 20)):
        rows = [("The cat sees the ball." if i % 2 else "A dog finds an owl.", "a" if i % 2 else "b") for i in range(n)]
        (data / f"{split}.tsv").write_text("".join(f"{t}\t{y}\n" for t, y in rows))
    finetune.main(["--checkpoint", str(nsp_run), "--data", str(data), "--out", str(tmp_path / "cls"), "--epochs", "1",
                   "--no-progress"])
    summary = json.loads((tmp_path / "cls" / "summary.json").read_text())
    assert 0 <= summary["test_acc"] <= 1


def test_resume_refuses_another_objective(nsp_run, documents, tmp_path):
    """--objective decides the model and the data: a resume with the other one is one line."""
    with pytest.raises(SystemExit) as e:
        train_mlm.main(["--corpus", str(documents), "--data-root", str(nsp_run.parent / "cache"), "--out",
                        str(nsp_run), *TINY, "--max-steps", "400", "--short-fraction", "0", "--lr", "3e-3",
                        "--hidden", "128", "--heads", "4", "--resume"])
    assert "--objective (mlm+nsp then, mlm now)" in str(e.value.code)
    assert isinstance(BertForMaskedLM.from_pretrained(json.loads((nsp_run / "summary.json").read_text())["checkpoint"]),
                      BertForMaskedLM)
