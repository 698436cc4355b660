"""Fine-tuning (S17-S20), LoRA, predict_batch, polysemy helpers (S28), finetune.py end to end."""

import json
import re
import shutil

import pytest
import torch
import torch.nn.functional as F
import transformers
from safetensors.torch import load_file

import finetune
from minibert import BertForMaskedLM, BertForSequenceClassification, BertModel, load_tokenizer
from minibert.lora import LoRALinear, add_lora, merge_lora
from minibert.run.finetuning import BestEpoch, Recipe, default_epochs, epoch_batches, fine_tune
from minibert.run.training import epoch_order
from minibert.run.exercises import compare_polysemous_embeddings, configure_model, predict_batch, word_vector
from minibert.run.labelled import InputError, read_split, split_rows
from minibert.text import train_wordpiece

from conftest import FILLER, TINY_REORDER, assert_close, perturb_, refusal, tiny_config

def run(setup, out, *extra):
    """finetune.py on the tiny fixture with the pooler head (the one `transformers` loads)."""
    return finetune.main(["--checkpoint", str(setup / "ckpt"), "--data", str(setup / "data"), "--out", str(out),
                          "--head", "pooler", "--lr", "2e-3", "--epochs", "4", "--patience", "4", "--batch-size", "16",
                          "--no-progress", *extra])


def test_full_fine_tuning_beats_chance_and_the_model_loads_in_transformers(setup, tmp_path):
    """Balanced classes (chance 0.5): the tiny model learns which word carries the label, test
    accuracy > 0.9. The bag-of-words baseline beside it must be perfect: every sentence holds
    exactly one of the 10 sentiment words, each seen about 40 times in training and always with
    one label, while the filler words are drawn alike for both labels; so every penalty of the
    grid labels all 100 validation sentences right, the tie goes to the largest penalty 1e-2,
    and all 100 test sentences are right too (accuracy and macro-F1 exactly 1.0; a baseline fed
    the wrong split, labels or vocabulary falls short). The best checkpoint (pooler head) loads
    in transformers as BertForSequenceClassification with the same logits and label names (to
    float32 rounding: the two codes sum in other orders, TINY_REORDER, conftest; its weights moved
    <= 100 x 2e-3 = 0.2 from init, the scale of conftest's perturbed ones)."""
    summary = run(setup, tmp_path / "full")
    assert summary["test_acc"] > 0.9 and summary["majority_test_acc"] == 0.5, summary
    bow = (summary["bow_l2"], summary["bow_valid_acc"], summary["bow_test_acc"], summary["bow_test_macro_f1"])
    assert bow == (1e-2, 1.0, 1.0, 1.0), summary
    ours = BertForSequenceClassification.from_pretrained(summary["model"]).eval()
    hf = transformers.BertForSequenceClassification.from_pretrained(summary["model"]).eval()
    ids = torch.tensor([[2, 10, 11, 12, 3]])
    with torch.no_grad():
        assert_close(hf(input_ids=ids).logits, ours(ids).logits, atol=TINY_REORDER, what="logits")
    assert hf.config.id2label == {0: "neg", 1: "pos"}


def test_early_stopping_keeps_the_best_epoch_and_the_test_split_is_read_once(setup, tmp_path, monkeypatch):
    """S19: the checkpoint scored at the end is the best validation epoch (its validation accuracy
    equals the best logged one), and the test file is read exactly once, after training. Both
    accuracies are k / 100 over the same 100 sentences from the same weights (abs 1e-9 only absorbs
    the float; another epoch's model, or a sentence whose two logits lie within rounding of each
    other and flip, moves it by 0.01)."""
    reads = []
    original = read_split
    monkeypatch.setattr(finetune, "read_split", lambda path: reads.append(path) or original(path))
    summary = run(setup, tmp_path / "es", "--epochs", "5", "--patience", "1")
    logged = [json.loads(line) for line in open(tmp_path / "es" / "metrics.jsonl")]
    assert summary["valid_acc"] == pytest.approx(max(r["valid_acc"] for r in logged), abs=1e-9)
    assert summary["best_epoch"] == max(logged, key=lambda r: r["valid_acc"])["epoch"]
    assert [p.endswith("test.tsv") for p in reads] == [False, False, True]
    for r in logged:  # S20: per-epoch loss, validation metrics, learning rate, trainable parameters
        assert {"train_loss", "valid_acc", "valid_macro_f1", "lr", "trainable_params"} <= r.keys()


def test_s17_frozen_encoder_trains_the_head_only(setup, tmp_path):
    """S17: requires_grad is set on the encoder first, then AdamW sees only the head
    (2 labels x 32 + 2 = 66 parameters); after a backward pass no encoder parameter has a
    gradient."""
    model = BertForSequenceClassification(tiny_config(), num_labels=2)
    optimizer, n = configure_model(model, freeze_encoder=True)
    assert n == 66 and sum(p.numel() for g in optimizer.param_groups for p in g["params"]) == 66
    ids = torch.randint(5, 99, (4, 8))
    F.cross_entropy(model(ids).logits, torch.tensor([0, 1, 0, 1])).backward()
    assert all(p.grad is None for p in model.bert.parameters())
    assert all(p.grad is not None for p in model.classifier.parameters())


def test_freeze_encoder_on_an_mlm_checkpoint_trains_the_new_pooler_with_the_head(setup, tmp_path, capsys):
    """An MLM checkpoint brings no pooler, so `finetune.py --freeze-encoder` trains the new one
    with the classifier instead of freezing a random tanh layer between [CLS] and the head, and
    says so: 66 head parameters + the pooler's 32 x 32 + 32 = 1,056 = 1,122 trainable. After
    fine-tuning every encoder tensor equals the checkpoint's and the pooler has moved from its
    seeded initialisation."""
    summary = run(setup, tmp_path / "frozen", "--freeze-encoder", "--epochs", "1")
    assert "has no pooler: the new one trains with the classifier" in capsys.readouterr().out
    assert summary["trainable_params"] == 1122
    before = BertModel.from_pretrained(setup / "ckpt").state_dict()
    after = BertForSequenceClassification.from_pretrained(summary["model"]).bert.state_dict()
    torch.manual_seed(0)  # finetune.py's --seed: the head (pooler first) is initialised right after it
    fresh = BertModel.from_pretrained(setup / "ckpt").state_dict()
    for k, v in before.items():
        if not k.startswith("pooler"):
            assert torch.equal(after[k], v), k
    assert not torch.equal(after["pooler.weight"], fresh["pooler.weight"])


def test_lora_trains_only_adapters_and_merging_keeps_the_logits(batch):
    """LoRA on the query and value projections of both layers: only A, B (and the classifier)
    train; B starts at 0 so the wrapped model first equals the original (bit for bit: each wrapped
    Linear adds s x (0 @ A x) = 0 exactly to the same base call; atol 1e-6 is slack); after B is
    changed, merging W + (alpha/r) B A gives the same logits as the unmerged adapters, to float32
    rounding (TINY_REORDER, conftest), while dropping B A would be off by the 0.024 they move the
    logits."""
    ids, mask, types = batch
    model = perturb_(BertForSequenceClassification(tiny_config(), 2)).eval()
    with torch.no_grad():
        reference = model(ids, mask, types).logits
    for p in model.parameters():
        p.requires_grad_(False)
    names = add_lora(model.bert, rank=4, alpha=8)
    assert names == [f"layers.{i}.attention.{m}" for i in range(2) for m in ("query", "value")]
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable == {f"bert.layers.{i}.attention.{m}.lora_{ab}" for i in range(2)
                         for m in ("query", "value") for ab in "AB"}
    with torch.no_grad():
        assert_close(model(ids, mask, types).logits, reference, atol=1e-6, what="B = 0")
        for m in model.modules():
            if isinstance(m, LoRALinear):
                m.lora_B.normal_(0, 0.1)
        unmerged = model(ids, mask, types).logits
    assert (unmerged - reference).abs().max() > 1e-3
    merged = merge_lora(model)
    assert not any(isinstance(m, LoRALinear) for m in merged.modules())
    with torch.no_grad():
        assert_close(merged(ids, mask, types).logits, unmerged, atol=TINY_REORDER, what="merged")
    assert set(merged.state_dict()) == set(BertForSequenceClassification(tiny_config(), 2).state_dict())


def test_lora_fine_tuning_end_to_end(setup, tmp_path):
    """finetune.py --lora-rank 4: 2 layers x 2 modules x (4x32 + 32x4) = 1,024 adapter parameters
    plus the 66 of the classifier train. The exported (merged) checkpoint differs from the
    starting one in the query and value weights only; every other encoder tensor is unchanged."""
    summary = run(setup, tmp_path / "lora", "--lora-rank", "4", "--epochs", "1")
    assert summary["trainable_params"] == 1024 + 66
    before = BertModel.from_pretrained(setup / "ckpt").state_dict()
    after = BertForSequenceClassification.from_pretrained(summary["model"]).bert.state_dict()
    changed = {k for k, v in before.items() if not k.startswith("pooler") and not torch.equal(after[k], v)}
    assert changed == {f"layers.{i}.attention.{m}.weight" for i in range(2) for m in ("query", "value")}


def test_s18_predict_batch_is_eval_no_grad_argmax():
    model = perturb_(BertForSequenceClassification(tiny_config(), 3))
    model.train()
    batch = {"input_ids": torch.randint(5, 99, (5, 7)), "attention_mask": torch.ones(5, 7, dtype=torch.long)}
    pred = predict_batch(model, batch)
    assert not model.training and pred.shape == (5,) and not pred.requires_grad
    with torch.no_grad():
        # the same eval-mode call on the same batch: the same logits bit for bit, so the same argmax
        assert torch.equal(pred, model(batch["input_ids"], batch["attention_mask"]).logits.argmax(-1))


def test_predict_command_labels_sentences(setup, tmp_path, capsys):
    """`finetune.py predict` prints label<TAB>probability<TAB>text, one line per input sentence.
    Checked against the saved model run here, one sentence at a time (no padding): with
    p = softmax(logits) and k = argmax p, the label is id2label[k] and the printed number is p[k]
    written with 4 decimals, so within 5e-5 of it, plus float32 rounding: predict runs the sentences
    padded together, this check each alone, so a logit may move by 1.8e-4 (conftest's TINY_REORDER
    derivation) and p by half that, 9e-5: atol 2e-4. p[k] is more than 0.01 away from 1/2 here, so
    printing the other class's probability 1 - p[k] would be off by more than 0.02."""
    summary = run(setup, tmp_path / "p", "--epochs", "3")
    sentences = ["the film was superb", "the plot was awful"]
    (tmp_path / "in.txt").write_text("".join(f"{t}\n" for t in sentences))
    capsys.readouterr()
    finetune.main(["predict", "--model", summary["model"], "--file", str(tmp_path / "in.txt")])
    lines = capsys.readouterr().out.splitlines()
    model = BertForSequenceClassification.from_pretrained(summary["model"]).eval()
    tokenizer = load_tokenizer(summary["model"])
    tokenizer.no_padding()
    for line, text in zip(lines, sentences, strict=True):
        label, printed_p, printed_text = line.split("\t")
        with torch.no_grad():
            p = model(torch.tensor([tokenizer.encode(text).ids])).logits.softmax(-1)[0]  # (K,)
        k = int(p.argmax())
        assert printed_text == text
        assert label == model.config.id2label[k]
        assert abs(p[k].item() - 0.5) > 0.01, p
        assert abs(float(printed_p) - p[k].item()) < 2e-4, (printed_p, p)
    assert [line.split("\t")[0] for line in lines] == ["pos", "neg"]  # trained: the sentiment word decides
    finetune.main(["predict", "--model", str(tmp_path / "p"), "--file", str(tmp_path / "in.txt")])
    assert capsys.readouterr().out.splitlines() == lines  # the run folder reads its best/ model
    # a tab, form feed or U+2028 inside one input line stays one output line of three cells
    (tmp_path / "odd.txt").write_text("the film\twas\x0csuperb\u2028really\n", encoding="utf-8")
    finetune.main(["predict", "--model", str(tmp_path / "p"), "--file", str(tmp_path / "odd.txt")])
    (line,) = capsys.readouterr().out.splitlines()
    assert line.split("\t")[2] == "the film\\twas\\x0csuperb\\u2028really"


def test_exercise_head_fine_tunes_too(setup, tmp_path):
    """The [CLS] head learns the sentiment word too (test accuracy > 0.8, chance 0.5). It has no
    pooler: the trainable parameters are the MLM checkpoint's encoder (its MLM head dropped) plus
    the head's 32 x 2 + 2 = 66, every one of them trainable, and best/ holds exactly those
    tensors (a pooler would add 32 x 32 + 32 = 1,056 to both)."""
    summary = run(setup, tmp_path / "cls", "--head", "cls", "--epochs", "3")
    assert summary["test_acc"] > 0.8
    config = json.loads(open(tmp_path / "cls" / "best" / "config.json").read())
    assert config["architectures"] == ["BertForClassification"]
    encoder = BertModel.from_pretrained(setup / "ckpt")  # a new pooler, left out of the count below
    n = sum(p.numel() for name, p in encoder.named_parameters() if not name.startswith("pooler.")) + 66
    assert summary["trainable_params"] == summary["total_params"] == n
    saved = load_file(tmp_path / "cls" / "best" / "model.safetensors")
    assert not any("pooler" in k for k in saved) and sum(t.numel() for t in saved.values()) == n


def test_bad_input_is_a_clear_error(setup, tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "train.tsv").write_text("good film\tpos\nbad film\tneg\n")
    (bad / "test.tsv").write_text("fine film\tpos\n")
    (bad / "valid.tsv").write_text("dull film\tmaybe\n")
    with refusal(r"valid.tsv: labels \['maybe'\] are not in the training split's label set"):
        run(setup, tmp_path / "o", "--data", str(bad))
    (bad / "valid.tsv").write_text("dull film\tneg\n\tpos\n")
    with refusal("valid.tsv:2: empty text"):
        run(setup, tmp_path / "o", "--data", str(bad))
    other = tmp_path / "other"
    BertForMaskedLM(tiny_config(vocab_size=50)).save_pretrained(
        other, tokenizer=train_wordpiece(["some other words entirely"] * 5 + FILLER * 9, vocab_size=200))
    with refusal(r"has \d+ tokens, more than its model's vocabulary \(50\): the tokenizer "
                                         r"does not belong to its model"):
        finetune.main(["--checkpoint", str(other), "--data", str(setup / "data"), "--out", str(tmp_path / "o")])
    with refusal("no such file or folder; use en, zh, one labelled .csv"):
        run(setup, tmp_path / "o", "--data", str(tmp_path / "nowhere"))


def test_s28_compare_polysemous_embeddings_is_the_cosine_per_pair():
    """S28: cos((1,0), (1,0)) = 1, cos((1,0), (0,1)) = 0, cos((1,1), (1,0)) = 1/sqrt 2 = 0.7071068
    (abs 1e-6: the 7-decimal rounding, 2e-8, and a few float32 roundings of values <= 2, ~4 u x 2 = 5e-7)."""
    vectors = {"a": torch.tensor([1.0, 0.0]), "b": torch.tensor([0.0, 1.0]), "c": torch.tensor([1.0, 1.0])}
    sims = compare_polysemous_embeddings([("a", "a"), ("a", "b"), ("c", "a")], vectors.__getitem__)
    assert sims == pytest.approx([1.0, 0.0, 0.7071068], abs=1e-6)


def test_word_vector_is_contextual_and_the_static_embedding_is_not(setup):
    """The same word in two contexts: its input (static) embedding is identical, its last hidden
    state is not; a word split into several pieces is the mean of the pieces' vectors (the same
    mean over the same rows of the table: bit for bit, and so are the static vectors; atol 1e-7 is slack)."""
    from minibert import load_tokenizer

    tok = load_tokenizer(setup / "ckpt")
    model = perturb_(BertModel.from_pretrained(setup / "ckpt"))
    s1, s2 = "the film was good", "the plot was good and boring"
    assert torch.equal(word_vector(model, tok, s1, "good", static=True), word_vector(model, tok, s2, "good", static=True))
    assert not torch.allclose(word_vector(model, tok, s1, "good"), word_vector(model, tok, s2, "good"))
    enc = tok.encode("superbly")
    assert len(enc.tokens) > 3  # [CLS] super ##bly... [SEP]: several pieces
    table = model.embeddings.word_embeddings.weight
    assert_close(word_vector(model, tok, "superbly", "superbly", static=True), table[enc.ids[1:-1]].mean(0),
                 atol=1e-7, what="mean of pieces")
    with pytest.raises(ValueError, match="does not occur"):
        word_vector(model, tok, s1, "river")


def test_csv_and_jsonl_datasets_read_like_tsv(tmp_path):
    """The same rows as .tsv, .csv (header text,label; quoted commas) and .jsonl."""
    rows = [("a fine, quiet film", "pos"), ("dull\tand long", "neg")]
    (tmp_path / "x.csv").write_text('text,label\n"a fine, quiet film",pos\n"dull\tand long",neg\n')
    (tmp_path / "x.jsonl").write_text("".join(json.dumps({"text": t, "label": y}) + "\n" for t, y in rows))
    (tmp_path / "x.tsv").write_text("a fine, quiet film\tpos\ndull\tand long\tneg\n")
    for ext in ("csv", "jsonl", "tsv"):
        assert read_split(str(tmp_path / f"x.{ext}")) == rows, ext
    (tmp_path / "bad.jsonl").write_text('{"text": "no label"}\n')
    with pytest.raises(InputError, match=r"bad\.jsonl:1: missing label"):
        read_split(str(tmp_path / "bad.jsonl"))


# ---- the one fine-tuning loop (minibert.run.finetuning) ----------------------------------------


def test_epochs_are_seeded_orders_cut_into_batches_and_steps_count_them():
    """5 examples in batches of 2: each epoch is epoch_order(5, seed, epoch) cut into 2 + 2 + 1
    rows, so 3 updates an epoch; 3 epochs make 9 updates, --max-steps 4 cuts them to 4."""
    for epoch in (1, 2):
        batches = epoch_batches(5, 2, 7, epoch)
        assert [len(b) for b in batches] == [2, 2, 1]
        assert torch.equal(torch.cat(batches), epoch_order(5, 7, epoch))
    assert not torch.equal(torch.cat(epoch_batches(5, 2, 7, 1)), torch.cat(epoch_batches(5, 2, 7, 2)))
    assert Recipe(epochs=3, batch_size=2).steps(5) == 9 and Recipe(epochs=3, batch_size=2, max_steps=4).steps(5) == 4


def test_the_loop_visits_each_epoch_in_its_order_and_stops_when_told():
    """A Linear(1, 2) on 5 examples, batches of 2, 3 epochs of 3 updates (9 in all): the rows it
    is asked for are epoch 1's batches, then epoch 2's; on_epoch_end runs once per epoch, after
    the model was put in training mode, and its True after epoch 2 stops the loop at 6 updates.
    Without a stop the schedule ends at rate 0 after the 9th update (linear decay), and the
    reported loss is the mean over the epoch's examples of the batches' cross-entropy (the same
    float32 losses summed in the same order in float64: exact; abs 1e-6 is slack against a mean
    over batches instead of examples, off by ~0.1)."""
    torch.manual_seed(0)
    model, x, y = torch.nn.Linear(1, 2), torch.arange(5.0).unsqueeze(1), torch.tensor([0, 1, 0, 1, 0])
    asked, ends = [], []

    def logits(rows):
        asked.append(rows.tolist())
        return model(x[rows])                                                   # (B, 2)

    def on_epoch_end(e):
        ends.append((e.epoch, e.step, model.training))
        model.eval()
        return e.epoch == 2

    recipe = Recipe(lr=1e-2, epochs=3, batch_size=2, seed=3)
    last = fine_tune(model, logits, y, recipe, on_epoch_end)
    expected = [b.tolist() for epoch in (1, 2) for b in epoch_batches(5, 2, 3, epoch)]
    assert asked == expected and ends == [(1, 3, True), (2, 6, True)] and last.epoch == 2
    seen = []
    last = fine_tune(model, lambda rows: seen.append((model(x[rows]), y[rows])) or seen[-1][0], y, recipe)
    assert (last.epoch, last.step, last.lr) == (3, 9, 0.0)
    by_hand = sum(F.cross_entropy(z, t).item() * len(t) for z, t in seen[-3:]) / 5  # epoch 3: 2 + 2 + 1 rows
    assert last.train_loss == pytest.approx(by_hand, abs=1e-6)


def test_a_non_finite_loss_stops_the_loop_with_one_line():
    """A loss of NaN at the first step, before any update: the rate cannot be the cause, so the line
    names the model's weights, and nothing is updated. NaN at a later step: the line names the step
    and the rate."""
    model = torch.nn.Linear(1, 2)
    before = model.weight.detach().clone()
    with refusal(r"the loss is nan at the first step, before any update: the model computes numbers that are not "
                 r"finite from its weights"):
        fine_tune(model, lambda rows: torch.full((len(rows), 2), float("nan")) + model.bias, torch.tensor([0, 1]),
                  Recipe(lr=1e-3, epochs=1, batch_size=2))
    assert torch.equal(model.weight, before)
    calls = []

    def logits(rows):  # finite at the first step, NaN from the second on
        calls.append(rows)
        return model.bias.expand(len(rows), 2) * (1.0 if len(calls) == 1 else float("nan"))
    with refusal(r"the loss became nan at step 2; try a lower learning rate than 0.001"):
        fine_tune(model, logits, torch.tensor([0, 1, 0, 1]), Recipe(lr=1e-3, epochs=1, batch_size=2))


def test_best_epoch_keeps_the_first_best_and_stops_after_patience_epochs_without_one():
    """Validation accuracies 0.5, 0.7, 0.7, 0.6 with patience 2: epochs 1 and 2 improve, 3 ties
    (not better: the earlier epoch is kept) and 4 is worse, so after epoch 4 two epochs have gone
    by without a better one: stop, keeping epoch 2 (0.7)."""
    best = BestEpoch(patience=2)
    improved = [best.improved(epoch, acc) for epoch, acc in enumerate((0.5, 0.7, 0.7, 0.6), 1)]
    assert improved == [True, True, False, False] and (best.epoch, best.acc, best.stop) == (2, 0.7, True)
    best = BestEpoch(patience=2)
    for epoch, acc in enumerate((0.5, 0.7, 0.7), 1):
        best.improved(epoch, acc)
    assert not best.stop


def test_one_labelled_file_is_split_here_and_trains(setup, tmp_path, capsys):
    """--data one .csv: the 600 rows of the fixture's three files in one file, split by label
    (labelled.split_rows, tested there) with the default fractions 0.1 and 0.1; the sizes printed
    are split_rows' own, and the model trained on the training rows labels the held-out test rows
    (the sentiment word decides: accuracy > 0.8, chance 0.5)."""
    rows = [line.split("\t") for split in ("train", "valid", "test")
            for line in (setup / "data" / f"{split}.tsv").read_text().splitlines()]
    one = tmp_path / "mine.csv"
    one.write_text("text,label\n" + "".join(f"{t},{y}\n" for t, y in rows))
    expected = split_rows([(t, y) for t, y in rows], 0.1, 0.1, str(one))
    summary = run(setup, tmp_path / "one", "--data", str(one))
    out = capsys.readouterr().out
    assert (f"{one} split by label (seed 0): {len(expected['train']):,} training, {len(expected['valid']):,} "
            f"validation, {len(expected['test']):,} test rows") in out
    assert summary["test_acc"] > 0.8, summary
    (tmp_path / "one.txt").write_text("good film\tpos\n")
    with refusal("give a .csv, .tsv or .jsonl file"):
        run(setup, tmp_path / "o", "--data", str(tmp_path / "one.txt"))
    (tmp_path / "single.csv").write_text("text,label\n" + "".join(f"film {i},pos\n" for i in range(9)))
    with refusal(r"single.csv has a single label \['pos'\]; classification needs at least two"):
        run(setup, tmp_path / "o", "--data", str(tmp_path / "single.csv"))


def test_small_training_sets_get_enough_epochs_for_the_minimum_updates(setup, tmp_path, capsys):
    """Without --epochs: 3 epochs, or as many as make 100 updates. 8,472 examples at batch 32 are
    265 updates an epoch: 3 epochs. 240 examples: 8 an epoch, ceil(100 / 8) = 13 epochs; 80
    examples: 3 an epoch, 34 epochs. finetune.py on the fixture's 400 training rows at batch 16
    (25 updates an epoch) plans ceil(100 / 25) = 4 epochs."""
    assert (default_epochs(8472, 32), default_epochs(240, 32), default_epochs(80, 32)) == (3, 13, 34)
    finetune.main(["--checkpoint", str(setup / "ckpt"), "--data", str(setup / "data"), "--out", str(tmp_path / "e"),
                   "--batch-size", "16", "--max-steps", "1", "--no-progress"])
    assert "lr 0.001, 4 epochs at most" in capsys.readouterr().out


BELOW = {"best_epoch": 2, "model": "out/best", "valid_acc": 0.70, "valid_macro_f1": 0.7, "test_acc": 0.7,
         "test_macro_f1": 0.7, "majority_label": "a", "majority_valid_acc": 0.5, "majority_test_acc": 0.5,
         "bow_l2": 0.01, "bow_valid_acc": 0.80, "bow_test_acc": 0.8, "bow_test_macro_f1": 0.8}


@pytest.mark.parametrize("valid_acc,bow_valid_acc,said", [
    (0.70, 0.80, True), (0.80, 0.80, False), (0.90, 0.80, False), (0.70, None, False)])
def test_a_model_below_bag_of_words_on_validation_is_told_what_to_try(valid_acc, bow_valid_acc, said, capsys):
    """The sentence appears when the kept model's validation accuracy is under bag-of-words' on
    validation, and not on a tie, above it, or when the baseline was skipped."""
    summary = dict(BELOW, valid_acc=valid_acc, bow_valid_acc=bow_valid_acc,
                   bow_l2=None if bow_valid_acc is None else 0.01)
    finetune.report(summary)
    out = capsys.readouterr().out
    assert ("below bag-of-words on validation (0.7000 < 0.8000): try more epochs (--epochs)" in out) == said, out


def test_predict_on_a_pretraining_run_folder_says_what_it_is(tmp_path, corpus):
    """predict --model given a train_mlm.py run folder: one line saying it is a pretraining run,
    not that config.json is missing."""
    import train_mlm
    run = tmp_path / "pre"
    from test_pretraining import TINY
    train_mlm.main(["--corpus", str(corpus), "--data-root", str(tmp_path / "cache"), "--out", str(run), *TINY,
                    "--max-steps", "1"])
    (tmp_path / "in.txt").write_text("a film\n")
    with refusal(r"--model .*pre is a pretraining run, not a classifier; give a `finetune.py train` run folder"):
        finetune.main(["predict", "--model", str(run), "--file", str(tmp_path / "in.txt")])


@pytest.mark.parametrize("copy", [lambda text: text, lambda text: text.replace("e", "\u00e9").upper()],
                         ids=["as-written", "accented-capitalised"])
def test_a_folders_test_split_sharing_training_texts_is_said(setup, tmp_path, capsys, copy):
    """A --data folder whose test.tsv repeats 10 training rows, as written or as an uncased BERT
    reads them alike (capitalised, é for e): the run goes on (such sets
    exist), and a note says that its test scores overstate (the old code said nothing, and
    bag-of-words scored 1.0 on the copied rows; the code before this one said nothing of the
    accented copies); validation shares none, and nothing is said of it."""
    data = tmp_path / "data"
    shutil.copytree(setup / "data", data)
    copied = [f"{copy(text)}\t{label}" for text, label in
              (line.split("\t") for line in (data / "train.tsv").read_text().splitlines()[:10])]
    (data / "test.tsv").write_text("\n".join(copied) + "\n" + (data / "test.tsv").read_text())
    run(setup, tmp_path / "out", "--data", str(data), "--epochs", "1")
    notes = capsys.readouterr().err.splitlines()
    assert notes == [f"note: 10 of the 110 rows of {data / 'test.tsv'} have a text the training split has too, so its "
                     "scores overstate what the model does on new text"], notes


# case -> (the split whose first row is relabelled, its new label, the refusal)
RELABELLED = {"labels-that-differ-in-case": ("train.tsv", "POS", r"^error: the labels 'POS' and 'pos' of --data \S+ "
                                                                 r"differ only in case"),
              "a-test-label-decomposed": ("test.tsv", "pos\u200d", r"^error: the labels 'pos' and 'pos\\u200d' of --data "
                                                                    r"\S+ differ only in how their characters are encoded")}


@pytest.mark.parametrize("case", ["a-fraction-with-a-folder", "labels-that-differ-in-case",
                                  "a-test-label-decomposed", "predict-an-invisible-line"])
def test_the_labelled_data_is_read_as_given_or_refused(setup, tmp_path, capsys, case):
    """--valid-fraction with a --data folder (which has its own splits): refused (the old code
    ignored it unsaid). A training row labelled 'POS' beside 'pos' everywhere else: refused as
    labels that differ only in case (the old code trained a third class that validation and test
    never score). A test row labelled 'pos' with a zero-width joiner after it: refused as a label
    written two ways (the old code said that the test label 'pos' is not in the training split's
    set, which holds 'pos': it named no cause). A line of zero-width spaces, a Hangul filler, a
    blank braille pattern or an unassigned default-ignorable code point given to predict: refused, as training refuses such a text (the old code
    printed a label for a text the model never sees, or sees as [UNK] alone)."""
    if case == "a-fraction-with-a-folder":
        with refusal(r"^error: --valid-fraction splits one --data file; --data \S+ is a set with its own train, "
                     r"valid and test splits"):
            run(setup, tmp_path / "out", "--valid-fraction", "0.2")
    elif case in RELABELLED:
        split, label, said = RELABELLED[case]
        data = tmp_path / "data"
        shutil.copytree(setup / "data", data)
        rows = (data / split).read_text().splitlines()
        rows[0] = rows[0].rsplit("\t", 1)[0] + "\t" + label
        (data / split).write_text("\n".join(rows) + "\n")
        with refusal(said):
            run(setup, tmp_path / "out", "--data", str(data))
    else:
        summary = run(setup, tmp_path / "p", "--epochs", "1")
        for n, blank in enumerate(("\u200b\u200b", "\u3164", "\u2800", "\u2065", "\ufff0"), 2):  # dropped, or [UNK]
            (tmp_path / "in.txt").write_text("a good film\n" * (n - 1) + blank + "\n")
            capsys.readouterr()
            with refusal(rf"^error: \S+in.txt: sentence {n} \({re.escape(ascii(blank))}\) holds nothing the tokenizer"):
                finetune.main(["predict", "--model", summary["model"], "--file", str(tmp_path / "in.txt")])
    assert not (tmp_path / "out").exists()
