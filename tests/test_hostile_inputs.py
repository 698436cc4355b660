"""New variants of the reliability causes, as a hostile user tried them: each through the real
command (or the one function every command goes through), each the right result, or one line and
a non-zero exit with nothing outside the run changed. The runs are test_refusals.py's tiny ones."""

import errno
import json
import os
import pickle
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer

import attention
import finetune
import plot_metrics
import polysemy
import probe
import train_mlm
from minibert import BertForMaskedLM, BertModel, load_tokenizer
from minibert.checkpoint import CheckpointError, NotFiniteError, to_hf_name
from minibert.run.report import pyplot
from minibert.run.classification import export
from minibert.run.exercises import word_vector
from minibert.run.folders import LOCK_FILE, save_checkpoint
from minibert.text import train_wordpiece

import conftest
from conftest import refusal, tiny_config
from test_checkpoint import _RunsACommand
from test_faults import pretrain_args
from test_finetune import run as finetune_run
from test_plots import line_of, xy
from test_polysemy import run_folder, stand_in  # noqa: F401 (fixtures)
from test_refusals import base, copy, snapshot  # noqa: F401 (base: the fixture of tiny runs)

REPO = Path(__file__).resolve().parents[1]


def script(*argv, stdin: str | None = None, close_stdin: bool = False, head: int | None = None):
    """(exit status, standard output, standard error) of `python argv...` in a process of its own;
    `head`: the reader closes standard output after that many lines, as `| head -N` does."""
    proc = subprocess.Popen([sys.executable, *argv], cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, pass_fds=(),
                            preexec_fn=(lambda: os.close(0)) if close_stdin else None)
    if head is None:
        out, err = proc.communicate(stdin, timeout=300)
        return proc.returncode, out, err
    proc.stdin.write(stdin or "")
    proc.stdin.close()
    lines = [proc.stdout.readline() for _ in range(head)]
    proc.stdout.close()
    err = proc.stderr.read()
    return proc.wait(timeout=300), "".join(lines), err


# ---- a reader that leaves, a stream that is closed -----------------------------------------------


@pytest.mark.parametrize("command", ["fill_mask", "predict", "finetune"])
def test_a_reader_that_closes_standard_output_ends_the_command_quietly(base, setup, tmp_path, command):
    """`... | head -1`: the first line is read, then the reader leaves (fill-mask and predict on
    3,000 lines; a fine-tuning run, whose info lines go through logging). The command stops with
    exit status 141 (as a shell's SIGPIPE ends one) and says nothing: no BrokenPipeError
    traceback, no logging error."""
    argv = {"fill_mask": ["fill_mask.py", "--checkpoint", str(base / "pre")],
            "predict": ["finetune.py", "predict", "--model", str(base / "cls")],
            "finetune": ["finetune.py", "--checkpoint", str(setup / "ckpt"), "--data", str(setup / "data"),
                         "--out", str(tmp_path / "run"), "--epochs", "3", "--no-progress"]}[command]
    code, out, err = script(*argv, stdin="a good [MASK] .\n" * 3000, head=1)
    assert (code, err) == (141, ""), err[-2000:]
    assert out.strip()


def test_a_ctrl_c_after_the_work_is_done_changes_nothing():
    """Ctrl-C in the moment after a script's main() has returned (a fine-tuning run whose summary
    is written) is ignored: exit status 0, nothing said, not 130 with the run reported cut short."""
    code = ("import os, signal\nfrom minibert.run import run_script\nrun_script(lambda: print('done'), 'cut short')\n"
            "os.kill(os.getpid(), signal.SIGINT)\nprint('still here')\n")
    assert script("-c", code) == (0, "done\nstill here\n", "")


def test_predict_with_standard_input_closed_is_one_line(base):
    """`finetune.py predict --model RUN <&-`: one line, as fill_mask.py says it."""
    code, out, err = script("finetune.py", "predict", "--model", str(base / "cls"), close_stdin=True)
    assert code == 1 and err == "error: cannot read standard input: it is closed; give UTF-8 text, one sentence per " \
                                "line\n", err


def test_a_warning_is_one_line():
    """Every script runs through run_script, which writes a warning (an unknown config.json key)
    as one line, not Python's two (the message, then the source line that warned)."""
    code = ("from minibert import BertConfig\nfrom minibert.run import run_script\n"
            "run_script(lambda: BertConfig.from_dict({'flash_magic': True}), '')\n")
    assert script("-c", code) == (0, "", "warning: BertConfig: ignoring unknown config keys ['flash_magic']\n")


@pytest.mark.parametrize("command", ["fill-mask", "predict"])
def test_a_config_warning_waits_for_the_load_to_succeed(base, tmp_path, command):
    """A config.json with a key minibert does not know (a warning) beside weights cut short: the
    refusal is the ONE line on standard error, the warning is not said first. Once the weights
    are whole again the command runs, and the warning is said once."""
    src = base / "pre" / "checkpoints" / "step-000002" if command == "fill-mask" else base / "cls" / "best"
    ckpt = tmp_path / "ckpt"
    shutil.copytree(src, ckpt)
    config = json.loads((ckpt / "config.json").read_text())
    (ckpt / "config.json").write_text(json.dumps({**config, "flash_magic": True}))
    weights = (ckpt / "model.safetensors").read_bytes()
    (ckpt / "model.safetensors").write_bytes(weights[:len(weights) // 2])
    argv = ["fill_mask.py", "--checkpoint", str(ckpt)] if command == "fill-mask" else \
           ["finetune.py", "predict", "--model", str(ckpt)]
    code, out, err = script(*argv, stdin="a good [MASK] .\n")
    assert code == 1 and out == "" and err.count("\n") == 1 and err.startswith("error: ") and "damaged" in err, err
    (ckpt / "model.safetensors").write_bytes(weights)
    code, out, err = script(*argv, stdin="a good [MASK] .\n")
    assert code == 0 and out and err == "warning: BertConfig: ignoring unknown config keys ['flash_magic']\n", err


@pytest.mark.parametrize("command", ["fill-mask-no-mask", "predict-control-line", "attention-too-long"])
def test_a_config_warning_is_not_said_before_a_later_refusal(base, tmp_path, command):
    """A config.json with a key minibert does not know (a warning), whose model loads, then an input
    the command refuses after the load: a text without [MASK], a line of control characters alone,
    a pair longer than the model's positions. The refusal is the ONE line on standard error (the
    old code said the warning first: two lines)."""
    src = base / "cls" / "best" if command.startswith("predict") else base / "pre" / "checkpoints" / "step-000002"
    ckpt = tmp_path / "ckpt"
    shutil.copytree(src, ckpt)
    config = json.loads((ckpt / "config.json").read_text())
    (ckpt / "config.json").write_text(json.dumps({**config, "flash_magic": True}))
    argv, stdin = {"fill-mask-no-mask": (["fill_mask.py", "--checkpoint", str(ckpt)], "a good film .\n"),
                   "predict-control-line": (["finetune.py", "predict", "--model", str(ckpt)], "\x01\x02\n"),
                   "attention-too-long": (["attention.py", "--checkpoint", str(ckpt), "--text", "word " * 300,
                                           "--out", str(tmp_path / "a.png")], None)}[command]
    code, out, err = script(*argv, stdin=stdin)
    assert code == 1 and out == "" and err.count("\n") == 1 and err.startswith("error: "), err


# ---- labelled files: labels and rows that would bend the output -------------------------------


def test_a_label_with_a_tab_or_a_line_end_is_one_cell_of_predicts_output(base, tmp_path):
    """A model whose labels hold a tab and a line end (from a .jsonl or a quoted .csv): predict
    writes them as escapes, one line of three tab-separated cells per sentence."""
    model = copy(base, "cls", tmp_path) / "best"
    config = json.loads((model / "config.json").read_text())
    config["id2label"] = {"0": "food\tdrink", "1": "sports\nnews"}
    config["label2id"] = {"food\tdrink": 0, "sports\nnews": 1}
    (model / "config.json").write_text(json.dumps(config))
    code, out, err = script("finetune.py", "predict", "--model", str(model), stdin="a good film\na bad film\n")
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 2 and all(len(line.split("\t")) == 3 for line in lines), out
    assert {line.split("\t")[0] for line in lines} <= {"food\\tdrink", "sports\\nnews"}


@pytest.mark.parametrize("case", ["header-again", "bom-header-again-csv", "bom-header-again-tsv", "lost-label"])
def test_a_labelled_file_that_would_train_a_wrong_class_is_refused(setup, tmp_path, case):
    """A .csv (or a folder's train.tsv) whose header row comes again mid-file (two files joined,
    each with its byte-order mark, which stays at the start of the second one's header) would add
    a class named "label". A label given only to texts that first have another ("meh" on three texts already
    labelled pos) has no unit of its own to stratify: it would sit in training and test, never in
    validation. Both refused in one line naming the cause; no run folder is made. (A repeated text
    with two labels alone, as noisy data has, is kept: it goes with its first row's label.)"""
    rows = [f"a {w} film number {i},{'pos' if w == 'good' else 'neg'}" for i in range(30) for w in ("good", "bad")]
    if case == "bom-header-again-tsv":
        data = tmp_path / "data"
        shutil.copytree(setup / "data", data)
        train = (data / "train.tsv").read_text(encoding="utf-8").splitlines()
        header = "\ufefftext\tlabel"
        (data / "train.tsv").write_text("\n".join([header, *train[:50], header, *train[50:]]) + "\n", encoding="utf-8")
        with refusal(r"train.tsv:52: a header row \('\\ufefftext\\tlabel'\) after the first line"):
            finetune_run(setup, tmp_path / "run", "--data", str(data))
        assert not (tmp_path / "run").exists()
        return
    if case.startswith(("header-again", "bom-header-again")):
        rows.insert(20, "\ufefftext,label" if case.startswith("bom") else "text,label")
        pattern = r"data.csv:22: a header row \('(\\ufeff)?text,label'\) after the first line"
    else:
        rows += [f"a good film number {i},meh" for i in (3, 4, 5)]
        pattern = (r"the label 'meh' is given only to texts that first have another label \(such as 'a good film "
                   r"number 3'\), so it could not be held out")
    (tmp_path / "data.csv").write_text("\ufefftext,label\n" + "\n".join(rows) + "\n", encoding="utf-8")
    with refusal(pattern):
        finetune_run(setup, tmp_path / "run", "--data", str(tmp_path / "data.csv"))
    assert not (tmp_path / "run").exists()
    if case == "lost-label":  # one text with two labels, every label with texts of its own: trains
        (tmp_path / "data.csv").write_text("text,label\n" + "\n".join(rows[:-3] + ["a good film number 3,neg"]) + "\n")
        finetune_run(setup, tmp_path / "run", "--data", str(tmp_path / "data.csv"), "--epochs", "1")


@pytest.mark.parametrize("split", ["train", "test"])
def test_a_text_the_tokenizer_reads_nothing_of_is_refused_like_an_empty_one(setup, tmp_path, split):
    """A row whose text is zero-width spaces and a soft hyphen only: not empty to the file reader,
    but BERT's normalizer drops every character, so the model would see [CLS] [SEP] alone. One line
    naming the file, its line and the characters (found as the file is read, before the splits are
    encoded); no run folder."""
    data, blank = tmp_path / "data", "\u200b\u200b\u00ad"
    shutil.copytree(setup / "data", data)
    with open(data / f"{split}.tsv", "a", encoding="utf-8") as f:
        f.write(blank + "\tpos\n")
    with refusal(rf"{split}.tsv:\d+: empty text \(it holds only U\+00AD, U\+200B, which shows nothing\)$"):
        finetune_run(setup, tmp_path / "run", "--data", str(data))
    assert not (tmp_path / "run").exists()


# ---- a tokenizer that does not belong, or is set to cut ---------------------------------------


def test_a_tokenizer_with_an_id_past_the_vocabulary_is_refused_at_load(base, tmp_path):
    """As many tokens as the vocabulary, but one of them given an id past it (a transformers
    checkpoint: no digest of its tokenizer in config.json): fill-mask refuses in one line instead
    of a traceback from the embedding lookup."""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(base / "pre" / "checkpoints" / "step-000002", ckpt)
    config = json.loads((ckpt / "config.json").read_text())
    config.pop("tokenizer_sha256", None)
    (ckpt / "config.json").write_text(json.dumps(config))
    tok = json.loads((ckpt / "tokenizer.json").read_text())
    tok["model"]["vocab"]["the"] = config["vocab_size"] + 50
    (ckpt / "tokenizer.json").write_text(json.dumps(tok))
    with pytest.raises(CheckpointError, match=rf"gives 'the' the id {config['vocab_size'] + 50}, past its model's "):
        load_tokenizer(ckpt)
    code, out, err = script("fill_mask.py", "--checkpoint", str(ckpt), "the [MASK] .")
    assert code == 1 and err.count("\n") == 1 and "past its model's vocabulary" in err, err


@pytest.mark.parametrize("command", ["fill-mask", "finetune", "attention"])
@pytest.mark.parametrize("case", ["unk-not-in-vocab", "two-tokens-one-id", "no-post-processor", "mask-not-special",
                                  "pad-and-mask-swapped", "pair-in-segment-0", "a-second-cls", "a-mask-inserted",
                                  "unk-is-mask", "a-sequence-post-processor", "unk-a-word-piece", "prefix-unused",
                                  "single-in-segment-1"])
def test_a_tokenizer_that_does_not_encode_as_berts_is_refused_at_load(base, setup, tmp_path, command, case):
    """A transformers-style checkpoint (no digest of its tokenizer in config.json) whose
    tokenizer.json has as many tokens as the model's vocabulary, every id inside it, but whose
    WordPiece unknown-word token is not among them (a word it cannot split stopped the command
    with a traceback), or which gives two tokens one id, so that another id has no token
    (fill-mask printed `None` as a guess), or which has no post-processor (no [CLS] and [SEP]
    around a text: other input than the model was trained on, silently), or whose [MASK] is no
    longer a special token (a typed [MASK] is split into pieces: fill-mask blamed the text for
    having none), or which swaps the ids of [PAD] and [MASK] (fill-mask fed the model its padding
    id as the mask), or whose template frames a text with a second [CLS] or an inserted [MASK]
    (fill-mask guessed at a mask the user did not write), or whose unknown-word token is [MASK]
    (every word it cannot split became a mask), or whose post-processor is a Sequence (the
    tokenizers library panics on some: a Rust backtrace), or whose unknown-word token is a word
    piece (`##s`: an unknown word was read as a piece), or whose continuing_subword_prefix no
    token of the vocabulary has (`@@`: every word split into pieces became [UNK]), or whose template
    puts a single text in segment 1 (minibert fed segment 0, silently unlike transformers given the
    encoding): one line at load,
    naming the file; nothing is written. One that puts a pair's second text in segment 0 is
    refused where a pair is encoded (attention.py); fill-mask and fine-tuning, which encode one
    text at a time, run. A tokenizer.json alone (no config.json to give the size) with an id
    left empty is refused too."""
    ckpt = copy(base, "pre", tmp_path) / "checkpoints" / "step-000002"
    config = json.loads((ckpt / "config.json").read_text())
    config.pop("tokenizer_sha256", None)
    (ckpt / "config.json").write_text(json.dumps(config))
    tok = json.loads((ckpt / "tokenizer.json").read_text())
    if case == "unk-not-in-vocab":
        tok["model"]["unk_token"] = "[NOT-A-TOKEN]"
    elif case == "two-tokens-one-id":
        tok["model"]["vocab"]["the"] = tok["model"]["vocab"]["."]
    elif case == "no-post-processor":
        tok["post_processor"] = None
    elif case == "mask-not-special":  # still in the vocabulary, no longer an added token
        tok["added_tokens"] = [t for t in tok["added_tokens"] if t["content"] != "[MASK]"]
    elif case == "pad-and-mask-swapped":  # consistently, in the vocabulary and the added tokens
        swap = {"[PAD]": "[MASK]", "[MASK]": "[PAD]"}
        ids = {t: tok["model"]["vocab"][t] for t in swap}
        for t, other in swap.items():
            tok["model"]["vocab"][t] = ids[other]
        for added in tok["added_tokens"]:
            added["id"] = ids.get(swap.get(added["content"]), added["id"])
    elif case == "pair-in-segment-0":
        for piece in tok["post_processor"]["pair"]:
            next(iter(piece.values()))["type_id"] = 0
    elif case == "unk-is-mask":
        tok["model"]["unk_token"] = "[MASK]"
    elif case == "unk-a-word-piece":
        tok["model"]["unk_token"] = min(t for t in tok["model"]["vocab"] if t.startswith("##"))
    elif case == "prefix-unused":
        tok["model"]["continuing_subword_prefix"] = "@@"
    elif case == "single-in-segment-1":
        for piece in tok["post_processor"]["single"]:
            next(iter(piece.values()))["type_id"] = 1
    elif case == "a-sequence-post-processor":
        tok["post_processor"] = {"type": "Sequence", "processors": [tok["post_processor"]] * 2}
    else:  # one more special token in the template of a single text
        extra = "[CLS]" if case == "a-second-cls" else "[MASK]"
        processor = tok["post_processor"]
        processor["special_tokens"][extra] = {"id": extra, "ids": [tok["model"]["vocab"][extra]], "tokens": [extra]}
        processor["single"].insert(1 if extra == "[CLS]" else 2, {"SpecialToken": {"id": extra, "type_id": 0}})
    (ckpt / "tokenizer.json").write_text(json.dumps(tok))
    before = snapshot(tmp_path)
    message = {"unk-not-in-vocab": r"its unknown-word token '\[NOT-A-TOKEN\]' is not in its vocabulary",
               "two-tokens-one-id": r"tokenizer\.json gives '\.' and 'the' the same id",
               "no-post-processor": r"tokenizer\.json: its post_processor is missing, not BERT's TemplateProcessing",
               "a-second-cls": r"tokenizer\.json does not frame a text as BERT's input, \[CLS\] text \[SEP\]",
               "a-mask-inserted": r"tokenizer\.json does not frame a text as BERT's input, \[CLS\] text \[SEP\]",
               "unk-is-mask": r"tokenizer\.json: its unknown-word token is \[MASK\], so a word it cannot split",
               "a-sequence-post-processor": r"tokenizer\.json: its post_processor is Sequence, not BERT's",
               "mask-not-special": r"tokenizer\.json does not read \[MASK\] in a text as its one token \(id 4\)",
               "pad-and-mask-swapped": r"tokenizer\.json gives \[PAD\] the id 4, its model's pad_token_id is 0",
               "pair-in-segment-0": r"does not frame a pair as BERT's input",
               "unk-a-word-piece": r"tokenizer\.json: its unknown-word token '##\w+' is a word piece \(it starts with",
               "single-in-segment-1": r"tokenizer\.json gives a single text the segment ids \[1, 1, 1\] \(its "
                                      r"post_processor's template\); BERT reads one text as segment 0",
               "prefix-unused": r"tokenizer\.json: no token of its vocabulary starts with its continuing_subword_prefix "
                                r"'@@', so every word it must split into pieces would be read as \[UNK\]"}[case]
    if case == "pair-in-segment-0" and command != "attention":  # only attention.py encodes a pair: the others run
        other_commands(base, setup, tmp_path, ckpt)[command]()
        return
    with refusal(message):
        other_commands(base, setup, tmp_path, ckpt)[command]()
    assert snapshot(tmp_path) == before
    if case not in ("unk-not-in-vocab", "two-tokens-one-id"):
        return
    alone = tmp_path / "alone"
    alone.mkdir()
    tok["model"]["vocab"].pop("the")
    tok["model"]["vocab"]["the"] = len(tok["model"]["vocab"]) + 5
    (alone / "tokenizer.json").write_text(json.dumps(tok))
    with pytest.raises(CheckpointError, match="has no token with the id"):
        load_tokenizer(alone)


MASK_AS_HELD = {"content": "[MASK]", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
                "special": True}  # [MASK] (id 4) as the fixture's tokenizer.json holds it
AGREES = {"do_lower_case": True, "strip_accents": False, "tokenize_chinese_chars": True}  # the fixture's normalizer


def bert_tokenizer_folder(ckpt, change: dict, tokenizer_json=None) -> None:
    """`ckpt` as a folder transformers reads with its BertTokenizer: tokenizer_config.json naming it,
    with the fixture's settings changed by `change` ("absent": left out); `tokenizer_json` edits
    tokenizer.json (the digest config.json records is dropped: a folder not saved by minibert)."""
    settings = {k: v for k, v in {**AGREES, **change}.items() if v != "absent"}
    (ckpt / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "BertTokenizer", **settings}))
    if tokenizer_json:
        config = json.loads((ckpt / "config.json").read_text())
        config.pop("tokenizer_sha256", None)
        (ckpt / "config.json").write_text(json.dumps(config))
        tok = json.loads((ckpt / "tokenizer.json").read_text())
        tokenizer_json(tok)
        (ckpt / "tokenizer.json").write_text(json.dumps(tok))


@pytest.mark.parametrize("change,tokenizer_json,said", [
    ({"do_lower_case": False}, None, "its do_lower_case is false, but tokenizer.json does lower case"),
    ({"strip_accents": None}, None,
     r"its strip_accents is null \(so true, as do_lower_case\), but tokenizer.json does not strip accents"),
    ({"strip_accents": "absent"}, None,
     r"its strip_accents is left out \(so true, as do_lower_case\), but tokenizer.json does not strip accents"),
    ({"tokenize_chinese_chars": False}, None, "its tokenize_chinese_chars is false, but tokenizer.json does tokenize "
                                              "chinese chars"),
    ({}, lambda t: t["normalizer"].update(clean_text=False), "BertNormalizer is not BERT's normalizer with clean_text"),
    ({}, lambda t: t.update(pre_tokenizer={"type": "WhitespaceSplit"}), r"its pre-tokenizer WhitespaceSplit is not BERT's"),
    ({}, lambda t: t["model"].update(max_input_chars_per_word=3), r"max_input_chars_per_word 3\) is not BERT's WordPiece"),
    ({"cls_token": "[SEP]"}, None, r"tokenizer_config.json names cls_token '\[SEP\]', but \S+ reads \[CLS\] as it"),
    ({"unk_token": "the"}, None, r"tokenizer_config.json names unk_token 'the', but \S+ reads \[UNK\] as it"),
    ({}, lambda t: t["model"].update(unk_token="the"), r"its unknown-word token is 'the', not '\[UNK\]', BertTokenizer's"),
    ({}, None, None)],
    ids=["no-lower-case", "strip-accents-null", "strip-accents-absent", "no-chinese-spacing", "no-clean-text",
         "another-pre-tokenizer", "words-cut-at-3-characters", "cls-named-sep", "unk-named-the", "unk-is-the",
         "agrees"])
def test_a_folder_transformers_reads_otherwise_than_its_tokenizer_json_is_refused(base, tmp_path, change,
                                                                                  tokenizer_json, said):
    """A folder transformers reads with its BertTokenizer (tokenizer_config.json's tokenizer_class),
    which builds BERT's own pipeline from the vocabulary and tokenizer_config.json's settings
    (strip_accents null, or left out, strips accents when lower-casing, as BERT did), whatever
    tokenizer.json says: where the two differ (the fixture lower-cases, keeps accents, spaces
    Chinese characters; here one setting of tokenizer_config.json, or tokenizer.json's clean_text,
    pre-tokenizer or longest word), or where tokenizer_config.json names a special token as another,
    transformers reads a text into other ids than tokenizer.json does (shown here), which minibert
    reads (the old code answered silently, for other ids than transformers'). Refused in one line
    naming the disagreement. One that agrees changes nothing."""
    import transformers
    ckpt = copy(base, "pre", tmp_path) / "checkpoints" / "step-000002"
    bert_tokenizer_folder(ckpt, change, tokenizer_json)
    text = "The MOVIE th\u00e9 don't \u200b unbelievable \u4e2d\u6587"
    theirs = transformers.AutoTokenizer.from_pretrained(ckpt)(text)["input_ids"]
    ours = Tokenizer.from_file(str(ckpt / "tokenizer.json")).encode(text).ids
    code, out, err = script("fill_mask.py", "--checkpoint", str(ckpt), "the [MASK] .")
    if said is None:
        assert theirs == ours and (code, err) == (0, ""), err
        return
    assert theirs != ours
    assert code == 1 and err.count("\n") == 1 and re.search(said, err), err


@pytest.mark.parametrize("file,settings,said", [
    ("tokenizer_config.json", {"tokenizer_class": "DistilBertTokenizer"}, "names tokenizer_class 'DistilBertTokenizer'"),
    ("tokenizer_config.json", {"tokenizer_class": "ElectraTokenizer"}, "names tokenizer_class 'ElectraTokenizer'"),
    ("tokenizer_config.json", {"tokenizer_class": "RobertaTokenizer"}, "names tokenizer_class 'RobertaTokenizer'"),
    ("tokenizer_config.json", {"additional_special_tokens": ["the"]}, "makes 'the' a special token"),
    ("tokenizer_config.json", {"extra_special_tokens": {"x_token": "the"}}, "makes 'the' a special token"),
    ("tokenizer_config.json", {"bos_token": "the"}, "makes 'the' a special token"),
    ("tokenizer_config.json", {"added_tokens_decoder": {"7": {"content": "the", "special": True}}},
     "makes 'the' a special token"),
    ("tokenizer_config.json", {"added_tokens_decoder": {"4": {**MASK_AS_HELD, "single_word": True}}},
     "gives '[MASK]' single_word true, but"),
    ("tokenizer_config.json", {"added_tokens_decoder": {"4": {**MASK_AS_HELD, "normalized": True}}},
     "gives '[MASK]' normalized true, but"),
    ("tokenizer_config.json", {"tokenizer_class": "BertTokenizer", **AGREES,
                               "added_tokens_decoder": {"4": {**MASK_AS_HELD, "normalized": True}}},
     "gives '[MASK]' normalized true"),
    ("special_tokens_map.json", {"eos_token": {"content": "the"}}, "special_tokens_map.json makes 'the' a special"),
    ("added_tokens.json", {"there": 50}, "added_tokens.json adds 'there' (id 50), which"),
    ("tokenizer_config.json", {"split_special_tokens": True}, "sets split_special_tokens"),
    ("tokenizer_config.json", {"tokenizer_class": "BertTokenizer", **AGREES, "do_lower_case": "yes"},
     'its do_lower_case is "yes", not true or false'),
    ("config.json", {"tokenizer_class": "RobertaTokenizer"}, "config.json names tokenizer_class 'RobertaTokenizer'"),
    ("tokenizer_config.json", {"tokenizer_class": "TokenizersBackend", "bos_token": "[CLS]", "eos_token": "[SEP]",
                               "additional_special_tokens": ["[MASK]"]}, None),
    ("config.json", {"tokenizer_class": "PreTrainedTokenizerFast"}, None),
    ("tokenizer_config.json", {"added_tokens_decoder": {"4": MASK_AS_HELD, "3": {"content": "[SEP]"}}}, None),
], ids=["distilbert-class", "electra-class", "roberta-class", "additional-special-the", "extra-special-the",
        "bos-the", "added-tokens-decoder-the", "mask-single-word", "mask-normalized", "bert-class-mask-normalized",
        "map-eos-the", "added-tokens-file-there", "split-special-tokens", "lower-case-yes",
        "config-roberta-class", "agrees", "config-generic-class-agrees", "added-tokens-decoder-agrees"])
def test_tokenizer_files_that_make_transformers_read_otherwise_are_refused(base, tmp_path, file, settings, said):
    """transformers reads the text through tokenizer_config.json and special_tokens_map.json too:
    a tokenizer_class other than BERT's or the generic fast one builds that class's own pipeline
    (DistilBERT's and ELECTRA's strip accents by default: "thé" as "the"; RoBERTa's reads
    bytes); a token made special that tokenizer.json does not hold as one is read apart from any
    word ("there" as "the" + "##re"); an added_tokens_decoder entry that makes [MASK] single_word no
    longer reads it in "x[MASK]y", and one that makes it normalized reads "[mask]" as [MASK]
    (tokenizer.json holds it with neither); an added_tokens.json adds its tokens (the code before
    this one read none of these three); split_special_tokens splits a typed [MASK]; a do_lower_case
    that is no boolean stops transformers. Each is shown to read other ids than tokenizer.json
    (or not to load), and each is refused in one line (the old code answered silently, for other
    ids than transformers'). Special tokens tokenizer.json holds already change nothing. Without a
    tokenizer_config.json, transformers takes the class config.json names, as minibert now does
    (the old code refused the generic class there, saying transformers would read the folder with
    its BertTokenizer, and read it silently otherwise as RoBERTa's byte-level pipeline)."""
    import transformers
    ckpt = copy(base, "pre", tmp_path) / "checkpoints" / "step-000002"
    if file == "tokenizer_config.json":
        settings = {"tokenizer_class": "PreTrainedTokenizerFast", **settings}
    if file == "config.json":  # a folder not saved by minibert, with no tokenizer_config.json
        (ckpt / "tokenizer_config.json").unlink()
        config = json.loads((ckpt / "config.json").read_text())
        config.pop("tokenizer_sha256")
        settings = {**config, **settings}
    (ckpt / file).write_text(json.dumps(settings))
    text = "there is th\u00e9 [MASK] . x[MASK]y [mask]"
    ours = Tokenizer.from_file(str(ckpt / "tokenizer.json")).encode(text).ids
    try:
        theirs = transformers.AutoTokenizer.from_pretrained(ckpt)(text)["input_ids"]
    except TypeError:  # do_lower_case "yes"
        theirs = None
    code, out, err = script("fill_mask.py", "--checkpoint", str(ckpt), "the [MASK] .")
    if said is None:
        assert theirs == ours and (code, err) == (0, ""), err
        return
    assert theirs != ours
    assert code == 1 and err.count("\n") == 1 and said in err, err


@pytest.mark.parametrize("file,key", [("tokenizer_config.json", "unk_token"), ("tokenizer_config.json", "cls_token"),
                                      ("tokenizer_config.json", "pad_token"), ("special_tokens_map.json", "sep_token"),
                                      ("special_tokens_map.json", "mask_token")])
def test_a_special_token_given_as_null_is_refused(base, tmp_path, file, key):
    """tokenizer_config.json (with BertTokenizer's settings) or special_tokens_map.json giving one
    of the special tokens minibert reads by name as null: transformers then goes without that
    token (its unk_token_id, cls_token_id ... is None: with no unknown-word token its WordPiece
    fails on a word it cannot spell, with no padding token it cannot pad a batch), while
    tokenizer.json, which minibert reads, holds it. The old code skipped a value that is no string
    and read the folder. Refused in one line naming the file, the key and the fix."""
    import transformers
    ckpt = copy(base, "pre", tmp_path) / "checkpoints" / "step-000002"
    bert_tokenizer_folder(ckpt, {key: None} if file == "tokenizer_config.json" else {})
    if file == "special_tokens_map.json":
        (ckpt / file).write_text(json.dumps({key: None}))
    assert getattr(transformers.AutoTokenizer.from_pretrained(ckpt), f"{key}_id") is None
    code, out, err = script("fill_mask.py", "--checkpoint", str(ckpt), "the [MASK] .")
    assert code == 1 and err.count("\n") == 1, err
    assert f"{file} gives {key} null, which names no token: transformers then goes without one, while" in err, err


def test_a_tokenizer_set_to_truncate_or_pad_does_not_change_a_word_vector(setup):
    """A tokenizer.json saved with truncation at 4 tokens and padding to 100 (more than the
    model's positions): polysemy's word vectors are those of the plain tokenizer, not NaN (the
    word cut off) and not a position past the model's."""
    model = BertModel.from_pretrained(setup / "ckpt").eval()
    tok = load_tokenizer(setup / "ckpt")
    odd = Tokenizer.from_str(tok.to_str())
    odd.enable_truncation(4)
    odd.enable_padding(length=100)
    sentence = "the film was great and the actors were fine"
    assert torch.equal(word_vector(model, odd, sentence, "actors"), word_vector(model, tok, sentence, "actors"))


# ---- writers: links and hard links planted where a run writes -----------------------------------


def test_a_link_planted_at_an_exports_temporary_folder_is_not_followed(base, tmp_path):
    """best.tmp, the folder export writes before renaming it to best/, planted as a link to a
    folder elsewhere: the link is removed, the model is written into a real best/, the folder it
    pointed to stays empty."""
    out = copy(base, "cls", tmp_path)
    victim = tmp_path / "victim"
    victim.mkdir()
    (out / "best.tmp").symlink_to(victim)
    model = finetune.load_model(str(out / "best"))
    export(model, str(out / "best"), load_tokenizer(out / "best"))
    assert list(victim.iterdir()) == [] and not (out / "best").is_symlink() and (out / "best" / "config.json").is_file()


def test_a_link_planted_at_a_checkpoints_temporary_folder_is_not_followed(base, tmp_path):
    """checkpoints/.step-000003.tmp planted as a link while the run trains (a resume refuses a
    folder that holds a link before it starts): the checkpoint of step 3 is a real folder, the
    folder the link pointed to stays empty."""
    out = copy(base, "pre", tmp_path)
    victim = tmp_path / "victim"
    victim.mkdir()
    (out / "checkpoints" / ".step-000003.tmp").symlink_to(victim)
    ckpt = out / "checkpoints" / "step-000002"
    state = torch.load(ckpt / "training_state.pt", weights_only=True)
    save_checkpoint(str(out), 3, BertForMaskedLM.from_pretrained(ckpt), load_tokenizer(ckpt), state, keep=5)
    step = out / "checkpoints" / "step-000003"
    assert list(victim.iterdir()) == [] and step.is_dir() and not step.is_symlink()


def test_a_lock_file_that_is_a_hard_link_is_replaced_not_written_into(base, corpus, tmp_path):
    """A run's .lock hard-linked to a file elsewhere (planted, or a copy of the run made with
    `cp -al`): the pid written into it would overwrite that file. --resume replaces the link by a
    lock of its own, runs, and leaves the other file as it was."""
    out = copy(base, "pre", tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    os.link(victim, out / LOCK_FILE)
    train_mlm.main(pretrain_args(out, corpus, base / "cache", "--resume", "--max-steps", "3"))
    assert victim.read_text() == "precious\n" and os.stat(victim).st_nlink == 1
    assert (out / "checkpoints" / "step-000003").is_dir()


def test_a_copy_made_with_cp_al_of_a_running_run_is_a_run_of_its_own(base, corpus, tmp_path):
    """A run still training (here a process that holds its folder's claim) copied with `cp -al`:
    the copy's .lock is a hard link to the original's, which that process holds. The code before
    this one called the copy in use by the original's process; now --resume of the copy replaces
    the link by a lock of its own and trains, while the original stays in use: its --resume is
    refused naming its process, and nothing of it changes (the copy's training writes none of the
    files the two share)."""
    out = copy(base, "pre", tmp_path)
    claim = ("import sys; from minibert.run.folders import claim_run_folder; "
             "lock = claim_run_folder(sys.argv[1], 'pretraining', resume=True); print('held', flush=True); input()")
    holder = subprocess.Popen([sys.executable, "-c", claim, str(out)], cwd=conftest.REPO, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": conftest.REPO})
    try:
        assert holder.stdout.readline().strip() == "held"
        original = {p: p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
        the_copy = tmp_path / "copy"
        subprocess.run(["cp", "-al", str(out), str(the_copy)], check=True)
        train_mlm.main(pretrain_args(the_copy, corpus, base / "cache", "--resume", "--max-steps", "3"))
        assert (the_copy / "checkpoints" / "step-000003").is_dir()
        with refusal(rf"is in use by another process \(pid {holder.pid}\)"):
            train_mlm.main(pretrain_args(out, corpus, base / "cache", "--resume", "--max-steps", "3"))
        assert {p: p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()} == original
    finally:
        holder.communicate("\n", timeout=60)


# ---- weights and states that are not what they seem -------------------------------------------


def test_a_training_state_whose_moments_are_not_finite_is_skipped_as_damaged(base, corpus, tmp_path, capsys):
    """A NaN in AdamW's second moment of the newest checkpoint (step 2): the resume would train
    and stop with "the training loss became nan". It is skipped with a note naming it, and the
    run resumes from step 1."""
    out = copy(base, "pre", tmp_path)
    path = out / "checkpoints" / "step-000002" / "training_state.pt"
    state = torch.load(path, weights_only=True)
    next(iter(state["optimizer"]["state"].values()))["exp_avg_sq"].view(-1)[0] = float("nan")
    torch.save(state, path)
    train_mlm.main(pretrain_args(out, corpus, base / "cache", "--resume", "--max-steps", "3", "--keep", "5"))
    err = capsys.readouterr().err
    assert "step-000002 is damaged (ValueError: a number in its optimizer state that is not finite)" in err, err
    assert (out / "checkpoints" / "step-000003").is_dir()


def test_a_nan_in_tied_weights_is_named_as_not_finite_not_as_untied(tmp_path):
    """A pytorch_model.bin whose word embeddings hold a NaN, its decoder the same tensor (tied, as
    transformers saves them): the refusal names the tensor that is not finite; NaN != NaN must not
    make the two look untied."""
    src = BertForMaskedLM(tiny_config())
    state = {to_hf_name(k): v for k, v in src.state_dict().items()}
    state["bert.embeddings.word_embeddings.weight"][3, 5] = float("nan")
    state["cls.predictions.decoder.weight"] = state["bert.embeddings.word_embeddings.weight"].clone()
    src.config.save(tmp_path / "config.json")
    torch.save(state, tmp_path / "pytorch_model.bin")
    with pytest.raises(NotFiniteError, match="bert.embeddings.word_embeddings.weight"):
        BertForMaskedLM.from_pretrained(tmp_path)


def rewrite_file(ckpt: Path, change) -> None:
    """model.safetensors of `ckpt` rewritten by `change` (a function of its {HF name: tensor})."""
    from safetensors.torch import load_file, save_file
    tensors = {k: v.clone() for k, v in load_file(ckpt / "model.safetensors").items()}
    save_file(change(tensors) or tensors, str(ckpt / "model.safetensors"), metadata={"format": "pt"})


def other_commands(base, setup, tmp_path, ckpt):
    """{name: the command on `ckpt`}: each loads its weights into a model that keeps part of them
    (fill-mask and the attention maps an MLM, fine-tuning a classifier, the probes an encoder)."""
    import fill_mask as fill_mask_command
    return {"fill-mask": lambda: fill_mask_command.main(["--checkpoint", str(ckpt), "a good [MASK] ."]),
            "finetune": lambda: finetune.main(["--checkpoint", str(ckpt), "--data", str(setup / "data"), "--out",
                                               str(tmp_path / "ft"), "--epochs", "1", "--no-progress"]),
            "attention": lambda: attention.main(["--checkpoint", str(ckpt), "--out", str(tmp_path / "att.png"),
                                                 "--text", "a good film ."])}


@pytest.mark.parametrize("command", ["fill-mask", "finetune", "attention"])
@pytest.mark.parametrize("tensor", ["next-sentence-head", "tied-alias"])
def test_a_tensor_not_finite_in_a_head_the_command_drops_is_refused_too(base, setup, tmp_path, command, tensor):
    """The pretraining checkpoint gets a next-sentence head holding an inf (the MLM commands drop
    that head, the classifier drops every head), or the decoder alias of .bin files beside the
    word embeddings, both with an inf: a file with a number that is not finite is a damaged file,
    whichever tensor holds it. One line naming the tensor; nothing is written (no run folder)."""
    ckpt = copy(base, "pre", tmp_path) / "checkpoints" / "step-000002"
    name = {"next-sentence-head": "cls.seq_relationship.weight", "tied-alias": "cls.predictions.decoder.bias"}[tensor]

    def plant(t):
        C = t["bert.embeddings.word_embeddings.weight"].shape[1]
        t[name] = torch.zeros(2, C) if tensor == "next-sentence-head" else t["cls.predictions.bias"].clone()
        t[name].view(-1)[1] = float("inf")
        if tensor == "next-sentence-head":
            t["cls.seq_relationship.bias"] = torch.zeros(2)
    rewrite_file(ckpt, plant)
    before = snapshot(tmp_path)
    with refusal(rf"holds weights that are not finite \(inf or nan\) in {re.escape(name)}"):
        other_commands(base, setup, tmp_path, ckpt)[command]()
    assert snapshot(tmp_path) == before


def test_a_refused_checkpoint_is_all_that_finetune_says_of_one_file(base, setup, tmp_path, capsys):
    """--data one .tsv file (split here) and a checkpoint with a NaN: the refusal is the only
    thing said; the split's sizes, announced once the checkpoint has loaded, are not printed
    before it. With the checkpoint whole the sizes come, then the run."""
    ckpt = copy(base, "pre", tmp_path) / "checkpoints" / "step-000002"
    rewrite_file(ckpt, lambda t: {**t, "cls.predictions.bias": torch.full_like(t["cls.predictions.bias"], float("nan"))})
    data = tmp_path / "all.tsv"
    data.write_text("".join((setup / "data" / f"{s}.tsv").read_text() for s in ("train", "valid", "test")))
    argv = ["--checkpoint", str(ckpt), "--data", str(data), "--out", str(tmp_path / "run"), "--epochs", "1",
            "--no-progress"]
    with refusal(r"holds weights that are not finite \(inf or nan\) in cls\.predictions\.bias"):
        finetune.main(argv)
    assert capsys.readouterr().out == "" and not (tmp_path / "run").exists()
    rewrite_file(ckpt, lambda t: {**t, "cls.predictions.bias": torch.zeros_like(t["cls.predictions.bias"])})
    finetune.main(argv)
    assert "all.tsv split by label (seed 0): " in capsys.readouterr().out


@pytest.mark.parametrize("weights", ["every-layernorm-1e38", "last-layernorm-1e30"])
@pytest.mark.parametrize("command", ["fill-mask", "finetune", "attention", "predict", "probe", "polysemy", "compare"])
def test_finite_weights_that_overflow_float32_are_refused_where_they_give_nan(base, setup, tmp_path, command, weights):
    """Every LayerNorm weight set to 1e38: finite, so the file loads, but the hidden states overflow
    to inf and NaN. fill-mask printed `(nan)` probabilities, predict a NaN and a label, attention a
    table of NaN, polysemy NaN similarities (all exit 0); fine-tuning advised a lower learning rate
    at its first step, before any update, leaving a claimed --out (now: checked on one batch before
    --out is claimed); the probes stopped in a traceback. Each is one line saying the model
    computes numbers that are not finite. experiments.compare found it only at its first fine-tuning
    step, after it had made its --out and printed the bag-of-words baseline: now when the encoder
    opens, before either. The last layer's output LayerNorm gain alone set to 1e30 gives finite
    hidden states of about 1e30, whose squares overflow float32 (overflowing): fill-mask and the
    probes refused it, but the code before this one fine-tuned on it (a loss of 7.5e28), predicted
    `1.0000`, printed polysemy similarities of 0.000 (their norms inf; the true cosines about
    0.96) and drew attention; now each refuses it in the same line."""
    from experiments import compare
    src = base / ("cls" if command == "predict" else "pre")
    run = tmp_path / src.name
    shutil.copytree(src, run, ignore=shutil.ignore_patterns(LOCK_FILE))
    ckpt = run / "best" if command == "predict" else run / "checkpoints" / "step-000002"

    def overflowing_gain(tensors):
        if weights.startswith("every"):
            return {k: torch.full_like(v, 1e38) if "LayerNorm.weight" in k else v for k, v in tensors.items()}
        last = max(k for k in tensors if re.search(r"layer\.\d+\.output\.LayerNorm\.weight$", k))  # the last layer's
        return {**tensors, last: torch.full_like(tensors[last], 1e30)}
    rewrite_file(ckpt, overflowing_gain)
    run_command = {"predict": lambda: finetune.main(["predict", "--model", str(run), "--file", str(tmp_path / "in.txt")]),
                   "probe": lambda: probe.main(["--summary", str(run), "--data-root", str(base / "cache")]),
                   "polysemy": lambda: polysemy.main(["--minilm", str(setup / "ckpt"), "--checkpoint", str(run),
                                                      "--out", str(tmp_path / "poly")]),
                   "compare": lambda: compare.main(["methods", "--quick", "--out", str(tmp_path / "ft"), "--encoders",
                                                    str(ckpt)]),
                   }.get(command) or other_commands(base, setup, tmp_path, ckpt)[command]
    (tmp_path / "in.txt").write_text("a good film\n")
    with refusal(r"the model computes numbers that are not finite from its weights \(they overflow float32\)"):
        run_command()
    assert not (tmp_path / "ft").exists()


@pytest.mark.parametrize("command", ["fill-mask", "probe-checkpoint", "probe-summary", "compare"])
def test_a_random_init_that_overflows_blames_its_initializer_range_not_the_weights(base, tmp_path, capsys, command):
    """A checkpoint whose weights are sound but whose config.json says initializer_range 1e37: the
    random init drawn beside it (fill_mask.py --beside-random-init, probe.py's twin,
    experiments.compare's random:FOLDER) has weights of about 1e37 that overflow float32. One line
    naming the initializer_range, before any other line and before a study's --out is made (the
    code before this one said the checkpoint was damaged, whose own guesses are fine; the study
    first printed its bag-of-words baseline into a new --out)."""
    from experiments import compare
    ckpt = copy(base, "pre", tmp_path) / "checkpoints" / "step-000002"
    config = json.loads((ckpt / "config.json").read_text())
    (ckpt / "config.json").write_text(json.dumps({**config, "initializer_range": 1e37}))
    import fill_mask
    fill_mask.main(["--checkpoint", str(ckpt), "the [MASK] ."])  # the checkpoint itself is sound
    capsys.readouterr()
    argv = {"fill-mask": ["--checkpoint", str(ckpt), "--beside-random-init", "the [MASK] ."],
            "probe-checkpoint": ["--checkpoint", str(ckpt), "--data-root", str(base / "cache"), "--budgets", "40",
                                 "--out", str(tmp_path / "probes")],
            "probe-summary": ["--summary", str(ckpt), "--data-root", str(base / "cache"), "--budgets", "40"],
            "compare": ["methods", "--quick", "--out", str(tmp_path / "study"), "--encoders", f"random:{ckpt}"]}[command]
    with refusal(r"the random init, drawn with config.json's initializer_range 1e\+37, computes numbers that are not "
                 r"finite \(they overflow float32\); BERT's is 0.02: set that in config.json$"):
        {"fill-mask": fill_mask, "compare": compare}.get(command, probe).main(argv)
    assert capsys.readouterr().out == "" and not (tmp_path / "study").exists()


NOT_AN_OBJECT, WITH_A_BOM = "is not a JSON object (", "starts with a UTF-8 byte-order mark, which transformers cannot read"
UNTYPED = 'gives mask_token as an object without "__type": "AddedToken", which transformers cannot read'


@pytest.mark.parametrize("file,content,said", [
    ("special_tokens_map.json", "{bad", NOT_AN_OBJECT), ("special_tokens_map.json", "", NOT_AN_OBJECT),
    ("tokenizer_config.json", '{"tokenizer_class": "PreTrainedTokenizerFast", ', NOT_AN_OBJECT),
    ("tokenizer_config.json", "[1, 2]", NOT_AN_OBJECT), ("added_tokens.json", "[1]", NOT_AN_OBJECT),
    ("special_tokens_map.json", '\ufeff{"mask_token": "[MASK]"}', WITH_A_BOM),
    ("added_tokens.json", '\ufeff{"[MASK]": 4}', WITH_A_BOM), ("config.json", "\ufeff", WITH_A_BOM),
    ("tokenizer.json", "\ufeff", WITH_A_BOM),
    ("tokenizer_config.json", '{"tokenizer_class": "PreTrainedTokenizerFast", "mask_token": {"content": "[MASK]"}}',
     UNTYPED)],
    ids=["map-not-json", "map-empty", "config-cut-short", "config-a-list", "added-tokens-a-list", "map-bom",
         "added-tokens-bom", "config-json-bom", "tokenizer-json-bom", "config-mask-token-an-untyped-object"])
def test_a_damaged_tokenizer_file_beside_tokenizer_json_is_refused(base, tmp_path, file, content, said):
    """A special_tokens_map.json, tokenizer_config.json or added_tokens.json that is not a JSON
    object (cut short, empty, a list): transformers cannot load the folder's tokenizer at all. One
    line naming the file (the code before this one took it for absent: it answered, or blamed a
    BertTokenizer setting whose "make the two agree" mends nothing). So for any of those files, or
    config.json or tokenizer.json, that starts with a UTF-8 byte-order mark (the code before this one
    read past it in the side files and config.json, and blamed "expected value at line 1 column 1"
    in tokenizer.json), and a tokenizer_config.json giving a special token as an object without
    transformers' "__type" (read before as the token it names)."""
    import transformers
    ckpt = copy(base, "pre", tmp_path) / "checkpoints" / "step-000002"
    if content.startswith("\ufeff") and len(content) == 1:  # the file as it is, behind a BOM
        content += (ckpt / file).read_text()
    (ckpt / file).write_text(content)
    with pytest.raises(Exception):
        transformers.AutoTokenizer.from_pretrained(ckpt)
        transformers.AutoConfig.from_pretrained(ckpt)
    code, out, err = script("fill_mask.py", "--checkpoint", str(ckpt), "the [MASK] .")
    assert code == 1 and err.count("\n") == 1 and f"{ckpt / file} {said}" in err, err


@pytest.mark.parametrize("dtype", ["int64", "bool", "uint8", "float8-nan"])
def test_weights_that_are_not_floats_or_not_finite_in_fp8_are_refused(base, setup, tmp_path, dtype):
    """The checkpoint's weights rewritten as integers (rounded x100), booleans or bytes: cast to
    floats they would be computed with, silently. In float8 with a NaN byte: torch has no
    isfinite for float8, so the check reads them as float32. Each is one line, for every command;
    float8 weights that are finite load (their values, rounded, are what the file holds)."""
    ckpt = copy(base, "pre", tmp_path) / "checkpoints" / "step-000002"
    convert = {"int64": lambda t: (t * 100).round().to(torch.int64), "bool": lambda t: t > 0,
               "uint8": lambda t: (t.abs() * 100).clamp(max=255).to(torch.uint8),
               "float8-nan": lambda t: t.to(torch.float8_e4m3fn)}[dtype]

    def change(tensors):
        out = {k: convert(v) for k, v in tensors.items()}
        if dtype == "float8-nan":
            out["cls.predictions.bias"].view(torch.uint8)[0] = 0x7F  # e4m3fn's NaN
        return out
    rewrite_file(ckpt, change)
    before = snapshot(tmp_path)
    pattern = (r"holds weights that are not finite \(inf or nan\) in cls\.predictions\.bias" if dtype == "float8-nan"
               else rf"holds weights that are not floating-point numbers: .*\({dtype}\)")
    for command in ("fill-mask", "finetune", "attention"):
        with refusal(pattern):
            other_commands(base, setup, tmp_path, ckpt)[command]()
    assert snapshot(tmp_path) == before
    if dtype == "float8-nan":
        rewrite_file(ckpt, lambda t: {**t, "cls.predictions.bias": torch.zeros_like(t["cls.predictions.bias"])})
        other_commands(base, setup, tmp_path, ckpt)["fill-mask"]()


@pytest.mark.parametrize("command", ["fill-mask", "finetune", "attention"])
@pytest.mark.parametrize("family", ["roberta", "electra", "distilbert", "roberta-beside-bert-heads"])
def test_a_checkpoint_of_another_architecture_is_refused_by_its_weights_names(base, setup, tmp_path, command, family):
    """A config.json that says bert (model_type "bert", no architectures) beside weights named as
    another architecture's (roberta.embeddings..., electra.encoder..., distilbert.transformer...):
    the refusal says what the weights are, in one line, not that a head is missing or that the
    config does not match. Also with the MLM head still named as BERT's (cls.*) beside a roberta.*
    encoder: that was called a damaged BERT ("the weights hold nothing")."""
    ckpt = copy(base, "pre", tmp_path) / "checkpoints" / "step-000002"
    heads_kept = family.endswith("-beside-bert-heads")
    family = family.removesuffix("-beside-bert-heads")
    rewrite_file(ckpt, lambda t: {f"{family}.{k.removeprefix('bert.')}" if k.startswith("bert.") or not heads_kept
                                  else k: v for k, v in t.items()})
    config = json.loads((ckpt / "config.json").read_text())
    config.pop("architectures", None)
    (ckpt / "config.json").write_text(json.dumps(config))
    before = snapshot(tmp_path)
    with refusal(rf"its weights are named {family}\.\*, not as a BERT's .*another architecture"):
        other_commands(base, setup, tmp_path, ckpt)[command]()
    assert snapshot(tmp_path) == before


def test_probing_a_run_of_own_text_under_another_data_root_names_the_data_root(base, tmp_path):
    """The tiny run was trained on a text file, prepared in its own --data-root; probe.py on it
    with another --data-root cannot find that text: one line saying to give the data root it was
    prepared in (not a flag no command has), and the run folder is left as it was."""
    run = copy(base, "pre", tmp_path)
    before = snapshot(tmp_path)
    with refusal(r"^error: the corpus 'text-[0-9a-f]{12}' \(text files a run was trained on\) is not prepared in "
                 r".*, or no longer whole: give the --data-root train_mlm\.py prepared it in"):
        probe.main(["--summary", str(run), "--data-root", str(tmp_path / "elsewhere")])
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("mode", ["--summary", "--checkpoint"])
def test_a_probe_window_longer_than_the_model_reads_is_refused_first(base, tmp_path, mode):
    """--seq-len past the checkpoint's positions (512 here): one line before any data is prepared
    (a fresh --data-root stays empty), not a traceback from the model after the probing began."""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(base / "pre" / "checkpoints" / "step-000002", ckpt)
    (ckpt / "training_state.pt").unlink()  # a plain checkpoint: no flags of its run to follow
    with refusal(r"--seq-len 1000: .*ckpt reads at most 512 positions; give at most 512"):
        probe.main([mode, str(ckpt), "--seq-len", "1000", "--data-root", str(tmp_path / "cache"),
                    *(["--out", str(tmp_path / "probes")] if mode != "--summary" else [])])
    assert not (tmp_path / "cache").exists() and not (tmp_path / "probes").exists()


# ---- figures from values they cannot draw -------------------------------------------------------


def test_plot_metrics_skips_values_too_large_to_draw(tmp_path, capsys):
    """A loss of 1e308, one of NaN and a rate of 1e308 beside ordinary records (a hand-edited or
    damaged metrics file): those values are skipped, with a one-line note that counts the losses
    left out, the rest is drawn (the one point of step 3), and the PNG is written, no traceback.
    A file whose every loss is such a value is refused in one line saying so (it is not "no loss
    yet": the run has logged its steps)."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metrics.jsonl").write_text(
        '{"step": 1, "train_loss": 1e308}\n{"step": 2, "train_loss": -1e308, "lr": 1e308}\n'
        '{"step": 3, "train_loss": NaN, "valid_loss": 2.5}\n{"step": 3, "train_loss": 2.0, "lr": 0.001}\n')
    fig = plot_metrics.figure(str(tmp_path / "run" / "metrics.jsonl"))
    assert capsys.readouterr().err.startswith("note: 3 of the 5 logged losses are NaN, infinite, not a number or "
                                              "beyond 1e100; they are left out of the plot\nnote: no unigram")
    loss_ax, lr_ax = fig.axes
    assert xy(line_of(loss_ax, "training loss")) == ([3], [2.0])
    assert xy(line_of(lr_ax, "learning rate")) == ([3], [0.001])
    pyplot().close(fig)
    plot_metrics.main([str(tmp_path / "run" / "metrics.jsonl"), "--out", str(tmp_path / "run" / "loss.png")])
    assert (tmp_path / "run" / "loss.png").read_bytes()[:4] == b"\x89PNG"
    (tmp_path / "run" / "metrics.jsonl").write_text('{"step": 1, "train_loss": 1e309}\n{"step": 2, "train_loss": NaN}\n')
    with refusal(r"metrics.jsonl: none of its 2 logged losses can be drawn \(each is NaN, infinite"):
        plot_metrics.main([str(tmp_path / "run" / "metrics.jsonl"), "--out", str(tmp_path / "run" / "loss.png")])


def test_plot_metrics_reads_a_byte_order_mark_and_draws_no_empty_legend(tmp_path):
    """A metrics.jsonl saved by an editor with a byte-order mark: its first record is drawn, with no
    note (the old code left it out as "no record", as the labelled-file readers do not). A
    fine-tuning run whose only accuracy cannot be drawn (2.5): one note, and no legend on the empty
    panel (the old code let matplotlib warn "No artists with labels found to put in legend" on
    standard error, a second line)."""
    (tmp_path / "bom").mkdir()
    (tmp_path / "bom" / "metrics.jsonl").write_bytes(
        b'\xef\xbb\xbf{"step": 1, "train_loss": 3.0}\n{"step": 2, "train_loss": 2.0}\n')
    code, out, err = script("plot_metrics.py", str(tmp_path / "bom" / "metrics.jsonl"))
    assert code == 0 and "are no record" not in err and err.startswith("note: no unigram"), err
    assert xy(line_of(plot_metrics.figure(str(tmp_path / "bom" / "metrics.jsonl")).axes[0], "training loss")) == \
        ([1, 2], [3.0, 2.0])
    (tmp_path / "cls").mkdir()
    (tmp_path / "cls" / "metrics.jsonl").write_text('{"step": 10, "epoch": 1, "train_loss": 0.7, "valid_loss": 0.6, '
                                                    '"valid_acc": 2.5}\n')
    code, out, err = script("plot_metrics.py", str(tmp_path / "cls" / "metrics.jsonl"))
    assert code == 0 and err.count("\n") == 1 and err.startswith("note: "), err


def test_probes_rewritten_without_a_plot_leave_no_old_plot(tmp_path):
    """probe.py --run writes probes_vs_step.png; --checkpoint into the same --out afterwards
    writes none, so the old plot (of other numbers) goes."""
    out = tmp_path / "probes"
    probe.write(str(out), {"models": []}, "report\n", b"\x89PNG old plot")
    assert (out / probe.PLOT).exists()
    probe.write(str(out), {"models": []}, "report\n")
    assert not (out / probe.PLOT).exists() and (out / "report.md").read_text() == "report\n"


def test_attention_on_a_model_with_one_segment(tmp_path):
    """type_vocab_size 1 (a valid BERT config): both segments get id 0, the picture is drawn."""
    tok = train_wordpiece(["the cat sat on the mat", "a dog ran in the park"], vocab_size=60)
    torch.manual_seed(0)
    BertForMaskedLM(tiny_config(vocab_size=tok.get_vocab_size(), type_vocab_size=1)).save_pretrained(
        tmp_path / "one", tokenizer=tok)
    attention.main(["--checkpoint", str(tmp_path / "one"), "--text", "the cat sat", "--next", "a dog ran",
                    "--out", str(tmp_path / "a.png")])
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("out,pattern", [
    ("a.txt", r"--out \S*a.txt: cannot draw a .txt file"),
    ("file/a.png", r"--out \S*file/a.png: \S*file is a file, not a folder \(see"),
    ("missing/a.png", r"--out \S*missing/a.png: its folder \S*missing does not exist \(see"),
    (".", r"--out \S*: a folder; give a picture's path \(see"),
])
def test_attention_refuses_a_picture_it_cannot_write_before_it_prints(base, tmp_path, capsys, out, pattern):
    """--out is checked before any model is loaded: the refusal is the only thing the command
    says (no table of heads first, then an error), and nothing is written."""
    (tmp_path / "file").write_text("x")
    before = snapshot(tmp_path)
    with refusal(pattern):
        attention.main(["--checkpoint", str(base / "pre"), "--out", str(tmp_path / out)])
    assert capsys.readouterr().out == "" and snapshot(tmp_path) == before


def test_pictures_never_go_inside_a_runs_folders(base, setup, tmp_path, capsys):
    """attention.py on a run's checkpoint without --out: the code before this one wrote
    attention.png into the checkpoint folder, which the run then took for a folder placed by hand
    (never pruned by --keep; --overwrite refused). Now it goes into the run's own folder, which
    the run knows it for; an --out inside the checkpoint is refused. polysemy.py --out a run, or a
    checkpoint of one, wrote its heat map there (the code before this one): refused in one line,
    before any model loads. The run is left as it was, but for attention.png in its own folder."""
    run = copy(base, "pre", tmp_path)
    ckpt = run / "checkpoints" / "step-000002"
    before = snapshot(run)
    attention.main(["--checkpoint", str(ckpt)])
    assert capsys.readouterr().out.endswith(f"picture: {run / 'attention.png'}\n")
    assert snapshot(run) == {**before, "attention.png": snapshot(run)["attention.png"]}
    with refusal(rf"--out {re.escape(str(ckpt / 'a.png'))} lies inside a folder of the run {re.escape(str(run))}"):
        attention.main(["--checkpoint", str(ckpt), "--out", str(ckpt / "a.png")])
    for out, said in ((run, "is the"), (ckpt, "is in the")):
        with refusal(rf"^error: --out {re.escape(str(out))} {said} pretraining run {re.escape(str(run))}; its pictures "
                     "never go inside a run: choose another --out$"):
            polysemy.main(["--minilm", str(setup / "ckpt"), "--checkpoint", str(ckpt), "--out", str(out)])
    assert sorted(snapshot(run)) == sorted([*before, "attention.png"])


@pytest.mark.parametrize("command", ["plot_metrics", "attention"])
def test_a_picture_is_never_drawn_over_a_runs_lock(base, tmp_path, command):
    """--out RUN/.lock: a name that is all extension passed the picture check as one without any
    (the code before this one renamed a PNG over the lock of a run still training, so that a second
    `--overwrite` of the run found no holder and deleted its checkpoints under it). Refused as a
    .lock file, before anything is drawn; the lock is as it was."""
    run = copy(base, "pre", tmp_path)
    lock = run / LOCK_FILE
    lock.write_text("12345\n")
    argv = [str(run / "metrics.jsonl")] if command == "plot_metrics" else ["--checkpoint", str(run)]
    with refusal(r"cannot draw a \.lock file; give a \.png, \.pdf or \.svg path"):
        {"plot_metrics": plot_metrics, "attention": attention}[command].main([*argv, "--out", str(lock)])
    assert lock.read_text() == "12345\n"


def _pipe_or_socket(path: Path, kind: str):
    """A named pipe, or a Unix socket (bound; returned, to be closed), at `path`: no root needed."""
    if kind == "pipe":
        os.mkfifo(path)
        return None
    import socket
    held = socket.socket(socket.AF_UNIX)
    held.bind(str(path))
    return held


@pytest.mark.parametrize("kind,said", [("pipe", "a named pipe"), ("socket", "a socket")])
@pytest.mark.parametrize("command", ["plot_metrics", "attention"])
def test_a_picture_never_replaces_a_pipe_or_a_socket(base, tmp_path, command, kind, said):
    """--out a named pipe or a socket (a helper's attack also used a device node, which only root
    can make): the one writer renamed the PNG over it (as root, `--out /dev/null` would have
    replaced the system's /dev/null). Refused in one line, before anything is drawn; it is still
    what it was. Every other writer goes through write_file, which refuses the same (ENXIO)."""
    run = copy(base, "pre", tmp_path)
    out = tmp_path / "loss.png"
    held = _pipe_or_socket(out, kind)
    argv = [str(run / "metrics.jsonl")] if command == "plot_metrics" else ["--checkpoint", str(run)]
    try:
        with refusal(rf"--out {re.escape(str(out))}: {said}, not a file; give a picture's path"):
            {"plot_metrics": plot_metrics, "attention": attention}[command].main([*argv, "--out", str(out)])
        assert (stat.S_ISFIFO if kind == "pipe" else stat.S_ISSOCK)(os.lstat(out).st_mode)
    finally:
        if held:
            held.close()


@pytest.mark.parametrize("kind,said", [("pipe", "a named pipe"), ("socket", "a socket"), ("folder", "a folder")])
def test_a_summary_that_cannot_be_written_is_refused_before_the_resume_trains(base, corpus, tmp_path, kind, said):
    """A run's summary.json replaced by a named pipe, a socket or a folder, then --resume: the code
    before this one trained every step, stopped at the summary with "remove it, then --resume", and
    that --resume found the run at --max-steps, so nothing to train, and wrote no summary. Refused
    now in one line before anything is trained; once it is removed, the resume trains and writes it."""
    out = copy(base, "pre", tmp_path)
    summary = out / "summary.json"
    summary.unlink()
    held = summary.mkdir() if kind == "folder" else _pipe_or_socket(summary, kind)
    try:
        with refusal(rf"--out {re.escape(str(out))}: its summary.json is {said}, not a file, where the run writes a "
                     r"file: remove it, then --resume$"):
            train_mlm.main(pretrain_args(out, corpus, base / "cache", "--resume", "--max-steps", "3"))
        assert not (out / "checkpoints" / "step-000003").exists()
    finally:
        if held:
            held.close()
    summary.rmdir() if kind == "folder" else summary.unlink()
    train_mlm.main(pretrain_args(out, corpus, base / "cache", "--resume", "--max-steps", "3"))
    assert json.loads(summary.read_text())["steps"] == 3


@pytest.mark.parametrize("kind,said", [("pipe", "a named pipe"), ("socket", "a socket")])
def test_the_one_writer_never_replaces_a_pipe_or_a_socket(tmp_path, kind, said):
    """files.write_file over a named pipe or a socket: OSError ENXIO naming it, no temporary left;
    what stood there is as it was. Over a plain file or a link (replaced, not written through) it
    writes."""
    from minibert.files import write_file
    path = tmp_path / "x.json"
    held = _pipe_or_socket(path, kind)
    try:
        with pytest.raises(OSError) as e:
            write_file(str(path), b"{}")
        assert e.value.errno == errno.ENXIO and e.value.strerror == f"{said}, not a file" \
            and e.value.filename == str(path)
        assert sorted(os.listdir(tmp_path)) == ["x.json"]
    finally:
        if held:
            held.close()
    (tmp_path / "plain").write_text("old")
    (tmp_path / "link").symlink_to(tmp_path / "plain")
    for name in ("plain", "link"):
        write_file(str(tmp_path / name), b"new")
    assert (tmp_path / "plain").read_text() == "new" and not (tmp_path / "link").is_symlink()


def test_predict_on_a_run_still_in_its_first_epoch_says_so(base, tmp_path):
    """A fine-tuning run another process holds, with no best/ yet: predict says the run is still
    fine-tuning, not that an --out (which predict does not have) is in use."""
    import fcntl
    out = copy(base, "cls", tmp_path)
    shutil.rmtree(out / "best")
    with open(out / LOCK_FILE, "w") as held:
        held.write("4242\n")
        held.flush()
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        code, _, err = script("finetune.py", "predict", "--model", str(out), stdin="a good film\n")
    assert code == 1 and err == f"error: {out} is still fine-tuning (pid 4242) and has no best/ model yet; predict " \
                                "once its first epoch is done\n", err


@pytest.mark.parametrize("damage", ["cut", "edited", "missing"])
def test_a_prepared_corpus_that_is_no_longer_whole_is_prepared_again(base, corpus, tmp_path, capsys, damage):
    """The prepared training split cut to 1,000 bytes, edited (cat -> dog) or removed, its token
    cache gone: the manifest's sha256 no longer matches, so the corpus is prepared again from its
    text. That is the text the manifest lists, so the cached tokenizer stays (and is used), and
    the run trains on the blocks an intact cache gives."""
    cache = tmp_path / "cache"
    shutil.copytree(base / "cache", cache)
    (split,) = cache.glob("text-*/pretrain/train.txt")
    whole = split.read_bytes()
    train_mlm.main(pretrain_args(tmp_path / "intact", corpus, cache, "--max-steps", "1"))
    intact = capsys.readouterr().out.splitlines()[0]
    if damage == "cut":
        split.write_bytes(whole[:1000])
    elif damage == "edited":
        split.write_bytes(whole.replace(b"cat", b"dog"))
    else:
        split.unlink()
    shutil.rmtree(split.parents[1] / "tokens")
    train_mlm.main(pretrain_args(tmp_path / "again", corpus, cache, "--max-steps", "1"))
    assert capsys.readouterr().out.splitlines()[0] == intact and split.read_bytes() == whole


def test_a_damaged_manifest_prepares_the_text_again_and_keeps_the_caches_made_of_it(base, corpus, tmp_path, capsys):
    """manifest.json overwritten with bytes that are not JSON: nothing says the prepared text is
    whole, so it is prepared again from the text file. That text is the one the cached tokenizer
    and token files were made of, as the keys they carry say: they are kept, the very files (a
    tokenizer trained again can break ties between pieces otherwise, in another process: other
    numbers for the same text), and the run prints what it printed before."""
    cache = tmp_path / "cache"
    shutil.copytree(base / "cache", cache)
    (folder,) = cache.glob("text-*")
    train_mlm.main(pretrain_args(tmp_path / "intact", corpus, cache, "--max-steps", "1"))
    intact = capsys.readouterr().out.splitlines()[0]
    caches = {p: p.stat().st_ino for p in [*folder.glob("tokenizer-*.json"), *folder.glob("tokens/*.pt")]}
    (folder / "manifest.json").write_bytes(b"{garbage")
    train_mlm.main(pretrain_args(tmp_path / "again", corpus, cache, "--max-steps", "1"))
    assert capsys.readouterr().out.splitlines()[0] == intact
    assert len(caches) == 3 and {p: p.stat().st_ino for p in caches} == caches
    assert json.loads((folder / "manifest.json").read_text())["files"]


@pytest.mark.parametrize("name", ["../victim", "", ".", "a/b", "..", "/abs"])
def test_a_corpus_name_that_is_not_a_plain_folder_name_is_refused(corpus, tmp_path, name):
    """data/prepare.py --corpus NAME --text FILE --root R writes R/NAME: a name with a path in it
    (../victim) wrote the corpus outside R, and an empty one or `.` into R itself. One line;
    nothing is written, inside R or beside it."""
    from data import prepare as prepare_script
    (tmp_path / "root").mkdir()
    with refusal(r"the corpus name .* is not a plain folder name"):
        prepare_script.main(["--corpus", name, "--text", str(corpus), "--root", str(tmp_path / "root")])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["root"] and not any((tmp_path / "root").iterdir())


def test_temporary_files_of_a_killed_process_are_removed_when_the_run_is_claimed_again(base, corpus, tmp_path):
    """kill -9 between write_file's write and its rename leaves NAME.tmpPID. The next process to
    claim the run (here a --resume) removes those of processes that are gone, in the run folder
    and in checkpoints/, and keeps one of a process still alive (the parent of this one: it may be
    writing), and files of one's own named like them but of names the run never writes
    (notes.tmpPID: the code before this one deleted them)."""
    out = copy(base, "pre", tmp_path)
    gone = next(pid for pid in range(4_000_000, 4_100_000) if not os.path.exists(f"/proc/{pid}"))
    left = [out / f"metrics.jsonl.tmp{gone}", out / "checkpoints" / f"latest.tmp{gone}"]
    kept = [out / "checkpoints" / f"latest.tmp{os.getppid()}", out / f"notes.tmp{gone}",
            out / "checkpoints" / f"notes.tmp{gone}"]
    for path in (*left, *kept):
        path.write_text("half")
    train_mlm.main(pretrain_args(out, corpus, base / "cache", "--resume", "--max-steps", "3"))
    assert not any(p.exists() for p in left) and all(p.exists() for p in kept)


def test_a_data_root_inside_a_new_out_is_refused_before_anything_is_made(corpus, tmp_path):
    """--data-root R/cache beside --out R (which does not exist yet): preparing the corpus first
    would make R a folder of other files, which the run then refuses, leaving the cache behind,
    for ever. Refused in one line before anything is made."""
    with refusal(r"cache, an input of this run, is inside --out .*R, which is not a run yet: give each its own place"):
        train_mlm.main(pretrain_args(tmp_path / "R", corpus, tmp_path / "R" / "cache", "--max-steps", "1"))
    assert not (tmp_path / "R").exists()


@pytest.mark.parametrize("command", ["train_mlm", "finetune"])
def test_a_file_size_limit_is_named_as_such_not_as_a_full_disk(base, corpus, setup, tmp_path, command):
    """`ulimit -f` of 60 kB (set in the child process): the pretraining checkpoint or the
    fine-tuning run's files do not fit. One line, whose advice is to raise the limit, not to free
    disk space; no temporary file is left."""
    import resource
    cache = tmp_path / "cache"
    shutil.copytree(base / "cache", cache)
    argv = ["train_mlm.py", *pretrain_args(tmp_path / "run", corpus, cache, "--max-steps", "2")] \
        if command == "train_mlm" else ["finetune.py", "--checkpoint", str(setup / "ckpt"), "--data",
                                        str(setup / "data"), "--out", str(tmp_path / "run"), "--epochs", "1",
                                        "--no-progress"]
    limit = lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (60_000, 60_000))  # noqa: E731
    r = subprocess.run([sys.executable, *argv], cwd=REPO, capture_output=True, text=True, timeout=300,
                       preexec_fn=limit)
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
    assert "(File too large)" in r.stderr and "a file-size limit (ulimit -f) stopped the write: raise it" in r.stderr.lower()
    assert "free some space" not in r.stderr, r.stderr
    assert [p for p in tmp_path.rglob("*") if ".tmp" in p.name] == []


def test_polysemy_under_a_file_size_limit_is_one_line(stand_in, run_folder, monkeypatch, tmp_path):
    """The heat map's write fails as under `ulimit -f` (EFBIG): one line naming the limit, no
    traceback."""
    import polysemy

    def too_large(path, data):
        raise OSError(errno.EFBIG, os.strerror(errno.EFBIG), f"{path}.tmp1")
    monkeypatch.setattr(polysemy, "write_file", too_large)
    monkeypatch.chdir(tmp_path)  # no runs/mlm-zh here
    with refusal(r"heatmap-minilm-en.png: .*File too large; a file-size limit \(ulimit -f\) stopped the write"):
        polysemy.main(["--minilm", str(stand_in), "--checkpoint", str(run_folder), "--out", str(tmp_path / "out")])


def test_the_probes_plot_skips_an_agreement_source_with_no_item():
    """probe.py --run on a text in which one source of agreement items has none (its accuracy
    None): the plot is drawn without that curve instead of a TypeError after all the probing."""
    from types import SimpleNamespace
    sources = list(probe.SOURCES)
    agreement = {s: ({"acc": None, "balanced": None, "n": 0} if i == 0 else {"acc": 0.7, "balanced": 0.6, "n": 10})
                 for i, s in enumerate(sources)}
    baseline = {"ngram": {"unigram": {"loss": 6.0}, "bigram": {"loss": 5.0}}, "agreement": agreement}
    frozen = {p: {"40": {"test_acc": 0.6}} for p in ("cls", "mean")}
    rows = [{"step": s, "masked": {"loss": 5.0 - s / 10}, "agreement": agreement, "frozen": frozen} for s in (0, 10)]
    prober = SimpleNamespace(baselines={"en": baseline}, subsets={"40": list(range(40))})
    png = probe.plot_run(rows, prober, {"40": {"bow": {"test_acc": 0.55}}}, "run")
    assert png[:4] == b"\x89PNG"


def test_a_study_whose_results_cannot_be_written_is_one_line(monkeypatch, tmp_path):
    """experiments.compare under a file-size limit: the study has run (here a stand-in returns
    one row at once: a real study takes minutes), then writing its results fails with EFBIG. One
    line naming the limit and that the numbers are lost, no traceback."""
    from types import SimpleNamespace

    from experiments import compare
    task = SimpleNamespace(train=SimpleNamespace(texts=["a"] * 4), valid=SimpleNamespace(texts=["a"] * 2),
                           test=SimpleNamespace(texts=["a"] * 2))
    monkeypatch.setattr(compare, "load_task", lambda args, s: task)
    monkeypatch.setattr(compare, "load_encoders", lambda args, task, out: [])
    monkeypatch.setitem(compare.STUDIES, "methods", lambda *args: ([{"row": 1}], []))

    def too_large(path, obj):
        raise OSError(errno.EFBIG, os.strerror(errno.EFBIG), path)
    monkeypatch.setattr(compare, "write_json", too_large)
    with refusal(r"File too large; a file-size limit \(ulimit -f\) stopped the write"):
        compare.main(["methods", "--out", str(tmp_path / "out")])


@pytest.mark.parametrize("pooler", [True, False], ids=["with-a-pooler", "without"])
def test_a_head_minibert_does_not_have_is_refused_by_its_name(base, tmp_path, pooler):
    """A checkpoint whose config.json names BertForTokenClassification (one label per token): its
    classifier.weight has the shape of a sentence classifier's, so with a pooler `predict` took
    it for one and labelled sentences with a token head; without one it blamed the missing
    pooler. Refused in one line naming the class, before the tokenizer is read."""
    from minibert.config import BertConfig
    from minibert.model import BertForSequenceClassification
    best = copy(base, "cls", tmp_path) / "best"
    if pooler:
        BertForSequenceClassification(BertConfig.load(best)).save_pretrained(best, tokenizer=load_tokenizer(best))
    config = json.loads((best / "config.json").read_text())
    config["architectures"] = ["BertForTokenClassification"]
    (best / "config.json").write_text(json.dumps(config))
    (tmp_path / "in.txt").write_text("a good film\n")
    with refusal(r"^error: cannot load --model \S+best: \S+best holds a BertForTokenClassification \(its "
                 r"config.json's architectures\), whose head minibert does not have; it loads BertModel, "):
        finetune.main(["predict", "--model", str(best), "--file", str(tmp_path / "in.txt")])


@pytest.mark.parametrize("edit", [{"num_labels": 5}, {"id2label": {"0": "neg", "1": "pos", "2": "mixed"}}],
                         ids=["num-labels-5", "three-labels"])
def test_a_classifier_whose_label_count_was_edited_names_it(base, tmp_path, edit):
    """A fine-tuned classifier (2 classes) whose config.json was edited to give 5 classes by
    num_labels, or 3 by id2label (each key of the pair left out, so the config itself is
    consistent): its classifier.weight scores 2. The old line listed two shape mismatches and
    named neither the cause nor the fix; it names both now, in one line."""
    best = copy(base, "cls", tmp_path) / "best"
    config = {k: v for k, v in json.loads((best / "config.json").read_text()).items()
              if k not in ("num_labels", "id2label", "label2id")}
    (best / "config.json").write_text(json.dumps({**config, **edit}))
    (tmp_path / "in.txt").write_text("a good film\n")
    n = edit.get("num_labels") or len(edit["id2label"])
    with refusal(rf"^error: cannot load --model \S+best: \S+best: its config.json gives {n} classes \(num_labels, "
                 rf"id2label\), but its classifier.weight \(2, \d+\) scores 2: give config.json the num_labels and "
                 r"id2label of the 2 classes it was fine-tuned on$"):
        finetune.main(["predict", "--model", str(best), "--file", str(tmp_path / "in.txt")])


@pytest.mark.parametrize("command", ["fill-mask", "predict"])
def test_a_bin_pickled_bare_is_one_line_through_the_command(base, tmp_path, command):
    """fill_mask.py and predict, each in a process of its own, on a folder whose weights are a
    pytorch_model.bin pickled bare with protocol 4, whose loading would run a command: one line,
    and the command never runs (fill-mask printed torch's warning of the protocol first, a second
    line on standard error: a warning is only seen outside pytest, which records warnings)."""
    folder = copy(base, "pre", tmp_path) / "checkpoints" / "step-000002" if command == "fill-mask" else \
        copy(base, "cls", tmp_path) / "best"
    (folder / "model.safetensors").unlink()
    marker = tmp_path / "MARKER"
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps(_RunsACommand(f"touch {marker}"), protocol=4))
    (tmp_path / "in.txt").write_text("a good film\n")
    argv = ["fill_mask.py", "--checkpoint", str(folder), "a [MASK] film"] if command == "fill-mask" else \
        ["finetune.py", "predict", "--model", str(folder), "--file", str(tmp_path / "in.txt")]
    code, out, err = script(*argv)
    assert (code, err.count("\n"), out) == (1, 1, "") and "cannot be loaded safely with weights_only=True" in err, err
    assert not marker.exists()


@pytest.mark.parametrize("case", ["num-labels-without-names", "pooler-behind-the-cls-head-name",
                                  "named-a-masked-lm"])
def test_a_classifier_folder_is_read_as_transformers_reads_it_or_refused(base, tmp_path, case, capsys):
    """A 3-class BertForSequenceClassification (pooler, then the classifier) whose config.json gives
    num_labels 3 but no id2label: transformers names the classes LABEL_0 to LABEL_2, and predict
    prints its label and probability (the old code built 2 classes and blamed the weights' shapes).
    The same folder with architectures naming minibert's [CLS] head, which has no pooler: refused
    in one line (the old code dropped the pooler unsaid and printed another label than
    transformers gives for the folder). The folder with architectures naming BertForMaskedLM: refused,
    naming the disagreement (the old line listed the masked-LM head as missing, as if the folder
    were a damaged MLM)."""
    import transformers
    from dataclasses import replace
    from minibert.config import BertConfig
    from minibert.model import BertForSequenceClassification
    best = copy(base, "cls", tmp_path) / "best"
    tokenizer = load_tokenizer(best)
    torch.manual_seed(0)
    config = replace(BertConfig.load(best), id2label={0: "a", 1: "b", 2: "c"})
    BertForSequenceClassification(config, 3).save_pretrained(best, tokenizer=tokenizer)
    saved = json.loads((best / "config.json").read_text())
    if case == "num-labels-without-names":
        del saved["id2label"], saved["label2id"]
        saved["num_labels"] = 3
    else:
        saved["architectures"] = ["BertForClassification" if case == "pooler-behind-the-cls-head-name" else
                                  "BertForMaskedLM"]
    (best / "config.json").write_text(json.dumps(saved))
    text = "a good film"
    (tmp_path / "in.txt").write_text(text + "\n")
    argv = ["predict", "--model", str(best), "--file", str(tmp_path / "in.txt")]
    if case == "named-a-masked-lm":
        with refusal(r"^error: cannot load --model \S+best: \S+best: its config.json's architectures names "
                     r"BertForMaskedLM, which has no classifier, but its weights hold one \(classifier.weight\)"):
            finetune.main(argv)
        return
    if case == "pooler-behind-the-cls-head-name":
        with refusal(r"^error: cannot load --model \S+best: \S+best holds a pooler \(bert\.pooler\.dense\.\w+, "
                     r"\.\.\.\), which BertForClassification does not have: its classifier was trained on the "
                     r"pooled \[CLS\] vector"):
            finetune.main(argv)
        return
    finetune.main(argv)
    label, probability, echoed = capsys.readouterr().out.splitlines()[-1].split("\t")
    hf = transformers.BertForSequenceClassification.from_pretrained(best).eval()
    with torch.no_grad():
        p = hf(input_ids=torch.tensor([tokenizer.encode(text).ids])).logits.softmax(-1)[0]
    k = int(p.argmax())
    assert (label, echoed) == (hf.config.id2label[k], text) and label == f"LABEL_{k}"
    assert abs(float(probability) - float(p[k])) <= 1e-4 / 2 + 1e-6  # printed to 4 places; float32 noise ~1e-7


@pytest.mark.parametrize("case", ["pair-swapped", "invisible-text", "hangul-filler-text", "overflow-after-attention",
                                  "overflow-in-the-second-of-two"])
def test_attention_draws_only_berts_pair_and_finite_numbers(base, tmp_path, case):
    """attention.py on a tokenizer whose pair template puts the next text first (the old code drew
    --next as segment A, unsaid), on a --text of zero-width spaces (an empty segment A, drawn) or
    of a Hangul filler (read as [UNK] alone: drawn), and
    on a checkpoint whose intermediate layer overflows float32 after the attention (its maps are
    finite, its output is not: the old code drew it; every other command refuses it). Given after
    a good checkpoint, the one that overflows is named (the old line did not say which)."""
    ckpt = copy(base, "pre", tmp_path) / "checkpoints" / "step-000002"
    given = [str(ckpt)]
    text = "a good film ."
    if case == "pair-swapped":
        config = json.loads((ckpt / "config.json").read_text())
        config.pop("tokenizer_sha256", None)
        (ckpt / "config.json").write_text(json.dumps(config))
        tok = json.loads((ckpt / "tokenizer.json").read_text())
        pair = tok["post_processor"]["pair"]
        sequences = [piece for piece in pair if "Sequence" in piece]
        sequences[0]["Sequence"]["id"], sequences[1]["Sequence"]["id"] = "B", "A"
        (ckpt / "tokenizer.json").write_text(json.dumps(tok))
        pattern = r"does not frame a pair as BERT's input"
    elif case in ("invisible-text", "hangul-filler-text"):
        text = "\u200b\u200b" if case == "invisible-text" else "\u3164"
        pattern = r"^error: --text holds nothing the tokenizer reads"
    else:
        rewrite_file(ckpt, lambda t: {k: v * 1e30 if "intermediate.dense.weight" in k else v for k, v in t.items()})
        pattern = rf"^error: --checkpoint {re.escape(str(ckpt))}: the model computes numbers that are not finite"
        if case == "overflow-in-the-second-of-two":
            given = [str(base / "pre"), str(ckpt)]
    with refusal(pattern):
        attention.main(["--checkpoint", *given, "--out", str(tmp_path / "att.png"), "--text", text])
    assert not (tmp_path / "att.png").exists()


@pytest.mark.parametrize("case", ["empty-stdin-bad-model", "best-tmp-not-whole", "fine-tuning-run-as-checkpoint",
                                  "weights-a-folder", "probe-out-of-other-files", "summary-of-a-fine-tuning-run"])
def test_each_refusal_names_the_real_cause(base, setup, tmp_path, monkeypatch, capsys, case):
    """predict with nothing on standard input and a --model that is a pretraining run: the model
    is named (the old code: "no text to label"). A best.tmp that is no whole model (notes of
    one's own) beside best.old after a killed export: best.old is put back (the old code moved
    best.tmp into best/, breaking every later predict). A fine-tuning run as --checkpoint: named,
    with its best/ (the old code: "no tokenizer.json"). A model.safetensors that is a folder:
    named (the old code: "no model.safetensors", listing it). probe.py --out a folder of other
    files: no advice to use --overwrite, which probe.py has not. probe.py --summary of a
    fine-tuning run: named (the old code: "not a checkpoint or run folder")."""
    import io as io_module
    if case == "empty-stdin-bad-model":
        monkeypatch.setattr("sys.stdin", io_module.StringIO(""))
        with refusal(r"^error: --model \S+pre is a pretraining run, not a classifier"):
            finetune.main(["predict", "--model", str(base / "pre")])
    elif case == "best-tmp-not-whole":
        out = copy(base, "cls", tmp_path)
        (out / "best").rename(out / "best.old")
        (out / "best.tmp").mkdir()
        (out / "best.tmp" / "notes.txt").write_text("mine\n")
        (tmp_path / "in.txt").write_text("a good film\n")
        finetune.main(["predict", "--model", str(out), "--file", str(tmp_path / "in.txt")])
        assert capsys.readouterr().out.count("\t") == 2 and (out / "best" / "config.json").is_file()
    elif case == "fine-tuning-run-as-checkpoint":
        with refusal(r"^error: \S+cls is a fine-tuning run, not a checkpoint or a train_mlm.py run folder; its model "
                     r"is \S+cls/best$"):
            finetune.main(["--checkpoint", str(base / "cls"), "--data", str(setup / "data"), "--out",
                           str(tmp_path / "ft"), "--no-progress"])
    elif case == "weights-a-folder":
        ckpt = copy(base, "pre", tmp_path) / "checkpoints" / "step-000002"
        (ckpt / "model.safetensors").unlink()
        (ckpt / "model.safetensors").mkdir()
        import fill_mask as fill_mask_command
        with refusal(r"model.safetensors is a folder, not a file"):
            fill_mask_command.main(["--checkpoint", str(ckpt), "a good [MASK] ."])
    elif case == "probe-out-of-other-files":
        (tmp_path / "mine").mkdir()
        (tmp_path / "mine" / "notes.txt").write_text("mine\n")
        with refusal(r"^error: --out \S+mine already holds other files; choose another --out$"):
            probe.main(["--checkpoint", "minilm", "--out", str(tmp_path / "mine"), "--data-root", str(tmp_path / "c")])
    else:
        with refusal(r"^error: \S+cls is a fine-tuning run, not a checkpoint or a train_mlm.py run folder"):
            probe.main(["--summary", str(base / "cls"), "--data-root", str(base / "cache")])


@pytest.mark.parametrize("command", ["predict", "train"])
def test_an_overflow_only_a_long_text_reaches_is_said_before_any_output_and_not_blamed_on_the_rate(
        base, setup, tmp_path, capsys, command):
    """Position 40's embedding set to +-3e38: finite, but the embedding LayerNorm's variance
    overflows on it, so only a text of more than 40 tokens gives NaN. predict on 70 short lines
    and one long one printed the first batch's 64 labels, then refused; fine-tuning with one long
    training row passed its check of the first batch and, when the row's batch came, said "try a
    lower learning rate" (no rate mends it). Now predict prints nothing before its one line, and
    fine-tuning runs the checkpoint's own encoder on the rows of that step and names its weights."""
    src = copy(base, "cls", tmp_path) / "best" if command == "predict" else tmp_path / "ckpt"
    if command == "train":
        shutil.copytree(setup / "ckpt", src)

    def overflow_at_position_40(tensors):
        rows = tensors["bert.embeddings.position_embeddings.weight"]                 # (P, C)
        rows[40] = torch.tensor([3e38, -3e38]).repeat(rows.shape[1] // 2)            # finite; its variance is not

    rewrite_file(src, overflow_at_position_40)
    long_text = " ".join(["a good film and a fine story"] * 10)
    if command == "predict":
        (tmp_path / "in.txt").write_text("a good film\n" * 70 + long_text + "\n")
        argv = ["predict", "--model", str(src), "--file", str(tmp_path / "in.txt")]
    else:
        shutil.copytree(setup / "data", tmp_path / "data")
        with open(tmp_path / "data" / "train.tsv", "a") as f:
            f.write(f"{long_text}\tpos\n")
        argv = ["--checkpoint", str(src), "--data", str(tmp_path / "data"), "--out", str(tmp_path / "run"),
                "--epochs", "1", "--batch-size", "8", "--no-progress"]
    with refusal(r"the model computes numbers that are not finite from its weights \(they overflow float32\)"):
        finetune.main(argv)
    if command == "predict":
        assert capsys.readouterr().out == ""


@pytest.mark.parametrize("split", ["valid", "test"])
def test_an_overflow_only_a_validation_or_test_text_reaches_is_refused_before_the_run(setup, tmp_path, split):
    """The embedding rows of the tokens of "xxx", which only one validation (or test) row holds, set
    to +-3e38: finite, but the embedding LayerNorm's variance overflows on them, so only that row
    gives NaN. Fine-tuning checked the first training batch alone, trained, and reported "validation
    loss nan" (or a test accuracy scored on NaN logits) with exit status 0; now every token of the
    three splits is read before --out is claimed: one line, and no run folder."""
    from minibert import load_tokenizer
    ckpt, data = tmp_path / "ckpt", tmp_path / "data"
    shutil.copytree(setup / "ckpt", ckpt)
    shutil.copytree(setup / "data", data)
    with open(data / f"{split}.tsv", "a") as f:
        f.write("the film was xxx\tpos\n")
    tok = load_tokenizer(str(ckpt))
    in_train = {i for line in (data / "train.tsv").read_text().splitlines() for i in tok.encode(line.split("\t")[0]).ids}
    only_there = set(tok.encode("xxx", add_special_tokens=False).ids) - in_train
    assert only_there

    def overflow_on_xxx(tensors):
        rows = tensors["bert.embeddings.word_embeddings.weight"]                     # (V, C)
        for i in only_there:
            rows[i] = torch.tensor([3e38, -3e38]).repeat(rows.shape[1] // 2)          # finite; its variance is not

    rewrite_file(ckpt, overflow_on_xxx)
    with refusal(r"^error: --checkpoint \S+: the model computes numbers that are not finite from its weights"):
        finetune.main(["--checkpoint", str(ckpt), "--data", str(data), "--out", str(tmp_path / "run"), "--epochs", "1",
                       "--batch-size", "8", "--no-progress"])
    assert not (tmp_path / "run").exists()


def test_exercise_refuses_weights_that_overflow_before_it_prints(base, tmp_path, capsys, monkeypatch):
    """exercise.py on a MiniLM whose intermediate weights overflow float32: exercise 1 printed a
    NaN loss, then exercise 3 stopped in a traceback (a CheckpointError nobody caught). Now one
    line before anything is printed."""
    import exercise
    ckpt = copy(base, "cls", tmp_path) / "best"
    rewrite_file(ckpt, lambda t: {k: v * 1e30 if "intermediate.dense.weight" in k else v for k, v in t.items()})
    monkeypatch.setattr(exercise, "fetch_minilm", lambda: str(ckpt))
    with refusal(r"the model computes numbers that are not finite .*delete data/cache/minilm"):
        exercise.main([])
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("case", ["id2label-surrogate", "fill-mask-argument", "attention-argument", "prepare-latin-1",
                                  "corpus-latin-1", "corpus-utf-16-without-a-byte-order-mark", "predict-utf-16-without-a-"
                                  "byte-order-mark", "plot-utf-16", "float64-too-large"])
def test_what_cannot_be_read_as_written_is_one_line_naming_why(base, tmp_path, case):
    """Bytes that are no text, and numbers no float32 holds, each through the real command: a
    config.json label holding a JSON escape of half a surrogate pair (the old code: a
    UnicodeEncodeError traceback when predict printed it); a command-line text holding bytes that
    are not UTF-8 (a TypeError traceback from the tokenizer); a Latin-1 text to prepare or pretrain
    on, and a UTF-16 metrics.jsonl to plot (Python's codec message, or "none of its lines is a
    record", with no fix); float64 weights of 1e300, finite in the file but inf in float32 (called
    "not finite (inf or nan)", which the file is not). One line each, naming the cause. A corpus
    or predict's input in UTF-16 without a byte-order mark (bytes that decode as UTF-8 beside NULs:
    the code before this one pretrained on them, and predicted on them, echoing the NULs) too."""
    from data import prepare
    import fill_mask
    latin = tmp_path / "mine.txt"
    latin.write_bytes("Un caf\xe9 au lait, s'il vous pla\xeet.\n\n".encode("latin-1") * 40)
    if case == "id2label-surrogate":
        ckpt = copy(base, "cls", tmp_path) / "best"
        config = json.loads((ckpt / "config.json").read_text())
        config["id2label"] = {k: f"{v}@" for k, v in config["id2label"].items()}
        (ckpt / "config.json").write_text(json.dumps(config).replace("@", "\\ud800", 1))
        (tmp_path / "in.txt").write_text("a good film\n")
        run, pattern = (lambda: finetune.main(["predict", "--model", str(ckpt), "--file", str(tmp_path / "in.txt")]),
                        r"config\.json is not valid JSON: a string holds half of a UTF-16 surrogate pair")
    elif case in ("fill-mask-argument", "attention-argument"):
        ckpt = str(base / "pre" / "checkpoints" / "step-000002")
        run = (lambda: fill_mask.main(["--checkpoint", ckpt, "the \udcff [MASK]"])) if case.startswith("fill") else \
            (lambda: attention.main(["--checkpoint", ckpt, "--text", "the \udcff film", "--out", str(tmp_path / "a.png")]))
        pattern = r"^error: argument (texts|--text): 'the \\xff (\[MASK\]|film)' is not UTF-8 text \(see \S+ --help\)$"
    elif case == "prepare-latin-1":
        run = lambda: prepare.main(["--corpus", "mine", "--text", str(latin), "--root", str(tmp_path / "cache")])  # noqa: E731
        pattern = r"^error: cannot read \S+mine\.txt: not UTF-8 text \(byte 0xe9 at offset 6 is no UTF-8\): save it as UTF-8"
    elif case == "corpus-latin-1":
        run = lambda: train_mlm.main(pretrain_args(tmp_path / "run", latin, tmp_path / "cache"))  # noqa: E731
        pattern = r"^error: cannot read \S+mine\.txt: not UTF-8 text \(byte 0xe9 at offset 6 is no UTF-8\): save it as UTF-8"
    elif case.endswith("without-a-byte-order-mark"):
        utf16 = tmp_path / "utf16.txt"
        utf16.write_bytes("a good film , well told .\n\n".encode("utf-16-le") * 40)
        run = (lambda: train_mlm.main(pretrain_args(tmp_path / "run", utf16, tmp_path / "cache"))) \
            if case.startswith("corpus") else \
            (lambda: finetune.main(["predict", "--model", str(base / "cls"), "--file", str(utf16)]))
        pattern = (r"^error: cannot read \S+utf16\.txt: it holds NUL bytes, as UTF-16 without a byte-order mark does: "
                   r"save it as UTF-8 \(e\.g\. iconv -f UTF-16LE -t UTF-8\)$")
    elif case == "plot-utf-16":
        (tmp_path / "metrics.jsonl").write_bytes('{"step": 1, "train_loss": 2.0}\n'.encode("utf-16"))
        run = lambda: plot_metrics.main([str(tmp_path / "metrics.jsonl")])  # noqa: E731
        pattern = r"metrics\.jsonl: not UTF-8 text \(byte 0xff at offset 0 is no UTF-8; the file starts with a UTF-16 byte"
    else:
        ckpt = copy(base, "pre", tmp_path) / "checkpoints" / "step-000002"

        def to_float64(tensors):
            tensors = {k: v.double() for k, v in tensors.items()}
            tensors["cls.predictions.bias"][0] = 1e300                                   # finite in float64 only
            return tensors
        rewrite_file(ckpt, to_float64)
        run = lambda: fill_mask.main(["--checkpoint", str(ckpt), "a [MASK] ."])  # noqa: E731
        pattern = r"holds weights that are too large for float32 \(float64 values beyond 3\.4e38\) in cls\.predictions\.bias"
    with refusal(pattern):
        run()


def test_a_metrics_record_giving_a_key_twice_is_left_out_and_said(tmp_path, capsys):
    """A metrics.jsonl record that gives train_loss twice (2.0, then 99): which value counts is
    unsaid, so the record is no record: left out of the plot, with the note that counts such lines
    (the old code drew 99, the last value, and said nothing)."""
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text('{"step": 1, "train_loss": 3.0}\n{"step": 2, "train_loss": 2.0, "train_loss": 99}\n'
                       '{"step": 3, "train_loss": 1.5}\n')
    plot_metrics.main([str(metrics)])
    assert "1 of the 3 lines of " in capsys.readouterr().err
