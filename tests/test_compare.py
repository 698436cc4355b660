"""experiments/compare.py: the controlled comparisons of S29-S32."""

import fcntl
import itertools
import json
import os
import re
import shutil
import statistics

import pytest
import torch

import finetune
from experiments import compare
from minibert.run.baselines import L2_GRID, BagOfWords
from experiments.harness import Budget, Encoder, FineTuned, FrozenFeatures, Task, pad, token_counts

from conftest import TINY_REORDER, assert_close, perturb_, refusal
from data.prepare import fetch_minilm
from minibert import BertConfig, BertModel, load_tokenizer
from minibert.model import load_model
from minibert.run.folders import LOCK_FILE
from minibert.run.labelled import truncate


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    """A 2-layer, 32-wide BERT on MiniLM's 30,522-word vocabulary (random weights, perturbed):
    the second encoder of the quick runs, small enough to cost nothing."""
    path = tmp_path_factory.mktemp("tiny") / "ckpt"
    cfg = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64)
    torch.manual_seed(0)
    perturb_(BertModel(cfg)).save_pretrained(path, tokenizer=load_tokenizer(fetch_minilm()))
    return str(path)


@pytest.fixture(scope="module")
def small_task():
    return Task.load(n_train=48, n_valid=32, n_test=40)


S32_KEYS = ["test_acc_mean", "test_acc_std", "test_f1_mean", "test_f1_std", "train_s", "predict_256_ms",
            "peak_memory_mb", "total_params", "trainable_params", "encoder_forward", "encoder_backward"]


def hand_macro_f1(pred: list[int], gold: list[int]) -> float:
    """Two labels: F1 of label c = 2 TP / (2 TP + FP + FN) (0 when it never occurs either way); the mean."""
    f1 = []
    for c in (0, 1):
        tp = sum(p == c and g == c for p, g in zip(pred, gold))
        fp = sum(p == c and g != c for p, g in zip(pred, gold))
        fn = sum(p != c and g == c for p, g in zip(pred, gold))
        f1.append(2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0)
    return sum(f1) / 2


def assert_quick_study_values(study, rows, runs, gold, shapes):
    """The numbers of a --quick study (SETTINGS["quick"]: 4 updates of 16 samples, 2 seeds, 96
    test rows), each checked against what it must be:
    - every run: its test accuracy is the share of its 96 saved predictions equal to the test
      labels, its macro-F1 the hand-computed one (hand_macro_f1), to 1e-6 (float32 fractions <= 1:
      a few roundings of u = 6.0e-8; one prediction more or less moves them by 1/96 = 0.0104 or more);
    - every row: accuracy and macro-F1 in [0, 1]; the mean and sample sd over the row's seeds of
      the runs at the row's chosen rate (or penalty), to 1e-6 (means and sd of 2 such fractions in
      float64: still a few float32 roundings), so a mean is a multiple of 1/(96 x seeds);
    - the chosen rate is from the study's grid (LR_GRID; bag-of-words: L2_GRID), and when the
      grid was searched it has the best validation accuracy of the grid, the smaller rate on a tie;
    - parameters: full fine-tuning trains all of them; frozen trains the head alone, a Linear
      (C -> 2): 2C + 2, and counts the same total as full; LoRA (rank 8 on the query and value
      Linears, C x C each, of every layer) trains 2 x L x 8 x (C + C) adapter weights plus the
      head, and its total is full's plus the adapters;
    - encoder passes during training: one forward and one backward per update (4) when the
      encoder trains (full, LoRA), none when it is frozen (cached features) or absent (bag-of-words);
    - time, prediction time and peak memory are positive;
    - padding study: per row, its training tokens (64 = 4 x 16 rows): effective <= stored, the
      padding ratio 1 - effective / stored, global padding stores 64 x max length; the share of
      truncated samples never grows with the max length; the errors by raw length cover the 96
      test rows and their n-weighted sum is the row's error, 96 x (1 - accuracy) (abs 1e-4: 96 times
      a float32 accuracy is within 96 x 6.0e-8 = 6e-6; one prediction is 0.5 of a 2-seed mean). The
      padding ratio is the same float64 division on both sides (pytest.approx's rel 1e-6 is slack)."""
    updates, seeds = compare.SETTINGS["quick"]["updates"], compare.SETTINGS["quick"]["seeds"]
    for rec in runs:
        pred = rec["test_pred"]
        assert len(pred) == len(gold) == 96
        assert rec["test_acc"] == pytest.approx(sum(p == g for p, g in zip(pred, gold)) / 96, abs=1e-6), rec["seed"]
        assert rec["test_macro_f1"] == pytest.approx(hand_macro_f1(pred, gold), abs=1e-6), rec["seed"]
    by_encoder = {}
    for r in rows:
        if r["method"] != "bag-of-words":
            by_encoder.setdefault(r["encoder"], {})[r["method"]] = r
        assert 0 <= r["test_acc_mean"] <= 1 and 0 <= r["test_f1_mean"] <= 1, r
        assert r["train_s"] > 0 and r["predict_256_ms"] > 0 and r["peak_memory_mb"] > 0, r
        assert 0 < r["trainable_params"] <= r["total_params"], r
        kind, value = r["chosen"].split()
        value = float(value)
        grid = L2_GRID if kind == "l2" else compare.LR_GRID
        assert value in grid, r["chosen"]
        if r["grid_valid_acc"]:
            accs = {float(k): v for k, v in r["grid_valid_acc"].items()}
            assert set(accs) == set(grid) and all(0 <= v <= 1 for v in accs.values()), r["grid_valid_acc"]
            assert accs[value] == max(accs.values()), (r["chosen"], accs)
            if kind == "lr":
                assert value == min(lr for lr, v in accs.items() if v == accs[value]), "the smaller rate on a tie"
        own = [rec for rec in runs if rec.get("l2" if kind == "l2" else "lr") == value]
        n = r["seeds"]
        assert n == (1 if kind == "l2" else seeds), r
        matches = [combo for combo in itertools.product(*[[x for x in own if x["seed"] == s] for s in range(n)])
                   if abs(sum(x["test_acc"] for x in combo) / n - r["test_acc_mean"]) < 1e-6
                   and abs(sum(x["test_macro_f1"] for x in combo) / n - r["test_f1_mean"]) < 1e-6]
        assert matches, f"{r['encoder']} {r['method']}: no runs at {r['chosen']} average to its scores"
        accs = [x["test_acc"] for x in matches[0]]
        assert r["test_acc_std"] == pytest.approx(statistics.stdev(accs) if n > 1 else 0.0, abs=1e-6)
        trains_encoder = r["method"] not in ("frozen", "bag-of-words")
        assert (r["encoder_forward"], r["encoder_backward"]) == ((updates, updates) if trains_encoder else (0, 0)), r
        if study == "padding":
            L, tokens = r["max_length"], r["train_tokens"]
            assert L in compare.MAX_LENGTHS and r["padding"] in compare.PADDINGS
            assert 0 < tokens["effective_tokens"] <= tokens["stored_tokens"] <= 64 * L, tokens
            assert tokens["padding_ratio"] == pytest.approx(1 - tokens["effective_tokens"] / tokens["stored_tokens"])
            if r["padding"] == "global":
                assert tokens["stored_tokens"] == 64 * L, tokens
            assert 0 <= tokens["truncated_samples"] <= 1 and 0 <= tokens["truncated_tokens"] <= 1
            bins = r["errors_by_length"]
            assert sum(b["n"] for b in bins) == 96
            assert all((b["error"] is None) == (b["n"] == 0) for b in bins)
            wrong = sum(b["n"] * b["error"] for b in bins if b["n"])
            assert wrong == pytest.approx(96 * (1 - r["test_acc_mean"]), abs=1e-4), (wrong, r["test_acc_mean"])
    for encoder, methods in by_encoder.items():
        if study == "padding":
            for padding in compare.PADDINGS:
                same = sorted((r["max_length"], r["train_tokens"]["truncated_samples"]) for r in rows
                              if r["encoder"] == encoder and r["padding"] == padding and not r["bucketed"])
                assert [t for _, t in same] == sorted((t for _, t in same), reverse=True), same
            continue
        C, L = shapes(encoder)
        head = 2 * C + 2
        full = methods["full"]
        assert full["trainable_params"] == full["total_params"]
        frozen = methods["frozen"]
        assert frozen["trainable_params"] == head and frozen["total_params"] == full["total_params"]
        if study == "peft":
            lora = methods[f"LoRA r{compare.LORA_RANK}"]
            adapters = 2 * L * compare.LORA_RANK * (C + C)
            assert lora["trainable_params"] == adapters + head
            assert lora["total_params"] == full["total_params"] + adapters


@pytest.mark.slow
@pytest.mark.parametrize("study", ["methods", "peft", "padding"])
def test_quick_study_reports_every_s32_column_for_every_row(study, tmp_path, tiny_checkpoint):
    """--quick runs the study end to end with both kinds of encoder (MiniLM: hidden 384, 6
    layers; the tiny checkpoint: 32, 2): every row of results.json has every S32 number, each of
    them what it must be (assert_quick_study_values), report.md has every S32 column header and
    one table line per row, and one JSON file per run is written."""
    rows = compare.main([study, "--quick", "--out", str(tmp_path), "--encoders", f"minilm,{tiny_checkpoint}"])
    out = tmp_path / study
    saved = json.loads((out / "results.json").read_text())["rows"]
    assert len(saved) == len(rows) and len(rows) == {"methods": 5, "peft": 6, "padding": 14}[study]
    for r in saved:
        for key in S32_KEYS:
            assert isinstance(r[key], (int, float)) and r[key] == r[key], (r["method"], key)  # present, not NaN
    runs = [json.loads(p.read_text()) for p in sorted((out / "runs").glob("*.json"))]
    gold = Task.load(**{k: compare.SETTINGS["quick"][k] for k in ("n_train", "n_valid", "n_test")}).test.labels.tolist()
    shapes = lambda encoder: (384, 6) if encoder.startswith("MiniLM") else (32, 2)
    assert_quick_study_values(study, saved, runs, gold, shapes)
    text = (out / "report.md").read_text()
    for column in compare.S32_COLUMNS:
        assert column in text
    assert sum(line.startswith("| MiniLM-L6") or line.startswith("| minibert") or line.startswith("| - ")
               for line in text.splitlines()) >= len(rows)
    assert len(runs) >= len(rows)
    assert (out / "accuracy_vs_time.png").stat().st_size > 0


def test_bag_of_words_vocabulary_comes_from_the_training_split_only():
    """S29: 'good film' and 'bad film' give the vocabulary [UNK], bad, film, good (sorted);
    'good popcorn' (popcorn only in the test text) sets good and [UNK], nothing else."""
    bow = BagOfWords(["good film", "bad film"], num_labels=2)
    assert bow.vocab == {"[UNK]": 0, "bad": 1, "film": 2, "good": 3}
    assert bow.features(["good popcorn"]).to_dense().tolist() == [[1.0, 0.0, 0.0, 1.0]]
    assert bow.features(["good good film"]).to_dense().tolist() == [[0.0, 0.0, 1.0, 1.0]]  # 0/1, not counts
    assert "popcorn" not in bow.vocab


def test_bag_of_words_iterations_never_exceed_the_preset_maximum(small_task):
    """L-BFGS stops at max_iter: with 2 allowed it reports exactly 2 (far from converged on 48
    reviews); with 100 allowed it reports its own count, at most 100, and fits the training pool."""
    texts, y = small_task.train.texts, small_task.train.labels
    capped = BagOfWords(texts, 2)
    assert capped.fit(capped.features(texts), y, l2=1e-3, max_iter=2) == 2
    free = BagOfWords(texts, 2)
    n = free.fit(free.features(texts), y, l2=1e-3, max_iter=100)
    assert 2 < n <= 100
    assert (free.predict(texts) == y).float().mean() > 0.9


def test_frozen_encoder_gets_no_backward_pass_and_caches_its_own_outputs(small_task, tiny_checkpoint):
    """The frozen method: the encoder runs once per cached batch (ceil(48/64) + ceil(32/64) +
    ceil(40/64) = 3 forward passes) and never during head training, forward or backward; the cache
    equals the eval-mode encoder's [CLS] vectors. Full fine-tuning, by contrast,
    counts one forward and one backward pass per update.
    The cache runs SDPA and the padding-free path, `direct` the written-out one, on the same 40
    reviews of up to 128 tokens: sums in other orders, about 18 chained sums of at most 128 terms
    (the keys) at |h| <= 4 (perturbed at 0.1): 18 x 128 x 6.0e-8 x 4 = 5.5e-4, atol 1e-3 (7e-7
    measured); a cache made in training mode (dropout 0.1) or of another split is off by 0.1 or more."""
    enc = Encoder.open(tiny_checkpoint, small_task)
    frozen = FrozenFeatures(enc)
    assert frozen.cache["encoder_forward"] == 3 and frozen.cache["encoder_backward"] == 0
    budget = Budget(updates=5, batch_size=16, lr_grid=(1e-3,))
    rec = frozen.train(frozen.new_head(0), small_task, budget, 1e-3, seed=0)
    assert rec["encoder_forward"] == 0 and rec["encoder_backward"] == 0
    assert all(not p.requires_grad or p.grad is None for p in frozen.bert.parameters())
    model = BertModel.from_pretrained(tiny_checkpoint).eval()
    ids, mask = pad(enc.tokens["test"], enc.pad_id, 128, "dynamic")
    with torch.no_grad():
        direct = model(ids, mask).last_hidden_state[:, 0]
    assert_close(frozen.features["test"], direct, atol=1e-3, what="cached features")
    full = FineTuned(enc, seed=0).train(small_task, budget, 1e-3, seed=0)
    assert full["encoder_forward"] == 5 and full["encoder_backward"] == 5


@pytest.mark.parametrize("unpad", [False, True], ids=["reference", "unpad"])
def test_dynamic_and_global_padding_predict_the_same_for_one_trained_model(small_task, tiny_checkpoint, unpad):
    """Padding invariance at the task level (S31): one model, trained a few updates, labels the
    test reviews identically with dynamic padding and with global padding to 128, and its logits
    agree to float32 rounding: other shapes sum in other orders, about 20 chained sums of at most
    128 terms (the keys) at |values| <= 4: 20 x 128 x 6.0e-8 x 4 = 6.1e-4, atol 1e-3; padding let
    into attention would move them by 0.1 or more. (The labels are equal unless a review's two
    logits lie within that rounding of each other.)"""
    enc = Encoder.open(tiny_checkpoint, small_task)
    ft = FineTuned(enc, seed=0, unpad=unpad)
    ft.train(small_task, Budget(updates=5, batch_size=16, lr_grid=(1e-3,)), 1e-3, seed=0)
    seqs = enc.tokens["test"]
    assert torch.equal(ft.predict(seqs, 128, "dynamic"), ft.predict(seqs, 128, "global"))
    assert_close(ft.logits(seqs, 128, "dynamic"), ft.logits(seqs, 128, "global"), atol=1e-3, what="logits")


def test_token_and_truncation_counts_by_hand():
    """Three rows of 3, 6 and 2 tokens ([CLS] ... [SEP]), batches of 2, max length 4:
      batch 1 keeps 3 + 4 tokens (the 6-token row loses 2 and keeps its [SEP]); batch 2 keeps 2.
      effective = 9; dynamic stores 2x4 + 1x2 = 10 (padding 1/10); global stores 2x4 + 1x4 = 12
      (padding 3/12); 1 of 3 samples and 2 of 11 raw tokens are truncated."""
    seqs = [[101, 5, 102], [101, 5, 6, 7, 8, 102], [101, 102]]
    assert truncate(seqs[1], 4) == [101, 5, 6, 102]
    dyn, glob = token_counts(seqs, 2, 4, "dynamic"), token_counts(seqs, 2, 4, "global")
    assert (dyn["effective_tokens"], dyn["stored_tokens"]) == (9, 10)
    assert (glob["effective_tokens"], glob["stored_tokens"]) == (9, 12)
    # float64 ratios of small counts, within a rounding (1.1e-16) of the fractions: approx's rel 1e-6 is slack
    assert dyn["padding_ratio"] == pytest.approx(0.1) and glob["padding_ratio"] == pytest.approx(0.25)
    assert dyn["truncated_samples"] == pytest.approx(1 / 3) and dyn["truncated_tokens"] == pytest.approx(2 / 11)
    ids, mask = pad(seqs[:2], 0, 4, "dynamic")
    assert ids.tolist() == [[101, 5, 102, 0], [101, 5, 6, 102]] and mask.sum() == 7
    assert pad(seqs[2:], 0, 4, "global")[0].tolist() == [[101, 102, 0, 0]]


def test_the_learning_rate_rule_and_one_test_scoring_per_configuration():
    """select_and_run: seed 0 tries each rate; the best validation accuracy wins, the smaller rate
    on a tie; the other seeds run at the winner only; the test split is scored once per kept run."""
    calls, scored = [], []
    valid = {1e-4: 0.7, 1e-3: 0.7, 1e-2: 0.6}

    def run_one(lr, seed):
        calls.append((lr, seed))
        return {"valid_acc": valid[lr]}, lambda: scored.append((lr, seed)) or {"lr": lr, "seed": seed}

    best, records, grid = compare.select_and_run(run_one, (1e-4, 1e-3, 1e-2), [0, 1, 2])
    assert best == 1e-4
    assert calls == [(1e-4, 0), (1e-3, 0), (1e-2, 0), (1e-4, 1), (1e-4, 2)]
    assert scored == [(1e-4, 0), (1e-4, 1), (1e-4, 2)] and len(records) == 3
    assert grid == {"0.0001": 0.7, "0.001": 0.7, "0.01": 0.6}


def test_label_budgets_are_nested_seeded_subsets():
    """The curve adds labels and changes nothing else. For 100 training rows and budgets 10, 40
    and all (None): exactly 10, 40 and 100 row indices, each list sorted without repeats, `all`
    being every row; the 10 lie within the 40, which lie within all. The rows are fixed: asking
    again, asking in the other order, or asking for 40 alone gives the same 40 (a budget's rows
    do not depend on which other budgets are run). They are a shuffle, not the file's first rows
    (a file may be ordered by label or source). Balance between labels is not required."""
    small, mid, full = compare.label_subsets(100, (10, 40, None))
    assert [len(small), len(mid)] == [10, 40] and full == list(range(100))
    for rows in (small, mid):
        assert rows == sorted(set(rows)) and set(rows) <= set(full)
    assert set(small) <= set(mid)
    assert compare.label_subsets(100, (10, 40, None)) == [small, mid, full]
    assert compare.label_subsets(100, (40, 10)) == [mid, small]
    assert compare.label_subsets(100, (40,)) == [mid]
    assert small != list(range(10)) and mid != list(range(40))


def test_a_random_init_encoder_keeps_the_config_and_tokenizer_but_not_the_weights(small_task, tiny_checkpoint):
    """`random:FOLDER` tokenises like FOLDER and builds the same shapes, but its weights are a
    fresh init from the global seed: two seeds differ, one seed repeats, and none equals the
    checkpoint's."""
    pretrained = Encoder.open(tiny_checkpoint, small_task)
    random = Encoder.open(f"random:{tiny_checkpoint}", small_task)
    assert random.tokens == pretrained.tokens and random.name.startswith("random init")
    saved = pretrained.backbone().state_dict()
    torch.manual_seed(0)
    a = random.backbone().state_dict()
    torch.manual_seed(0)
    b = random.backbone().state_dict()
    torch.manual_seed(1)
    c = random.backbone().state_dict()
    key = "layers.0.attention.query.weight"
    assert a.keys() == saved.keys() and a[key].shape == saved[key].shape
    assert torch.equal(a[key], b[key]) and not torch.equal(a[key], c[key]) and not torch.equal(a[key], saved[key])


def assert_scores_recomputed(rows, run, task):
    """Every score of the pretraining study's quick table (budgets 32 and 96, 2 seeds, 96 test
    rows) against a computation of its own, so that no row can land anywhere in [0, 1] unnoticed.
    `run(encoder, n_labels, seed)` is a fine-tuning run's saved record.
      majority class: the label more frequent among the budget's training rows (0 on a tie) is
        predicted for every test row; c of the 96 carry it, so accuracy c / 96 and macro-F1
        (2c / (2c + (96 - c)) + 0) / 2 = c / (96 + c) (the other label has no true positive).
      bag-of-words: refitted here on the budget's rows (the penalty tuned on validation; zeros
        init and full-batch L-BFGS, so deterministic): the same penalty and test accuracy.
      fine-tuned rows: the mean over the 2 seeds of the share of the run's 96 saved test
        predictions that equal the test labels, after the hand-computed number of updates:
        1 epoch of batches of 16 but at least 4, so max(4, 32/16 = 2) = 4 at 32 labels and
        max(4, 96/16 = 6) = 6 at 96.
    Accuracies are multiples of 1/96 (1/192 = 0.0052 for a mean over 2 seeds), computed in
    float32 (within u = 6.0e-8 of the fraction): abs 1e-6 notices a single prediction of difference."""
    gold = task.test.labels.tolist()
    assert len(gold) == 96 and sorted({r["n_labels"] for r in rows}) == [32, 96]
    for keep, n in zip(compare.label_subsets(len(task.train.texts), (32, 96)), (32, 96)):
        train_labels = task.train.labels[keep].tolist()
        majority = 0 if train_labels.count(0) >= train_labels.count(1) else 1
        c = gold.count(majority)
        bow = BagOfWords.tuned(([task.train.texts[i] for i in keep], task.train.labels[keep]),
                               (task.valid.texts, task.valid.labels), 2)
        bow_acc = sum(p == g for p, g in zip(bow.model.predict(task.test.texts).tolist(), gold)) / 96
        for r in rows:
            if r["n_labels"] != n:
                continue
            if r["encoder"] == "majority class":
                assert r["test_acc_mean"] == pytest.approx(c / 96, abs=1e-6), (r, c)
                assert r["test_f1_mean"] == pytest.approx(c / (96 + c), abs=1e-6), (r, c)
            elif r["encoder"] == "bag-of-words":
                assert r["chosen"] == f"l2 {bow.l2:g}" and r["test_acc_mean"] == pytest.approx(bow_acc, abs=1e-6), r
            else:
                runs = [run(r["encoder"], n, seed) for seed in (0, 1)]
                accs = [sum(p == g for p, g in zip(rec["test_pred"], gold, strict=True)) / 96 for rec in runs]
                assert r["test_acc_mean"] == pytest.approx(sum(accs) / 2, abs=1e-6), (r, accs)
                assert r["updates"] == {32: 4, 96: 6}[n], r


def test_pretraining_study_scores_every_row_on_its_splits(tiny_checkpoint):
    """The pretraining study's table with its quick settings and the tiny encoder, every score
    recomputed by assert_scores_recomputed (the splits: the whole training split to draw the
    budgets from, 64 validation rows, 96 test rows)."""
    settings = compare.PRETRAINING_SETTINGS["quick"]
    task = Task.load(10 ** 9, settings["n_valid"], settings["n_test"])
    rows, runs = compare.pretraining_study(task, [Encoder.open(tiny_checkpoint, task)], settings, [0, 1], "cpu")
    assert len(rows) == 6  # bag-of-words, the encoder and the majority class at each budget
    saved = {f"{name}-seed{rec['seed']}": rec for name, rec in runs}
    assert_scores_recomputed(rows, lambda encoder, n, seed: saved[f"{encoder}-{n}-seed{seed}"], task)


@pytest.mark.slow
def test_quick_pretraining_study_builds_its_checkpoint_and_reports_every_row(tmp_path):
    """`pretraining --quick` from nothing: it pretrains a bert-tiny for 20 steps (train_mlm.py),
    then fine-tunes it and its random-init twin at 32 and 96 labels, beside bag-of-words and the
    majority class (and MiniLM when its weights are already fetched). Every row has accuracy and
    macro-F1 at every budget, each neural rate comes from the shared grid, the report holds the
    three tables and the difference row, and the label curve is drawn. Every score is recomputed
    (assert_scores_recomputed) from the saved runs on the study's splits (64 validation rows, 96
    test rows, the whole training split to draw the budgets from)."""
    rows = compare.main(["pretraining", "--quick", "--out", str(tmp_path)])
    out = tmp_path / "pretraining"
    assert (out / "quick-mlm" / "summary.json").is_file()
    models = {r["encoder"] for r in rows}
    assert {"bag-of-words", "majority class"} <= models
    assert any(m.startswith("random init") for m in models) and any(m.startswith("minibert") for m in models)
    for model in models:
        assert sorted(r["n_labels"] for r in rows if r["encoder"] == model) == [32, 96], model
    for r in rows:
        if r["encoder"] not in ("bag-of-words", "majority class"):
            assert r["seeds"] == 2 and float(r["chosen"].split()[1]) in compare.PRETRAINING_LR_GRID
            assert set(r["grid_valid_acc"]) == {str(lr) for lr in compare.PRETRAINING_LR_GRID}

    def saved_run(encoder, n_labels, seed):
        name = f"{encoder}-{n_labels}-seed{seed}".replace(" ", "_").replace("/", "_")
        return json.loads((out / "runs" / f"{name}.json").read_text())

    assert_scores_recomputed(rows, saved_run, Task.load(10 ** 9, 64, 96))
    text = (out / "report.md").read_text()
    for title in ("Test accuracy", "Test macro-F1", "Chosen on validation", "Pretrained minus random init"):
        assert title in text
    assert len(json.loads((out / "results.json").read_text())["rows"]) == len(rows)
    assert (out / "accuracy_vs_labels.png").stat().st_size > 0


def test_budgets_flag_is_checked(tmp_path):
    """Numbers or `all`, each at least 2 and at most the training split's 8,472; pretraining only;
    checked before --quick pretrains its checkpoint, so a refusal leaves no folder."""
    for bad in (["pretraining", "--budgets", "ten"], ["pretraining", "--budgets", "1"], ["methods", "--budgets", "64"],
                ["pretraining", "--budgets", "100,9000", "--encoders", "minilm"],  # the split holds 8,472
                ["pretraining", "--budgets", "250,250"], ["pretraining", "--quick", "--budgets", "32,999999"]):
        with refusal("--budgets"):
            compare.main([*bad, "--out", str(tmp_path / "out")])
        assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("spec", ["{folder}", "random:{folder}", "minilm,{folder}"])
def test_an_encoder_folder_with_a_comma_in_its_name_is_named(tmp_path, tiny_checkpoint, spec):
    """--encoders is cut at commas, so a checkpoint folder named `x,y` was read as the folders `x`
    and `y`: "x is neither `minilm` nor a checkpoint folder", about a folder the user never named.
    Now one line naming the folder and its comma, before --out is made."""
    folder = tmp_path / "x,y"
    shutil.copytree(tiny_checkpoint, folder)
    with refusal(rf"^error: --encoders: {re.escape(str(folder))} has a comma in its name, and --encoders is cut at "
                 "commas; rename it, or give a link to it named without one$"):
        compare.main(["methods", "--quick", "--out", str(tmp_path / "out"), "--encoders", spec.format(folder=folder)])
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("where", ["the-run", "inside-the-run", "the-study-folder"])
def test_a_study_is_never_written_into_a_run(tmp_path, where):
    """--out a fine-tuning run folder, or a folder inside one (its best/): the study's folders
    would be deleted with the run by its --overwrite. So for an --out whose study folder
    (OUT/methods) is a run: the code before this one wrote the study's report into the run,
    rewrote its lock, and the run's --overwrite then refused a folder holding what no run writes.
    One line before anything is loaded or made."""
    run = tmp_path / ("methods" if where == "the-study-folder" else "cls")
    (run / "best").mkdir(parents=True)
    (run / "run.json").write_text('{"kind": "fine-tuning"}')
    out = {"the-run": run, "inside-the-run": run / "best" / "study", "the-study-folder": tmp_path}[where]
    before = sorted(tmp_path.rglob("*"))
    said = f": its methods folder is the fine-tuning run {re.escape(str(run))}" if where == "the-study-folder" \
        else " is in the fine-tuning run .*cls"
    with refusal(rf"--out {re.escape(str(out))}{said}; a study never goes inside a run"):
        compare.main(["methods", "--quick", "--out", str(out)])
    assert sorted(tmp_path.rglob("*")) == before


@pytest.mark.parametrize("link", ["methods", "methods/runs"])
def test_a_study_never_writes_through_a_link_planted_in_its_folder(tmp_path, tiny_checkpoint, link):
    """A link at --out/methods or --out/methods/runs to a folder elsewhere: the per-run records
    would be written there. One line naming the link, before anything is loaded; the folder it
    points to stays empty."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "out" / link).parent.mkdir(parents=True)
    (tmp_path / "out" / link).symlink_to(elsewhere)
    with refusal(rf"{re.escape(str(tmp_path / 'out' / link))} is a symbolic link; a study never writes through one"):
        compare.main(["methods", "--quick", "--out", str(tmp_path / "out"), "--encoders", str(tiny_checkpoint)])
    assert list(elsewhere.iterdir()) == []


def test_a_study_lock_that_is_a_hard_link_is_replaced_not_written_into(tmp_path):
    """A study's .lock hard-linked to a file elsewhere (planted, or a copy of the results made with
    `cp -al`): the code before this one wrote its pid into it, overwriting that file (as a run's
    lock once did: test_hostile_inputs.py::test_a_lock_file_that_is_a_hard_link_is_replaced_not_written_into).
    The study (refused here for its encoders, after it took the lock) leaves the file as it was."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (tmp_path / "out" / "peft").mkdir(parents=True)
    os.link(victim, tmp_path / "out" / "peft" / LOCK_FILE)
    with refusal("is neither `minilm` nor a checkpoint folder"):
        compare.main(["peft", "--quick", "--out", str(tmp_path / "out"), "--encoders", str(tmp_path / "missing")])
    assert victim.read_text() == "precious\n" and os.stat(victim).st_nlink == 1


def test_bag_of_words_penalty_is_picked_on_validation_the_larger_on_a_tie():
    """"great" marks label 1 and "awful" label 0 in training; every penalty of the grid labels the
    two validation texts right (accuracy 1.0 each), so the tie goes to the largest, 1e-2."""
    train = (["a great film", "an awful film", "great fun", "awful mess"], torch.tensor([1, 0, 1, 0]))
    valid = (["great acting", "awful plot"], torch.tensor([1, 0]))
    fit = BagOfWords.tuned(train, valid, 2)
    assert (fit.l2, fit.valid_acc) == (1e-2, 1.0) and fit.model.predict(["so great"]).tolist() == [1]


def test_the_study_row_is_finetune_py_run_seed_by_seed(setup, tmp_path):
    """The study's fine-tuned row and finetune.py share one loop, head and recipe: on the tiny
    labelled set (400 training sentences, batches of 16, so 25 updates an epoch; 4 epochs = 100
    updates at most, patience 1), finetune.py --head cls --seed 1 and the harness's FineTuned
    (seed 1, Budget of 100 updates, patience 1) keep the same epoch with the same validation
    accuracy, run the same number of epochs, and their kept models give the same test logits: the
    weights are bit for bit the same (the same loop, batches and kernels), but the harness scores
    with SDPA and the padding-free path, the reloaded copy with the written-out one, so to float32
    rounding (atol TINY_REORDER, conftest; 2.4e-7 measured). Seed 2 in the harness gives other
    logits (0.16 away): the agreement is not that of any two runs."""
    args = ["--checkpoint", str(setup / "ckpt"), "--data", str(setup / "data"), "--head", "cls", "--lr", "2e-3",
            "--epochs", "4", "--patience", "1", "--batch-size", "16", "--seed", "1", "--no-progress"]
    summary = finetune.main([*args, "--out", str(tmp_path / "ft")])
    epochs_run = len((tmp_path / "ft" / "metrics.jsonl").read_text().splitlines())
    task = Task.load(10 ** 9, 10 ** 9, 10 ** 9, data=str(setup / "data"))
    enc = Encoder.open(str(setup / "ckpt"), task)
    budget = Budget(updates=100, batch_size=16, lr_grid=(2e-3,), head="cls", patience=1)
    runs = {}
    for seed in (1, 2):
        runs[seed] = FineTuned(enc, seed=seed, head="cls")
        rec = runs[seed].train(task, budget, 2e-3, seed=seed)
        if seed == 1:
            assert (rec["best_epoch"], rec["epochs_run"]) == (summary["best_epoch"], epochs_run), (rec, summary)
            # k / n from the same weights and kernels: equal (abs 1e-9 absorbs the float); one flip moves it by 0.01
            assert rec["valid_acc"] == pytest.approx(summary["valid_acc"], abs=1e-9)
    kept = load_model(summary["model"]).eval()
    ids, mask = pad(enc.tokens["test"], enc.pad_id, 128, "dynamic")
    with torch.no_grad():
        theirs = kept(ids, mask)
    assert_close(runs[1].logits(enc.tokens["test"], 128, "dynamic"), theirs, atol=TINY_REORDER, what="seed 1")
    assert (runs[2].logits(enc.tokens["test"], 128, "dynamic") - theirs).abs().max() > 1e-3


def test_lr_grid_flag_is_checked_and_one_rate_is_no_pick(tmp_path, tiny_checkpoint, capsys):
    """--lr-grid: positive numbers, pretraining only, each refused in one line naming the flag.
    With one rate (1e-3) the neural row runs at it without a pick: chosen "lr 0.001", no
    validation grid, and each seed's run is at 1e-3."""
    for study, grid in (("pretraining", "fast"), ("pretraining", "1e-3,0"), ("pretraining", "nan"),
                        ("methods", "1e-3")):
        with pytest.raises(SystemExit) as e:
            compare.parse_args([study, "--lr-grid", grid])
        assert e.value.code == 2 and f"--lr-grid {grid}: " in capsys.readouterr().err
    args, settings = compare.parse_args(["pretraining", "--quick", "--lr-grid", "1e-3", "--budgets", "32"])
    assert settings["lr_grid"] == (1e-3,)
    task = Task.load(10 ** 9, settings["n_valid"], settings["n_test"])
    rows, runs = compare.pretraining_study(task, [Encoder.open(tiny_checkpoint, task)], settings, [0, 1], "cpu")
    neural = [r for r in rows if r["encoder"].startswith("minibert")]
    assert [(r["chosen"], r["grid_valid_acc"], r["seeds"]) for r in neural] == [("lr 0.001", {}, 2)]
    assert sorted((rec["lr"], rec["seed"]) for name, rec in runs if name.startswith("minibert")) == [(1e-3, 0), (1e-3, 1)]


def test_a_study_folder_holds_one_study_at_a_time(tmp_path, tiny_checkpoint, capsys):
    """A methods study with 2 seeds, then again with 1 seed in the same --out: runs/ holds the
    second study's records (the old code left the first study's seed-1 records beside them, under a
    report that does not count them), the removal said in a note, and what was put there by hand (a
    .json that is no run record, a folder) is kept. A second process on the same study folder while one
    runs (here: its lock held by this test) is refused in one line, and nothing is written (the
    old code ran both, and each wrote over the other's files)."""
    argv = ["methods", "--quick", "--out", str(tmp_path), "--encoders", str(tiny_checkpoint)]
    compare.main(argv + ["--seeds", "2"])
    runs = tmp_path / "methods" / "runs"
    assert any(p.name.endswith("-seed1.json") for p in runs.iterdir())
    (runs / "mine.json").write_text('{"my": "baseline"}\n')  # put there by hand: kept, as a folder is
    (runs / "folder.json").mkdir()
    compare.main(argv + ["--seeds", "1"])
    assert "note: removed " in capsys.readouterr().err
    records = sorted(p.name for p in runs.iterdir() if p.name not in ("mine.json", "folder.json"))
    assert records and all(name.endswith("-seed0.json") for name in records)
    assert (runs / "mine.json").read_text() == '{"my": "baseline"}\n' and (runs / "folder.json").is_dir()
    before = {p: p.read_bytes() for p in (tmp_path / "methods").rglob("*") if p.is_file()}
    with open(tmp_path / "methods" / LOCK_FILE, "r+") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with refusal(r"^error: --out \S+: its methods study is in use by another process \(pid \d+\); wait for it"):
            compare.main(argv + ["--seeds", "1"])
    assert {p: p.read_bytes() for p in (tmp_path / "methods").rglob("*") if p.is_file()} == before


def test_a_quick_study_in_a_new_folder_holds_its_lock_while_it_pretrains(tmp_path, monkeypatch):
    """`pretraining --quick` in a folder that does not exist yet pretrains its checkpoint into that
    folder: its lock is held from before then, so that a second study started meanwhile is refused
    (a helper's attack: the code before this one took the lock only once the encoders had loaded,
    so a second study, seeing no lock, pretrained OUT/pretraining/quick-mlm again with --overwrite
    under the first, which then stopped in a traceback). Seen here from inside: when the quick
    checkpoint is made, a second process's lock on the study's .lock is refused."""
    study = tmp_path / "out" / "pretraining"
    seen = []

    def quick_checkpoint(out):
        with open(study / LOCK_FILE) as other:
            try:
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
                seen.append("free")
            except BlockingIOError:
                seen.append("held")
        compare.die("stopped here")

    monkeypatch.setattr(compare, "quick_checkpoint", quick_checkpoint)
    with refusal("stopped here"):
        compare.main(["pretraining", "--quick", "--out", str(tmp_path / "out")])
    assert seen == ["held"]


def test_a_quick_study_changes_nothing_of_a_study_in_use(tmp_path):
    """A second `pretraining --quick` on an --out whose study another process runs (its lock held
    here): the code before this one pretrained its quick checkpoint again (train_mlm.py --overwrite
    into OUT/pretraining/quick-mlm) before it took the study's lock, deleting the checkpoint the
    first study was reading, which then stopped in a traceback. Now it is refused as in use before
    anything of the folder changes."""
    study = tmp_path / "out" / "pretraining"
    (study / "quick-mlm").mkdir(parents=True)
    (study / "quick-mlm" / "kept").write_text("the first study's")
    with open(study / ".lock", "w") as held:
        held.write("4242\n")
        held.flush()
        fcntl.flock(held, fcntl.LOCK_EX)
        with refusal(r"--out \S+: its pretraining study is in use by another process \(pid 4242\)"):
            compare.main(["pretraining", "--quick", "--out", str(tmp_path / "out")])
    assert sorted(p.name for p in study.rglob("*")) == [".lock", "kept", "quick-mlm"]
