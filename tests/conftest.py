"""Shared helpers and fixtures. Tolerances are explicit at each call site."""

import contextlib
import io
import json
import os
import random
import re
import sys

import pytest
import torch

from minibert import BertConfig, BertForMaskedLM
from minibert.text import train_wordpiece


def assert_close(actual, expected, atol, rtol=0.0, what="tensor"):
    """allclose that, on failure, says how far off it was (max and mean |difference|)."""
    actual, expected = torch.as_tensor(actual), torch.as_tensor(expected, dtype=torch.as_tensor(actual).dtype)
    assert actual.shape == expected.shape, f"{what}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    diff = (actual - expected).abs()
    ok = torch.allclose(actual, expected, atol=atol, rtol=rtol)
    if os.environ.get("MINIBERT_TOLERANCE_LOG"):  # the kernel-path runs of docs/testing.md compare these files
        used = (diff / (atol + rtol * expected.abs())).nan_to_num(0.0).max().item() if diff.numel() else 0.0  # 0/0: 0
        with open(os.environ["MINIBERT_TOLERANCE_LOG"], "a") as f:
            f.write(json.dumps({"test": os.environ.get("PYTEST_CURRENT_TEST", "").removesuffix(" (call)"), "what": what,
                                "max_diff": diff.max().item() if diff.numel() else 0.0, "atol": atol, "rtol": rtol,
                                "used": used}) + "\n")
    assert ok, (f"{what}: max |diff| {diff.max().item():.3e}, mean {diff.mean().item():.3e} "
                f"(atol {atol}, rtol {rtol})")


def assert_same_loss_and_grads(loss, expected_loss, model, expected_model, atol, what=""):
    """Backward both losses; the losses and every parameter's gradient agree within atol."""
    assert_close(loss, expected_loss, atol=atol, what=f"loss{what}")
    loss.backward()
    expected_loss.backward()
    for (name, p), q in zip(expected_model.named_parameters(), model.parameters(), strict=True):
        assert_close(q.grad, p.grad, atol=atol, what=f"grad {name}{what}")


def refusal_line(code, err: str) -> str:
    """A command's refusal is ONE line and no traceback; returns that line. `code` is the SystemExit's
    code, `err` what the command wrote to standard error.
    - `die`: SystemExit("error: ..."): Python prints the message as the only line on standard error
      and exits with status 1; so the message starts with "error: ", holds no newline, and nothing
      else went to standard error. (A process that prints its line itself and exits 1 passes too.)
    - a wrong command line (minibert.run.flags.Parser): exit status 2 and ONE line "error: ... (see
      PROG --help)", not argparse's usage block."""
    if isinstance(code, str):
        assert code.startswith("error: ") and "\n" not in code, repr(code)
        assert err == "", f"standard error holds more than the one line: {err!r}"
        return code
    lines = err.strip("\n").splitlines()
    if code == 1:
        assert len(lines) == 1 and lines[0].startswith("error: "), err
        return lines[0]
    assert code == 2, f"exit status {code!r}: a refusal exits 1 (error: ...) or 2 (argparse); stderr {err!r}"
    assert len(lines) == 1 and lines[0].startswith("error: ") and lines[0].endswith(" --help)"), err
    return lines[0]


@contextlib.contextmanager
def refusal(pattern: str):
    """`with refusal(PATTERN): main([...])`: the command inside must stop with one line
    (refusal_line) that matches PATTERN (re.search). Yields pytest's ExceptionInfo."""
    err = io.StringIO()
    with pytest.raises(SystemExit) as e, contextlib.redirect_stderr(err):
        yield e
    line = refusal_line(e.value.code, err.getvalue())
    assert re.search(pattern, line), f"{line!r} does not match {pattern!r}"


def tiny_config(**overrides) -> BertConfig:
    """A 2-layer, 32-wide BERT: C=32, H=4 (D=8), I=37 (odd, so no width is confused), V=99."""
    sizes = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=37, max_position_embeddings=64, type_vocab_size=2)
    return BertConfig(**{**sizes, **overrides})


def perturb_(model, scale=0.1, seed=0):
    """Add noise to EVERY parameter, so zero biases and unit LayerNorms are tested too."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * scale)
    return model


# Float32 rounding between two runs of a tiny_config model perturbed at 0.1 whose kernels sum in other
# orders (other batch shapes or padding, SDPA against the written-out softmax, the padding-free path,
# transformers' code, another CPU). A sum of n terms in another order moves by at most n u times the
# sum of its terms' |.| (u = 2^-24 = 6.0e-8), here at most 4 (|h| <= 4; the decoder's 3.6 measured).
# A logit ends about 20 chained sums (9 a layer: a projection; attention's scores, normaliser and
# weighted sum; the output projection; two feed-forward sums; two LayerNorms; then a head's 2) of at
# most 37 terms: 20 x 37 x 6.0e-8 x 4 = 1.8e-4; a loss (logsumexp minus a logit) twice that, 3.6e-4,
# and MLM + NSP's two losses 7.2e-4; a gradient runs the chain back plus the 99-term sum over the
# vocabulary and the <= 64-term sum over the tokens, at |grad| <= 1.25:
# (2 x 20 x 37 + 99 + 64) x 6.0e-8 x 1.25 = 1.2e-4. Hence 1e-3; a wrong mask, scale, weight or layer
# moves these numbers by 0.1 or more. (Measured: at most ~1e-6.)
TINY_REORDER = 1e-3


@pytest.fixture
def batch():
    """Three rows of length 10, [CLS]=1 ... [SEP]=2, padding (id 0) after position 6 in row 1,
    segment B from position 5 on."""
    g = torch.Generator().manual_seed(1234)
    ids = torch.randint(5, 99, (3, 10), generator=g)
    ids[:, 0] = 1
    ids[:, -1] = 2
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    ids[1, 5] = 2
    ids[1, 6:] = 0
    types = torch.zeros_like(ids)
    types[:, 5:] = 1
    types[1, 6:] = 0
    return ids, mask, types


# ---- shared by the tests of train_mlm.py and finetune.py ----------------------------------------

@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """3,000 lines of 1-3 sentences from a small grammar (seeded): a corpus with real structure
    ('an' is followed by 'apple' or 'owl', 'my' by 'friend', ...), small enough to learn from in seconds."""
    rng = random.Random(0)
    subjects = ["the cat", "a dog", "my friend", "the teacher", "our neighbour", "the old man", "a small bird"]
    verbs = ["sees", "likes", "finds", "follows", "watches", "helps", "draws"]
    objects = ["the ball", "an apple", "the river", "the market", "a new book", "the garden", "an owl"]
    endings = [".", " today.", " every morning.", " in the evening.", " again."]
    lines = [" ".join(f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)}{rng.choice(endings)}"
                      for _ in range(rng.randint(1, 3))) for _ in range(3000)]
    path = tmp_path_factory.mktemp("corpus") / "grammar.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def documents(tmp_path_factory):
    """1,500 documents of 4-8 sentences, blank lines between them (seeded): each document keeps one
    subject and one object in every sentence, so a sentence that really follows shares both with
    the one before, and one from another document does so with probability 1/49 (7 x 7)."""
    rng = random.Random(1)
    subjects = ["the cat", "a dog", "my friend", "the teacher", "our neighbour", "the old man", "a small bird"]
    verbs = ["sees", "likes", "finds", "follows", "watches", "helps", "draws"]
    objects = ["the ball", "an apple", "the river", "the market", "a new book", "the garden", "an owl"]
    docs = []
    for _ in range(1500):
        subject, obj = rng.choice(subjects), rng.choice(objects)
        docs.append(" ".join(f"{subject.capitalize()} {rng.choice(verbs)} {obj}." for _ in range(rng.randint(4, 8))))
    path = tmp_path_factory.mktemp("documents") / "documents.txt"
    path.write_text("\n\n".join(docs) + "\n")
    return path


POSITIVE = ["good", "great", "fine", "lovely", "superb"]
NEGATIVE = ["bad", "awful", "poor", "dull", "boring"]
FILLER = ["the", "film", "was", "really", "a", "story", "plot", "and", "acting", "very"]


def sentence(rng, label):
    words = rng.sample(FILLER, 4) + [rng.choice(POSITIVE if label else NEGATIVE)]
    rng.shuffle(words)
    return " ".join(words)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A labelled set whose label is the sentiment word in each sentence (train 400, valid and
    test 100 each, balanced), and a tiny random BERT checkpoint (MLM layout, no pooler) with a
    WordPiece tokenizer trained on the training text."""
    root = tmp_path_factory.mktemp("ft")
    rng = random.Random(0)
    for split, n in (("train", 400), ("valid", 100), ("test", 100)):
        rows = [(sentence(rng, i % 2), "pos" if i % 2 else "neg") for i in range(n)]
        (root / "data").mkdir(exist_ok=True)
        (root / "data" / f"{split}.tsv").write_text("".join(f"{t}\t{y}\n" for t, y in rows))
    texts = (root / "data" / "train.tsv").read_text().splitlines()
    tok = train_wordpiece([t.split("\t")[0] for t in texts], vocab_size=80)
    torch.manual_seed(0)
    BertForMaskedLM(tiny_config(vocab_size=tok.get_vocab_size())).save_pretrained(root / "ckpt", tokenizer=tok)
    return root


# ---- every file the project writes goes through the one writer ------------------------------------
# While the tests run, every open() for writing is looked at: where the innermost code of the
# repository that asked for it is the project's own (a script, minibert/, data/, experiments/, bench/;
# not a test) and the file lies in the tests' temporary folders or the repository, it must be
# minibert.files' work: write_file's temporary name (NAME.tmp<pid>, renamed over NAME once whole) or
# a file opened with O_NOFOLLOW (minibert.files.open_no_link: append_line's logs, a run's lock). Anything
# else is a stray write (a file half-written on a crash, or written through a planted link), and fails the
# test that ran it. Not seen: writes of C extensions (torch.save or a tokenizer's save given a path; the
# project gives torch.save a buffer and writes tokenizer.json itself), commands run in a process of their
# own, and what module-wide fixtures write before a test starts.

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.join(REPO, "tests") + os.sep
VENV = os.path.join(REPO, ".venv") + os.sep
WRITING = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
TEMPORARY = re.compile(r"\.tmp\d+$")
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
watched_roots: list[str] = [REPO + os.sep]  # and pytest's temporary folder, once the session starts
stray_writes: list[str] = []


def _project_caller(frame) -> str | None:
    """file:line of the innermost frame of the repository's own code that is not a test, or None."""
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(REPO + os.sep) and not name.startswith(VENV):
            return None if name.startswith(TESTS) else f"{os.path.relpath(name, REPO)}:{frame.f_lineno}"
        frame = frame.f_back
    return None


def _watch_writes(event: str, args: tuple) -> None:
    if event != "open" or not isinstance(args[0], (str, os.PathLike)) or not isinstance(args[2], int):
        return
    path, _, flags = args
    if not flags & WRITING or flags & NOFOLLOW or TEMPORARY.search(os.path.basename(path)):
        return
    path = os.path.abspath(path)
    if path.startswith(tuple(watched_roots)) and not path.startswith(VENV) and "__pycache__" not in path:
        caller = _project_caller(sys._getframe(1))
        if caller:
            stray_writes.append(f"{caller} opened {path} for writing")


sys.addaudithook(_watch_writes)


@pytest.fixture(scope="session", autouse=True)
def _watch_the_temporary_folders(tmp_path_factory):
    watched_roots.append(str(tmp_path_factory.getbasetemp()) + os.sep)


@pytest.fixture(autouse=True)
def no_stray_writes():
    """Fails a test in which the project wrote a file other than through minibert.files."""
    stray_writes.clear()
    yield
    found, stray_writes[:] = list(stray_writes), []
    assert not found, "written other than through minibert.files:\n" + "\n".join(found)
