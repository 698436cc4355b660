"""minibert/run/probes.py and `python probe.py`: what a checkpoint has learned."""

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

import conftest
import probe as command
import train_mlm
from conftest import TINY_REORDER, assert_close, perturb_, refusal, tiny_config
from data.prepare import CACHE
from minibert import BertConfig, BertForMaskedLM, BertModel, CheckpointError, MaskingVocab, mask_batch
from minibert.masking import VALID_MASK_SEED, fixed_masking
from minibert.run.baselines import MAX_ITER
from minibert.run.folders import checkpoints
from minibert.run.probes import (PROBE_MAX_ITER, SOURCES, AgreementItem, NGramCounts, agreement_input,
                                 agreement_margins, agreement_partners, bigram_probs, by_pair, continuation_ids,
                                 count_ngrams, find_agreement_items, linear_probe, mean_pool,
                                 more_frequent_form, ngram_scores, random_twin, sentence_features, summary_line,
                                 unigram_probs)
from minibert.text import Blocks

# ids 0-4 are [PAD] [UNK] [CLS] [SEP] [MASK]; 5, 6, 7 the ordinary words
HAND_VOCAB = MaskingVocab(mask_id=4, special_ids=(0, 1, 2, 3, 4), ordinary_token_ids=(5, 6, 7))


def test_ngram_cross_entropies_by_hand():
    """Training blocks [CLS] 5 6 5 6 5 [SEP] and [CLS] 7 [SEP] + padding. Ordinary tokens: c(5) = 3,
    c(6) = 2, c(7) = 1, N = 6, V' = 3, so add-one gives p(5) = 4/9, p(6) = 3/9, p(7) = 2/9.
    Adjacent ordinary pairs (none across [CLS]/[SEP]): 5->6 twice, 6->5 twice. Context 5: c = 2,
    one distinct follower (U = 1), so Witten-Bell gives p(6 | 5) = (2 + 1 * 3/9) / (2 + 1) = 7/9,
    p(5 | 5) = (4/9) / 3 = 4/27, p(7 | 5) = (2/9) / 3 = 2/27 (sum 1); context 7 was never followed
    by an ordinary token: its row is the unigram.

    Masked input [CLS] M M 5 M 7 M [SEP] with targets 6, 5, 6, 5 at positions 1, 2, 4, 6; the left
    neighbours are [CLS], [MASK], 5, 7, so only position 4 has a bigram context (backoff 3/4):
      unigram: -(ln 3/9 + ln 4/9 + ln 3/9 + ln 4/9) / 4 = ln(27/4) / 2 = 0.95477; predicts 5
               always: right at 2 and 6, accuracy 0.5
      bigram:  -(ln 3/9 + ln 4/9 + ln 7/9 + ln 4/9) / 4 = 0.74295; predicts 5, 5, 6, 5: accuracy 0.75
    All in float64 (u = 1.1e-16): a few roundings of fractions <= 1 and of logs <= 1.1, ~10 u = 1e-15,
    so abs 1e-12; a count off by one moves a probability by 1/27 or more."""
    ids = torch.tensor([[2, 5, 6, 5, 6, 5, 3], [2, 7, 3, 0, 0, 0, 0]])
    counts = count_ngrams(Blocks(ids, torch.zeros_like(ids), (ids != 0).long()), HAND_VOCAB)
    assert counts.unigram.tolist() == [0, 0, 0, 0, 0, 3, 2, 1]
    assert_close(unigram_probs(counts), torch.tensor([0, 0, 0, 0, 0, 4 / 9, 3 / 9, 2 / 9], dtype=torch.float64),
                 atol=1e-12, what="unigram")
    rows = bigram_probs(counts, torch.tensor([5, 7, 4]))
    assert_close(rows[0, 5:], torch.tensor([4 / 27, 7 / 9, 2 / 27], dtype=torch.float64), atol=1e-12, what="p(. | 5)")
    assert_close(rows[1], unigram_probs(counts), atol=1e-12, what="unseen context 7")
    assert_close(rows[2], unigram_probs(counts), atol=1e-12, what="[MASK] as context")
    assert_close(rows.sum(dim=1), torch.ones(3, dtype=torch.float64), atol=1e-12, what="row sums")

    masked = {"input_ids": torch.tensor([[2, 4, 4, 5, 4, 7, 4, 3]]),
              "labels": torch.tensor([[-100, 6, 5, -100, 6, -100, 5, -100]])}
    s = ngram_scores(counts, masked)
    assert s["n"] == 4
    assert s["unigram"]["loss"] == pytest.approx(math.log(27 / 4) / 2, abs=1e-12) and s["unigram"]["acc"] == 0.5
    bigram = -(math.log(3 / 9) + 2 * math.log(4 / 9) + math.log(7 / 9)) / 4
    assert s["bigram"]["loss"] == pytest.approx(bigram, abs=1e-12) and s["bigram"]["acc"] == 0.75
    assert s["bigram"]["backoff"] == 0.75


def test_the_validation_masking_is_one_seeded_draw_over_the_whole_split():
    """fixed_masking is ONE mask_batch call over the whole split from a generator seeded with
    VALID_MASK_SEED: the same call by hand gives the same tensors, and so does a second call
    (nothing it draws depends on the global generator)."""
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 99, (10, 16), generator=g)
    ids[:, 0], ids[:, -1] = 2, 3
    blocks = Blocks(ids, torch.zeros_like(ids), torch.ones_like(ids))
    vocab = MaskingVocab(mask_id=4, special_ids=(0, 1, 2, 3, 4), ordinary_token_ids=tuple(range(5, 99)))
    ours = fixed_masking(blocks, vocab, 0.3)
    x, y, _, _ = mask_batch(ids, blocks.attention_mask, vocab.special_mask(ids), 4, vocab.ordinary_tensor,
                            torch.Generator().manual_seed(VALID_MASK_SEED), 0.3, special_ids=vocab.special_ids)
    torch.manual_seed(99)
    again = fixed_masking(blocks, vocab, 0.3)
    for key, theirs in (("input_ids", x), ("labels", y)):
        assert torch.equal(ours[key], theirs) and torch.equal(again[key], theirs), key
    assert (ours["labels"] != -100).sum() > 0


def test_the_random_twin_is_step_0_and_leaves_the_global_generator_alone(tmp_path):
    """random_twin(path, seed) holds exactly the weights of BertForMaskedLM(config) right after
    torch.manual_seed(seed), as train_mlm.py draws them; torch's global generator is left as it
    was, so the next draw is the one it would have been without the twin."""
    cfg = tiny_config()
    BertForMaskedLM(cfg).save_pretrained(tmp_path)
    torch.manual_seed(123)
    expected_next = torch.rand(3)
    torch.manual_seed(123)
    twin = random_twin(str(tmp_path), seed=5)
    assert torch.equal(torch.rand(3), expected_next)
    torch.manual_seed(5)
    fresh = BertForMaskedLM(cfg).state_dict()
    assert all(torch.equal(v, fresh[k]) for k, v in twin.state_dict().items())


def hand_tokenizer(words: list[str]) -> Tokenizer:
    """A WordPiece tokenizer with exactly these words (lower-cased, BERT's pre-tokenizer)."""
    tok = Tokenizer(models.WordPiece({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tok


WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "dogs", "are", "here", "and", "is", "##land", "big",
         "she", "was", "were", "there", ".", "does", "he", "?", "it"]


def test_agreement_items_on_hand_sentences():
    """The vocabulary has is/are and was/were, `does` without `do`, no has/have: two pairs.
      "The dogs are here and the island is big."  the dogs are here and the is ##land is big .
          -> `are` at 2 (partner is), `is` at 8 (partner are); the `is` of `is ##land` (6) is no word
      "She was there. Does he?"  -> `was` at 1 (partner were); `does` has no partner
      "it is"  -> `is` at 1, the text's last token
    4 items. An item's input is [CLS] window [SEP] with the form masked; cut to 6 positions, the
    window holds 4 tokens: 2 before the masked token and 1 after (positions 6-9 around 8), or, near
    the start or the end of the text, its first or last 4 (0-3 around 2, 7-10 around 10); a shorter
    text is kept whole."""
    tok = hand_tokenizer(WORDS)
    v = tok.get_vocab()
    partners = agreement_partners(tok)
    assert partners == {v["is"]: (v["are"], "is/are"), v["are"]: (v["is"], "is/are"),
                        v["was"]: (v["were"], "was/were"), v["were"]: (v["was"], "was/were")}
    assert continuation_ids(tok) == {v["##land"]}
    texts = [tok.encode(s, add_special_tokens=False).ids
             for s in ("The dogs are here and the island is big.", "She was there. Does he?", "it is")]
    items = find_agreement_items(texts, partners, continuation_ids(tok))
    assert items == [AgreementItem(0, 2, v["are"], v["is"], "is/are"), AgreementItem(0, 8, v["is"], v["are"], "is/are"),
                     AgreementItem(1, 1, v["was"], v["were"], "was/were"), AgreementItem(2, 1, v["is"], v["are"], "is/are")]
    def window(text, position):
        ids, at = agreement_input(texts[text], position, v["[CLS]"], v["[SEP]"], v["[MASK]"], max_length=6)
        return [tok.id_to_token(i) for i in ids], at

    assert window(0, 8) == (["[CLS]", "is", "##land", "[MASK]", "big", "[SEP]"], 3)
    assert window(0, 2) == (["[CLS]", "the", "dogs", "[MASK]", "here", "[SEP]"], 3)
    assert window(0, 10) == (["[CLS]", "##land", "is", "big", "[MASK]", "[SEP]"], 4)
    assert window(2, 1) == (["[CLS]", "it", "[MASK]", "[SEP]"], 2)
    assert texts[0][8] == v["is"]  # the text itself is never modified


def test_agreement_margins_batched_and_the_more_frequent_form():
    """The margin logit(original) - logit(partner) of each item is the one read off a forward pass of
    its own input, whether the items run one by one or padded together. Other batch shapes sum in
    other orders, and a margin is a difference of two logits: twice conftest's 1.8e-4 bound, 3.6e-4,
    atol TINY_REORDER; items mixed up are off by 0.07 or more (the margins: -0.15, -0.08, -0.55, -0.91).
    The more frequent form, with training counts is 5, are 2, was 1, were 3: it answers `is` and
    `were`, so of the items are, is, was, is it gets is, is right: 2/4; is/are 2/3, was/were 0/1.
    Balanced over the forms present: are 0/1, is 2/2, was 0/1 -> (0 + 1 + 0) / 3 = 1/3; is/are
    (0 + 1) / 2 = 0.5, the score of any answer blind to the context; was/were 0."""
    tok = hand_tokenizer(WORDS)
    v = tok.get_vocab()
    texts = [tok.encode(s, add_special_tokens=False).ids
             for s in ("The dogs are here and the island is big.", "She was there. Does he?", "it is")]
    items = find_agreement_items(texts, agreement_partners(tok), continuation_ids(tok))
    torch.manual_seed(0)
    model = perturb_(BertForMaskedLM(tiny_config(vocab_size=len(WORDS)))).eval()
    one = agreement_margins(model, texts, items, tok, max_length=8, batch_size=1)
    together = agreement_margins(model, texts, items, tok, max_length=8, batch_size=4)
    assert_close(together, one, atol=TINY_REORDER, what="margins")
    ids, at = agreement_input(texts[0], 8, v["[CLS]"], v["[SEP]"], v["[MASK]"], max_length=8)
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, at]
    assert_close(one[1], logits[v["is"]] - logits[v["are"]], atol=TINY_REORDER, what="margin of item 1")

    unigram = torch.zeros(len(WORDS), dtype=torch.long)
    unigram[[v["is"], v["are"], v["was"], v["were"]]] = torch.tensor([5, 2, 1, 3])
    counts = NGramCounts(unigram, torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long),
                         torch.zeros(len(WORDS), dtype=torch.bool))
    s = by_pair(items, more_frequent_form(items, counts))
    assert (s["acc"], s["balanced"], s["n"]) == (0.5, 1 / 3, 4)
    assert s["by_pair"] == {"is/are": {"acc": 2 / 3, "balanced": 0.5, "right": 2, "n": 3},
                            "was/were": {"acc": 0.0, "balanced": 0.0, "right": 0, "n": 1}}


def test_the_summary_line_puts_balanced_agreement_beside_plain():
    """One line. The items are, is, was, is (the test above): a model right on are, is, -, is gets
    3/4 plain and (1 + 1 + 0) / 3 = 2/3 balanced; one right on are alone 1/4 and (1 + 0 + 0) / 3 =
    1/3; the more frequent form 2/4 and 1/3. Plain accuracy first, then balanced, each as
    checkpoint / random init / baseline."""
    v = hand_tokenizer(WORDS).get_vocab()
    items = [AgreementItem(0, 2, v["are"], v["is"], "is/are"), AgreementItem(0, 8, v["is"], v["are"], "is/are"),
             AgreementItem(1, 1, v["was"], v["were"], "was/were"), AgreementItem(2, 1, v["is"], v["are"], "is/are")]

    def probes(right, loss, frozen):
        return {"masked": {"loss": loss}, "agreement": {"pooled": by_pair(items, right)}, "frozen": {"test_acc": frozen}}

    s = {"budget": 1000, "model": probes([True, True, False, True], 6.0, 0.6),
         "random": probes([True, False, False, False], 9.0, 0.55),
         "baselines": {"ngram": {"unigram": {"loss": 7.0}, "bigram": {"loss": 5.9}},
                       "agreement": {"pooled": by_pair(items, [False, True, False, True])}, "majority_class_test_acc": 0.47}}
    assert summary_line(s) == (
        "probes on held-out text, checkpoint / random init / baselines: masked-token loss 6.000 / 9.000 / unigram "
        "7.000, bigram 5.900 nats; agreement (is/are ..., 4 items) 0.750 / 0.250 / more frequent form 0.500, "
        "balanced over the forms 0.667 / 0.333 / 0.333; logistic regression on frozen mean-pooled features, "
        "1,000 labels, sentiment test accuracy 0.600 / 0.550 / majority class 0.470")


def test_mean_pooling_excludes_padding():
    """Row 0: states (1, 2), (3, 4) and a padded (100, 100) -> mean (2, 3), the 100s never read;
    row 1, no padding: (1, 1), (2, 2), (3, 3) -> (2, 2). And a frozen encoder gives each text the
    same [CLS] and mean vectors padded in a batch as alone, in the order given (other batch shapes
    sum in other orders: atol TINY_REORDER, conftest; a text's vectors in another's place are off
    by 0.28 or more)."""
    h = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]], [[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]])
    assert mean_pool(h, torch.tensor([[1, 1, 0], [1, 1, 1]])).tolist() == [[2.0, 3.0], [2.0, 2.0]]
    torch.manual_seed(0)
    encoder = perturb_(BertModel(tiny_config())).eval()
    seqs = [[2, 10, 11, 12, 13, 3], [2, 20, 3], [2, 30, 31, 3]]
    together = sentence_features(encoder, seqs, pad_id=0, batch_size=3)
    for i, s in enumerate(seqs):
        alone = sentence_features(encoder, [s], pad_id=0)
        for pooling in ("cls", "mean"):
            assert_close(together[pooling][i], alone[pooling][0], atol=TINY_REORDER, what=f"{pooling} of text {i}")


def test_linear_probe_picks_its_penalty_on_validation_not_test():
    """One feature; training x = -1, -1, -1, 1, 1, 1 with labels 0, 0, 0, 1, 1, 0. With L2 1e-4 the
    regression follows x (x = 1 -> label 1, 2 of 3); with L2 1e3 its weight is ~0 and it answers
    the training majority, 0, everywhere. Validation (x = -1, 1; labels 0, 0) prefers 1e3 (accuracy
    1.0 against 0.5); test (labels 0, 1) would prefer 1e-4. The probe must keep 1e3, and score the
    test split with it: 0.5."""
    x = {"train": torch.tensor([[-1.0], [-1.0], [-1.0], [1.0], [1.0], [1.0]]),
         "valid": torch.tensor([[-1.0], [1.0]]), "test": torch.tensor([[-1.0], [1.0]])}
    y = {"train": torch.tensor([0, 0, 0, 1, 1, 0]), "valid": torch.tensor([0, 0]), "test": torch.tensor([0, 1])}
    r = linear_probe(x, y, num_labels=2, l2_grid=(1e-4, 1e3))
    assert r["l2"] == 1e3 and r["valid_acc"] == 1.0 and r["test_acc"] == 0.5
    assert r["grid_valid_acc"] == {"0.0001": 0.5, "1000.0": 1.0}


def test_linear_probe_runs_to_convergence():
    """Random labels on 80 training rows of 50 random features: nearly separable, so with L2 1e-4
    L-BFGS needs more than bag-of-words' 100 iterations to meet its tolerances (151 with this
    seed). The probe's fit runs until it meets them, under its cap of PROBE_MAX_ITER (1,000)."""
    g = torch.Generator().manual_seed(2)
    x = {s: torch.randn(80, 50, generator=g) for s in ("train", "valid", "test")}
    y = {s: torch.randint(0, 2, (80,), generator=g) for s in x}
    r = linear_probe(x, y, num_labels=2, l2_grid=(1e-4,))
    assert MAX_ITER < r["iterations"] == r["grid_iterations"]["0.0001"] < r["max_iter"] == PROBE_MAX_ITER


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A train_mlm.py-shaped run folder holding two checkpoints (step-000010 and step-000020) of a
    2-layer, 32-wide BERT on the `en` corpus's own 8,192-word tokenizer (random weights, perturbed
    by different seeds: no training needed to exercise the command)."""
    from data.prepare import prepare
    from minibert.run.corpus import corpus_tokenizer
    tokenizer = corpus_tokenizer(prepare("en", root=CACHE), 8192)
    run = tmp_path_factory.mktemp("probes") / "run"
    cfg = BertConfig(vocab_size=tokenizer.get_vocab_size(), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=128)
    for seed, step in ((0, 10), (1, 20)):
        torch.manual_seed(0)
        perturb_(BertForMaskedLM(cfg), seed=seed).save_pretrained(run / "checkpoints" / f"step-{step:06d}",
                                                                  tokenizer=tokenizer)
    return run


def test_the_command_end_to_end_on_a_tiny_checkpoint(tmp_path, tiny_run, capsys):
    """--checkpoint RUN probes its newest checkpoint and the random twin it adds; the table holds the
    model rows and every baseline; the baselines come out as counted (unigram cross-entropy near
    ln of a few thousand, the bigram below it), every accuracy is in [0, 1], every item is counted
    the same for every model, and the frozen probes picked their penalty from the grid.
    --run draws the same probes for each checkpoint (the random init as step 0) and the plot.
    --summary prints one line."""
    out = tmp_path / "ckpt"
    results = command.main(["--checkpoint", str(tiny_run), "--budgets", "40,120", "--out", str(out)])
    names = [m["name"] for m in results["models"]]
    assert names[0].startswith("minibert") and "step-000020" in names[0] and names[1].startswith("random init")
    (base,) = results["baselines"]
    assert 5 < base["ngram"]["bigram"]["loss"] < base["ngram"]["unigram"]["loss"] < math.log(8192)
    assert base["agreement"]["pooled"]["balanced"] == 0.5  # all 8 forms occur; the more frequent form is blind
    for m in results["models"]:
        assert m["masked"]["n"] == base["ngram"]["n"] > 1000
        for source, a in m["agreement"].items():
            assert a["n"] == base["agreement"][source]["n"] > 100 and 0 <= a["acc"] <= 1 and 0 <= a["balanced"] <= 1
        assert m["agreement"]["pooled"]["n"] == sum(m["agreement"][s]["n"] for s in SOURCES)
        for pooling in ("cls", "mean"):
            for budget in ("40", "120"):
                r = m["frozen"][pooling][budget]
                assert r["n_train"] == int(budget) and r["l2"] in (1e-4, 1e-3, 1e-2, 1e-1) and 0 <= r["test_acc"] <= 1
    text = (out / "report.md").read_text()
    for row in ("| minibert", "| random init", "| unigram", "| bigram", "| the form more frequent",
                "| bag-of-words", "| majority class"):
        assert row in text, row
    assert json.loads((out / "results.json").read_text())["models"][0]["name"] == names[0]

    out = tmp_path / "run"
    results = command.main(["--run", str(tiny_run), "--budgets", "40", "--out", str(out)])
    assert [r["step"] for r in results["steps"]] == [0, 10, 20]
    newest = json.loads((tmp_path / "ckpt" / "results.json").read_text())["models"][0]
    assert results["steps"][2]["masked"] == newest["masked"]  # the same checkpoint, the same numbers
    assert (out / "probes_vs_step.png").stat().st_size > 0
    capsys.readouterr()
    line = command.main(["--summary", str(tiny_run), "--budgets", "40"])
    assert capsys.readouterr().out.strip() == line and "\n" not in line and "random init" in line


def test_the_command_refuses_what_it_cannot_probe(tmp_path):
    """A folder that is no checkpoint, a run folder without checkpoints, and bad budgets: one line, no traceback."""
    for bad in (["--checkpoint", str(tmp_path)], ["--run", str(tmp_path)], ["--summary", str(tmp_path)],
                ["--checkpoint", "minilm", "--budgets", "ten"], ["--checkpoint", "minilm", "--budgets", "1"],
                ["--checkpoint", "minilm", "--budgets", "9000"]):
        with refusal(r"\S"):  # one line, whatever it says
            command.main([*bad, "--out", str(tmp_path / "out")])


def saved_run(folder, seq_len=64, mask_prob=0.2, seed=3, corpus_name="en"):
    """A training_state.pt in `folder` as train_mlm.py writes it, reduced to what the probes read:
    the run's flags (and, unless None, the prepared corpus's name, which runs before it lacked)."""
    folder.mkdir(parents=True, exist_ok=True)
    state = {"step": 20, "args": {"corpus": ["en"], "seq_len": seq_len, "mask_prob": mask_prob, "seed": seed,
                                  "vocab_size": 8192}}
    if corpus_name is not None:
        state["corpus_name"] = corpus_name
    torch.save(state, folder / "training_state.pt")
    return str(folder)


def test_the_probes_take_the_flags_the_run_saved(tmp_path):
    """A run saved seq_len 64, mask_prob 0.2, seed 3: they are taken, not probe.py's 128, 0.3, 0;
    a run older than corpus_name gives its --corpus (["en"] -> "en"); a checkpoint with no
    training_state.pt takes the flags given, else train_mlm.py's defaults; its twin, --seed or 0.
    A flag given that differs from the run's, runs that differ in --seq-len (one masked text
    serves all), and a training_state.pt cut short: one line each."""
    a = saved_run(tmp_path / "a")
    old = saved_run(tmp_path / "old", corpus_name=None)
    hf = str(tmp_path / "hf")

    def settled(folders, **given):
        args = argparse.Namespace(**{"corpus": None, "seq_len": None, "mask_prob": None, "seed": None, **given})
        command.settle_flags(args, folders)
        return (args.corpus, args.seq_len, args.mask_prob), args.seeds

    assert settled([a]) == (("en", 64, 0.2), {a: 3})
    assert settled([a, hf], seq_len=64, seed=3) == (("en", 64, 0.2), {a: 3, hf: 3})
    assert settled([old]) == (("en", 64, 0.2), {old: 3})
    assert settled([hf]) == (("en", 128, 0.3), {hf: 0})
    assert settled([hf], corpus="zh", seq_len=32, mask_prob=0.15, seed=7) == (("zh", 32, 0.15), {hf: 7})
    b = saved_run(tmp_path / "b", seq_len=128)
    (tmp_path / "cut").mkdir()
    (tmp_path / "cut" / "training_state.pt").write_bytes((tmp_path / "a" / "training_state.pt").read_bytes()[:50])
    for folders, given, pattern in (([a], {"seq_len": 128}, "--seq-len 128: .* was trained with 64"),
                                    ([a], {"seed": 0}, "--seed 0: .* was trained with 3"),
                                    ([a, b], {}, r"different --seq-len \(64, 128\); probe them one at a time")):
        with refusal(pattern):
            settled(folders, **given)
    with refusal(r"does not read back as train_mlm.py's training state \(.*\): the checkpoint is damaged — re-save "):
        settled([str(tmp_path / "cut")])


@pytest.mark.parametrize("flag", ["--summary", "--checkpoint"])
def test_a_damaged_training_state_of_a_run_gets_the_runs_advice(tmp_path, tiny_run, flag):
    """A run whose newest checkpoint's training_state.pt is cut short (50 bytes): probe.py names the
    file and, as for damaged weights, what mends it in that run (its earlier checkpoint, or a
    resume), with torch's first sentence only (the code before this one printed torch's whole
    paragraph, advising nothing of the run)."""
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    (run / "run.json").write_text('{"kind": "pretraining"}\n')
    newest, earlier = checkpoints(str(run))[-1], checkpoints(str(run))[0]
    saved_run(Path(newest))
    state = Path(newest) / "training_state.pt"
    state.write_bytes(state.read_bytes()[:50])
    with refusal(rf"^error: {re.escape(str(state))} does not read back as train_mlm.py's training state "
                 r"\(RuntimeError: [^.]*\): the checkpoint is damaged — give an earlier checkpoint of the run "
                 rf"\({re.escape(earlier)}\), or resume the run \(train_mlm.py --out {re.escape(str(run))} --resume\), "
                 "which passes a damaged checkpoint over$"):
        command.main([flag, str(run), "--budgets", "40", *(["--out", str(tmp_path / "out")] if flag == "--checkpoint"
                                                           else [])])


def test_summary_refuses_an_out_it_would_not_write(tmp_path, tiny_run):
    """--summary writes no folder: an --out beside it was ignored unsaid (the code before this one
    printed the line and wrote nothing there). A flag error naming it, before anything is read."""
    with refusal(r"^error: --out: --summary prints one line .* it writes no --out folder \(see"):
        command.main(["--summary", str(tiny_run), "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


def test_the_command_hands_the_runs_own_flags_to_the_probes(tmp_path, tiny_run, monkeypatch):
    """--summary on a run whose newest checkpoint saved --seq-len 64 --mask-prob 0.2 --seed 3
    (tiny_run's step-000020, its training_state.pt added): the probes are asked for 64-token
    blocks masked at 0.2, of the `en` corpus, and the twin of seed 3; the same checkpoint
    without its training_state.pt gets probe.py's defaults 128, 0.3 and seed 0. (What the
    probes then do with seq_len and mask_prob, the tests above check.)"""
    asked = []
    monkeypatch.setattr(command, "summary", lambda path, corpus, labelled, budget, seed, seq_len, mask_prob, device:
                        asked.append((path, os.path.basename(corpus), budget, seed, seq_len, mask_prob)))
    monkeypatch.setattr(command, "summary_line", lambda s: "line")
    run = tmp_path / "run"
    ckpt = run / "checkpoints" / "step-000020"
    shutil.copytree(tiny_run / "checkpoints" / "step-000020", ckpt)
    saved_run(ckpt)
    command.main(["--summary", str(run), "--budgets", "40"])
    (ckpt / "training_state.pt").unlink()
    command.main(["--summary", str(run), "--budgets", "40"])
    assert asked == [(str(ckpt), "en", 40, 3, 64, 0.2), (str(ckpt), "en", 40, 0, 128, 0.3)]


@pytest.mark.parametrize("case", ["a-second-checkpoint-mistyped", "a-second-checkpoint-not-finite",
                                  "a-second-checkpoint-overflows", "a-second-checkpoint-overflows-on-some-tokens",
                                  "summary-of-a-run-moved-in-as-newest", "fill-mask-on-a-run-moved-in-as-newest"])
def test_every_checkpoint_is_checked_before_the_first_is_probed(tmp_path, tiny_run, capsys, case):
    """Two --checkpoint, the second mistyped, holding a NaN, with LayerNorm weights of 1e38, or
    with word-embedding rows of 3e38 for every token but [CLS], [SEP] and "the" (finite, but the
    sum of a row's 32 numbers overflows float32, so its LayerNorm gives NaN): one line, naming it,
    before anything is probed (the old code probed the first, printing its work, then stopped; the
    code before this one did so for the rows of some tokens, without naming the second). A run moved by hand into the run's
    checkpoints/ as its newest step: --summary and fill_mask.py say so (the old code: "not a
    checkpoint or run folder" and "holds no config.json", for a folder that is a run)."""
    import fill_mask
    if case.startswith("a-second-checkpoint"):
        second, pattern = tmp_path / "typo", r"^error: --checkpoint \S+typo: no checkpoint there \(no config.json\)"
        if not case.endswith("mistyped"):
            from safetensors.torch import load_file, save_file
            second = tmp_path / "second"
            shutil.copytree(checkpoints(str(tiny_run))[-1], second, ignore=shutil.ignore_patterns("training_state.pt"))
            weights = load_file(second / "model.safetensors")
            kept = Tokenizer.from_file(str(second / "tokenizer.json")).encode("the").ids  # [CLS] the [SEP]
            for name, tensor in weights.items():
                if case.endswith("some-tokens") and name.endswith("word_embeddings.weight"):
                    tensor[[i for i in range(len(tensor)) if i not in kept]] = 3e38
                elif "LayerNorm.weight" in name and not case.endswith("some-tokens"):
                    tensor.fill_(float("nan") if case.endswith("not-finite") else 1e38)
            save_file(weights, str(second / "model.safetensors"), metadata={"format": "pt"})
            pattern = (rf"^error: {re.escape(str(second))}(: the model computes numbers that are not finite| holds "
                       r"weights that are not finite)")
        with refusal(pattern):
            command.main(["--checkpoint", str(tiny_run), str(second), "--budgets", "40", "--out", str(tmp_path / "out")])
        assert capsys.readouterr().out == "" and not (tmp_path / "out").exists()
        return
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    moved = run / "checkpoints" / "step-000030"
    shutil.copytree(tiny_run, moved)
    (moved / "run.json").write_text('{"kind": "pretraining"}\n')
    pattern = (rf"^error: {re.escape(str(run))}: its newest checkpoint folder \S+step-000030 holds a run moved there "
               r"by hand, \S+step-000030; move it out of checkpoints/, or give a checkpoint folder$")
    with refusal(pattern):
        if case.startswith("summary"):
            command.main(["--summary", str(run), "--budgets", "40"])
        else:
            fill_mask.main(["--checkpoint", str(run), "the [MASK] ."])


@pytest.mark.parametrize("under", ["a-file", "under-a-file"])
def test_a_data_root_that_cannot_hold_the_data_is_one_line(tmp_path, tiny_run, under):
    """--data-root a file, or a folder under one: preparing the probed corpus there stopped in a
    traceback from data/prepare.py (train_mlm.py says it in one line). Now one line naming it."""
    (tmp_path / "afile").write_text("x\n")
    root = tmp_path / "afile" if under == "a-file" else tmp_path / "afile" / "sub"
    with refusal(r"^error: the data cache \S+afile\S*: .*Not a directory"):
        command.main(["--summary", str(tiny_run), "--data-root", str(root), "--budgets", "40"])


@pytest.mark.parametrize("budgets", ["all,all", "1", "5,5", "ten"])
def test_a_bad_budgets_flag_is_named_as_given(tmp_path, capsys, budgets):
    """--budgets is refused as a flag error (exit status 2) that quotes it as typed (the old line
    said "--budgets (None, None)" for `all,all`, a value the user never wrote)."""
    with pytest.raises(SystemExit) as e:
        command.main(["--summary", str(tmp_path), "--budgets", budgets])
    assert e.value.code == 2 and f"--budgets {budgets}: " in capsys.readouterr().err


def test_a_run_that_saves_while_it_is_probed_is_probed_as_listed(tmp_path, tiny_run, monkeypatch):
    """probe.py --run on a run still training: a checkpoint saved after the run was listed (here:
    step 30, made when the folders are listed again) is not probed. The old code listed the run
    twice, and the second listing's newest had no seed for its random twin (a KeyError traceback)."""
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    listed = command.checkpoints

    def saves_after_the_first_listing(out):
        found = listed(out)
        if not (run / "checkpoints" / "step-000030").exists():
            shutil.copytree(run / "checkpoints" / "step-000020", run / "checkpoints" / "step-000030")
        return found
    monkeypatch.setattr(command, "checkpoints", saves_after_the_first_listing)
    results = command.main(["--run", str(run), "--budgets", "40", "--out", str(tmp_path / "out")])
    assert [r["step"] for r in results["steps"]] == [0, 10, 20]


PRUNE = ("import sys; from minibert.files import delete_unless_read; "
         "print(delete_unless_read(sys.argv[1]), flush=True)")  # as a training run prunes an old checkpoint


@pytest.mark.parametrize("when", ["after its hold", "before its hold"])
def test_a_checkpoint_a_running_run_prunes_while_it_is_probed(tmp_path, tiny_run, monkeypatch, when):
    """probe.py --run on a run still training, which prunes its oldest checkpoint (step 10; another
    process, through files.delete_unless_read) once the run is listed. After its hold (taken for
    every listed checkpoint as it is listed) the prune leaves it, and all three steps are probed;
    before its hold it is gone, so it is no longer the run's: steps 0 and 20 are probed. The old
    code held a checkpoint only when it opened it: the prune went through, and the probe stopped
    with "neither `minilm` nor a checkpoint folder ...; pretrain one first"."""
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    oldest = run / "checkpoints" / "step-000010"
    pruned = []

    def prune():
        done = subprocess.run([sys.executable, "-c", PRUNE, str(oldest)], cwd=conftest.REPO, check=True,
                              capture_output=True, text=True, env={**os.environ, "PYTHONPATH": conftest.REPO})
        pruned.append(done.stdout.strip())

    if when == "after its hold":
        settle = command.settle_flags
        monkeypatch.setattr(command, "settle_flags", lambda args, folders: (prune(), settle(args, folders)))
    else:
        listed = command.checkpoints
        monkeypatch.setattr(command, "checkpoints", lambda out: (listed(out), prune())[0])
    results = command.main(["--run", str(run), "--budgets", "40", "--out", str(tmp_path / "out")])
    if when == "after its hold":
        assert pruned == ["False"] and oldest.is_dir()
        assert [r["step"] for r in results["steps"]] == [0, 10, 20]
    else:
        assert pruned == ["True"] and not oldest.exists()
        assert [r["step"] for r in results["steps"]] == [0, 20]


def test_a_model_that_overflows_while_it_is_probed_is_named(tmp_path, tiny_run, monkeypatch):
    """Numbers that overflow only on some texts, deeper than the embedding rows checked up front
    (here the frozen-feature probe made to find them in the first model it probes, the checkpoint
    given): the one line names that checkpoint (the code before this one said "the model computes
    numbers that are not finite" without saying which of the models given)."""
    def overflowing(*args, **kwargs):
        raise CheckpointError("the model computes numbers that are not finite from its weights")

    monkeypatch.setattr(command, "frozen_probes", overflowing)
    ckpt = checkpoints(str(tiny_run))[-1]
    with refusal(rf"^error: {re.escape(ckpt)}: the model computes numbers that are not finite from its weights$"):
        command.main(["--checkpoint", ckpt, "--budgets", "40", "--out", str(tmp_path / "out")])


def test_a_checkpoint_without_a_masked_lm_head_is_named_as_such(tmp_path, tiny_run):
    """An encoder-only checkpoint (a BertModel, as MiniLM's folder is): the code before this one
    stopped with one enormous line listing every tensor missing and unexpected. Now the cause, as
    fill_mask.py says it, and the way to MiniLM's frozen features, before anything is probed."""
    ckpt = checkpoints(str(tiny_run))[-1]
    encoder = tmp_path / "encoder"
    BertForMaskedLM.from_pretrained(ckpt).bert.save_pretrained(encoder, tokenizer=Tokenizer.from_file(
        os.path.join(ckpt, "tokenizer.json")))
    with refusal(rf"^error: {re.escape(str(encoder))} has no masked-LM head \(no cls\.predictions\.\* tensors: an "
                 r"encoder or classifier checkpoint\); the masked-token and agreement probes need \(for MiniLM's "
                 r"frozen features alone: --checkpoint minilm\) a BertForMaskedLM checkpoint"):
        command.main(["--checkpoint", str(encoder), "--budgets", "40", "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()
