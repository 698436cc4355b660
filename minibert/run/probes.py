"""Probes: what a pretrained checkpoint has learned, measured on text it never trained on.

Each probe is meant to be read beside the same model never pretrained, its random-init twin
(`random_twin`: the checkpoint's config and tokenizer, weights drawn afresh from a seed as
train_mlm.py draws them), and beside simple baselines. Shapes: N texts or targets, T positions,
C hidden size, V vocabulary, K labels.

(a) Masked-token loss against n-gram models (`ngram_scores`, `masked_token_scores`). The
    validation split of the pretraining corpus is masked exactly as train_mlm.py masks it (ONE
    mask_batch call over the whole split: minibert.masking.fixed_masking), so the
    model's loss here is the `valid_loss` train_mlm.py reports for the same --mask-prob and
    --seq-len. Beside it, on the same targets, two models counted on the TRAINING split's
    ordinary tokens (never [CLS], [SEP], [PAD], ...):
      unigram, add-one smoothed over the V' ordinary ids:  p(w) = (c(w) + 1) / (N + V');
      bigram, conditioned on the token LEFT of the target as the model sees it in the masked
      input, interpolated with that unigram by Witten-Bell (no parameter to tune):
          p(w | v) = (c(v, w) + U(v) p(w)) / (c(v) + U(v)),
      c(v, w) the times v is directly followed by w inside a block (a pair never spans a special
      token), c(v) = sum_w c(v, w), U(v) the number of distinct words seen after v.
    When the left neighbour is special ([CLS], [SEP], [MASK], ...) or was never followed by an
    ordinary token in training, the bigram backs off to the unigram. It uses only what the model
    sees: a neighbour the masker replaced by a random word is taken as seen, and the word right
    of the target (which the model also sees) is not used at all. Cross-entropy in nats, and
    accuracy of the most probable word (the smallest id on a tie, as argmax picks).
(b) Agreement (`find_agreement_items`, `agreement_margins`): every whole-word occurrence of a
    verb form whose number partner is also a whole token of the vocabulary (is/are, was/were,
    has/have, does/do) in held-out text becomes one item: that token alone is replaced by
    [MASK], the text around it is kept as it is, cut to the model's positions, and the item is
    right when the model's logit for the original form beats its partner's. Baselines: the form
    more frequent in the training split, always (`more_frequent_form`), and the random init.
(c) Frozen features (`sentence_features`, `linear_probe`): the final hidden states of the frozen
    encoder, at [CLS] and averaged over the real tokens ([CLS] and [SEP] included, padding
    excluded), standardised with the training rows' mean and deviation, feed a multinomial
    logistic regression (minibert.run.baselines.SoftmaxRegression, bag-of-words' optimiser and
    penalty rule `fits` / `best`, but allowed PROBE_MAX_ITER L-BFGS iterations rather than
    bag-of-words' MAX_ITER, so that the fit runs to convergence) whose L2 penalty is picked on
    validation from PROBE_L2_GRID; the test split is scored once.

`summary` runs all three on one checkpoint and its twin, quickly; `summary_line` prints it, and
probe.py keeps it as SUMMARY_FILE in the run folder.
`run_flags` reads what a train_mlm.py checkpoint was trained with (corpus, --seq-len, --mask-prob,
--seed), so that the probes measure it as its run did.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace

import torch
from tokenizers import Tokenizer

from ..checkpoint import DAMAGED, NOT_FINITE, CheckpointError, load_tokenizer, overflowing, torch_load
from ..config import BertConfig
from ..files import read_bytes
from ..fill_mask import load_masked_lm
from ..loss import IGNORE_INDEX
from ..masking import MaskingVocab, fixed_masking
from ..model import BertForMaskedLM, BertModel
from ..text import Blocks, pad_batch, plain_tokenizer, tokenize_lines
from .corpus import corpus_blocks, corpus_lines
from .baselines import SoftmaxRegression, best, fits
from .labelled import label_subsets, read_split, scores, split_files, truncate

AGREEMENT_PAIRS = (("is", "are"), ("was", "were"), ("has", "have"), ("does", "do"))  # (singular, plural)
PROBE_L2_GRID = (1e-4, 1e-3, 1e-2, 1e-1)  # the linear probe's penalty, picked on validation
PROBE_MAX_ITER = 1000  # L-BFGS iterations at most, so that the fit converges (bag-of-words' 100 cut it short)
POOLINGS = ("cls", "mean")
SOURCES = ("validation split", "labelled test sentences")  # the held-out texts of (b)


# ---- loading ----------------------------------------------------------------------------------


def load_mlm(path: str) -> BertForMaskedLM:
    """A pretrained checkpoint with its MLM head, in eval mode; one without that head is said so
    (fill_mask.load_masked_lm), with MiniLM's way in: its frozen features alone."""
    needs = "the masked-token and agreement probes need (for MiniLM's frozen features alone: --checkpoint minilm)"
    return load_masked_lm(path, needs, use_sdpa=True, unpad=True).eval()


def run_flags(checkpoint: str) -> dict | None:
    """What the probes must share with the train_mlm.py run that wrote `checkpoint`, read from the
    flags its training_state.pt saved: {"corpus": the prepared corpus's name, "seq_len",
    "mask_prob", "seed"}. None for a checkpoint without that file (a HuggingFace folder, MiniLM);
    a CheckpointError (one line) for one that does not read back."""
    path = os.path.join(checkpoint, "training_state.pt")
    if not os.path.isfile(path):
        return None
    try:
        state = torch_load(read_bytes(path))
        saved = state["args"]
        corpus = state.get("corpus_name") or " ".join(saved["corpus"])  # a run older than corpus_name: its --corpus
        return {"corpus": corpus, "seq_len": saved["seq_len"], "mask_prob": saved["mask_prob"], "seed": saved["seed"]}
    except Exception as e:  # cut short, not a dict, a flag missing: torch.load raises many kinds
        what = f"{type(e).__name__}: {str(e).split('. ')[0]}"  # torch's first sentence; the rest is advice
        raise CheckpointError(f"{path} does not read back as train_mlm.py's training state ({what}): {DAMAGED}") \
            from None


def random_twin(path: str, seed: int = 0) -> BertForMaskedLM:
    """The checkpoint's config with fresh weights, in eval mode: torch seeded with `seed`, then
    BertForMaskedLM(config), the two calls with which train_mlm.py starts a run, so with the run's
    --seed these are its weights at step 0 (an --objective mlm+nsp run draws BertForPreTraining,
    whose pooler and NSP head come first: its twin is a random init like its own, not the same
    numbers). The probes give it the checkpoint's tokenizer. torch's global generator is left as
    it was."""
    config = replace(BertConfig.load(path), use_sdpa=True, unpad=True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return BertForMaskedLM(config).eval()


def twin_not_finite(config) -> str:
    """Why a random init drawn from `config` (a BertConfig) computes numbers that are not finite:
    its weights are drawn with config.json's initializer_range, not read from the checkpoint."""
    return (f"the random init, drawn with config.json's initializer_range {config.initializer_range:g}, computes "
            "numbers that are not finite (they overflow float32); BERT's is 0.02: set that in config.json")


# ---- (a) masked-token loss against n-gram models ------------------------------------------------


@dataclass
class NGramCounts:
    """Counts of a training split's ordinary tokens. unigram (V,) c(w), zero at special ids;
    the bigram counts are sparse: pair_keys (P,) = v * V + w, sorted, with pair_counts (P,) c(v, w)."""

    unigram: torch.Tensor
    pair_keys: torch.Tensor
    pair_counts: torch.Tensor
    special: torch.Tensor  # (V,) bool: True at special ids ([MASK] included)

    @property
    def vocab_size(self) -> int:
        return len(self.unigram)


def count_ngrams(blocks: Blocks, vocab: MaskingVocab) -> NGramCounts:
    """Unigram and bigram counts of `blocks`: ordinary tokens only, bigrams of ADJACENT ordinary
    tokens (a pair never spans [CLS], [SEP] or padding)."""
    V = max(*vocab.special_ids, *vocab.ordinary_token_ids) + 1
    ids = blocks.input_ids                                                   # (N, T)
    ordinary = blocks.attention_mask.bool() & ~vocab.special_mask(ids)       # (N, T)
    unigram = torch.bincount(ids[ordinary], minlength=V)                     # (V,)
    both = ordinary[:, :-1] & ordinary[:, 1:]                                # (N, T-1) v and w ordinary
    keys = ids[:, :-1][both] * V + ids[:, 1:][both]                          # (pairs,)
    pair_keys, pair_counts = torch.unique(keys, return_counts=True)          # (P,), sorted
    special = torch.zeros(V, dtype=torch.bool)
    special[list(vocab.special_ids)] = True
    return NGramCounts(unigram, pair_keys, pair_counts, special)


def unigram_probs(counts: NGramCounts) -> torch.Tensor:
    """(V,) float64: (c(w) + 1) / (N + V') on the V' ordinary ids, 0 on the special ones."""
    ones = (~counts.special).double()                                        # (V,)
    return (counts.unigram.double() + ones) / (counts.unigram.sum().item() + ones.sum())


def followers(counts: NGramCounts, context: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For each context id v of `context` (K,), the range [lo, hi) of pair_keys that start with v
    (the keys are sorted, so v's pairs are contiguous): hi - lo = U(v), the distinct followers."""
    V = counts.vocab_size
    return torch.searchsorted(counts.pair_keys, context * V), torch.searchsorted(counts.pair_keys, (context + 1) * V)


def bigram_probs(counts: NGramCounts, context: torch.Tensor) -> torch.Tensor:
    """(K, V) float64: Witten-Bell p(w | v) for each context id v of `context` (K,) (module
    docstring). A context never followed by an ordinary token in training (a special id among
    them) gets the unigram row. Each row sums to 1."""
    V = counts.vocab_size
    uni = unigram_probs(counts)                                              # (V,)
    lo, hi = followers(counts, context)                                      # (K,), (K,)
    u_v = (hi - lo).double()                                                 # (K,) U(v)
    row = torch.repeat_interleave(torch.arange(len(context)), hi - lo)       # (S,) the row of each pair
    start = torch.cumsum(hi - lo, 0) - (hi - lo)                             # (K,) where each row's pairs start in S
    pair = (lo - start)[row] + torch.arange(len(row))                        # (S,) index into pair_keys
    c_vw = counts.pair_counts[pair].double()                                 # (S,) c(v, w)
    c_v = torch.zeros(len(context), dtype=torch.float64).index_add_(0, row, c_vw)  # (K,) c(v)
    rows = u_v[:, None] * uni[None, :]                                       # (K, V) U(v) p(w)
    rows.index_put_((row, counts.pair_keys[pair] % V), c_vw, accumulate=True)
    rows = rows / (c_v + u_v).clamp(min=1)[:, None]
    return torch.where((c_v > 0)[:, None], rows, uni[None, :])


def masked_targets(masked: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(targets (M,), their left neighbours (M,) as seen in the masked input) of every masked
    position; a target at position 0 (none: position 0 holds [CLS]) would get -1, no neighbour."""
    labels, ids = masked["labels"], masked["input_ids"]
    rows, cols = (labels != IGNORE_INDEX).nonzero(as_tuple=True)             # (M,), (M,)
    left = torch.where(cols > 0, ids[rows, (cols - 1).clamp(min=0)], -1)     # (M,)
    return labels[rows, cols], left


def ngram_scores(counts: NGramCounts, masked: dict[str, torch.Tensor], chunk: int = 512) -> dict:
    """Unigram and bigram cross-entropy (nats) and accuracy on the masked targets of `masked`,
    with the share of targets on which the bigram backed off to the unigram."""
    target, left = masked_targets(masked)                                    # (M,), (M,)
    uni = unigram_probs(counts)                                              # (V,)
    lo, hi = followers(counts, left.clamp(min=0))
    seen = (left >= 0) & (hi > lo)                                           # (M,) the bigram has a context
    p_bi = uni[target].clone()                                               # (M,) backed off unless seen
    best = torch.full_like(target, int(uni.argmax()))                        # (M,)
    contexts, inverse = torch.unique(left[seen], return_inverse=True)        # (K,), (M_seen,)
    where = seen.nonzero().squeeze(1)                                        # (M_seen,)
    for k in range(0, len(contexts), chunk):  # (chunk, V) rows at a time
        rows = bigram_probs(counts, contexts[k:k + chunk])
        mine = (inverse >= k) & (inverse < k + chunk)
        r, at = inverse[mine] - k, where[mine]
        p_bi[at] = rows[r, target[at]]
        best[at] = rows.argmax(dim=1)[r]
    return {"n": len(target),
            "unigram": {"loss": -uni[target].log().mean().item(), "acc": (target == uni.argmax()).double().mean().item()},
            "bigram": {"loss": -p_bi.log().mean().item(), "acc": (target == best).double().mean().item(),
                       "backoff": 1 - seen.double().mean().item()}}


@torch.no_grad()
def masked_token_scores(model: BertForMaskedLM, masked: dict[str, torch.Tensor], batch_size: int = 64,
                        device: str | torch.device = "cpu") -> dict:
    """The model's cross-entropy (nats, mean over every masked target) and accuracy (train_mlm.py's evaluate)."""
    model.eval().to(device)
    loss_sum, correct, n = 0.0, 0, 0
    for i in range(0, len(masked["labels"]), batch_size):
        b = {k: v[i:i + batch_size].to(device) for k, v in masked.items()}
        out = model(b["input_ids"], b["attention_mask"], b["token_type_ids"], labels=b["labels"], masked_only=True)
        targets = b["labels"][b["labels"] != IGNORE_INDEX]                   # (n,)
        loss_sum += out.loss.item() * len(targets)
        correct += int((out.logits.argmax(-1) == targets).sum())
        n += len(targets)
    if not math.isfinite(loss_sum):  # finite weights too large for float32
        raise CheckpointError(f"the model {NOT_FINITE}")
    return {"loss": loss_sum / n, "acc": correct / n, "n": n}


# ---- (b) agreement ------------------------------------------------------------------------------


@dataclass(frozen=True)
class AgreementItem:
    text: int      # which text
    position: int  # the token's position in that text (no [CLS] counted)
    original: int  # its id
    partner: int   # the other number's form
    pair: str      # "is/are", ...


def agreement_partners(tokenizer: Tokenizer, pairs=AGREEMENT_PAIRS) -> dict[int, tuple[int, str]]:
    """{id: (partner id, "singular/plural")}, both ways, for every pair whose two forms are whole
    tokens of the vocabulary."""
    vocab = tokenizer.get_vocab()
    out = {}
    for a, b in pairs:
        if a in vocab and b in vocab:
            out[vocab[a]], out[vocab[b]] = (vocab[b], f"{a}/{b}"), (vocab[a], f"{a}/{b}")
    return out


def continuation_ids(tokenizer: Tokenizer) -> set[int]:
    """The ids of word-inner pieces (WordPiece's `##...`): a token followed by one is not a whole word."""
    prefix = getattr(tokenizer.model, "continuing_subword_prefix", "##")
    return {i for t, i in tokenizer.get_vocab().items() if t.startswith(prefix)}


def find_agreement_items(texts: list[list[int]], partners: dict[int, tuple[int, str]],
                         continuation: set[int]) -> list[AgreementItem]:
    """Every whole-word occurrence of a form in `partners` (a form id not followed by a word-inner
    piece: `is ##land` is no `is`), in text order."""
    items = []
    for t, ids in enumerate(texts):
        for i, tok in enumerate(ids):
            if tok in partners and (i + 1 == len(ids) or ids[i + 1] not in continuation):
                items.append(AgreementItem(t, i, tok, *partners[tok]))
    return items


def agreement_input(ids: list[int], position: int, cls_id: int, sep_id: int, mask_id: int,
                    max_length: int) -> tuple[list[int], int]:
    """[CLS] window [SEP], the token at `position` replaced by [MASK]: the window holds at most
    max_length - 2 tokens of the text, centred on the item where the text allows. Returns
    (ids, the index of [MASK] in them)."""
    room = max_length - 2
    start = max(0, min(position - room // 2, len(ids) - room))
    window = ids[start:start + room]
    window[position - start] = mask_id
    return [cls_id, *window, sep_id], position - start + 1


@torch.no_grad()
def agreement_margins(model: BertForMaskedLM, texts: list[list[int]], items: list[AgreementItem],
                      tokenizer: Tokenizer, max_length: int, batch_size: int = 64,
                      device: str | torch.device = "cpu") -> torch.Tensor:
    """(N,) logit(original) - logit(partner) at each item's [MASK] (agreement_input), item order;
    the inputs run in batches of similar length, padded."""
    tid = tokenizer.token_to_id
    inputs = [agreement_input(texts[it.text], it.position, tid("[CLS]"), tid("[SEP]"), tid("[MASK]"), max_length)
              for it in items]
    order = sorted(range(len(items)), key=lambda i: len(inputs[i][0]))  # batches of similar length
    model.eval().to(device)
    margins = torch.zeros(len(items))
    for i in range(0, len(order), batch_size):
        chunk = order[i:i + batch_size]
        ids, attn = pad_batch([inputs[j][0] for j in chunk], tid("[PAD]"))  # (B, T)
        rows = torch.arange(len(chunk))                                      # (B,)
        original = torch.tensor([items[j].original for j in chunk])          # (B,)
        partner = torch.tensor([items[j].partner for j in chunk])            # (B,)
        labels = torch.full_like(ids, IGNORE_INDEX)
        labels[rows, torch.tensor([inputs[j][1] for j in chunk])] = original  # one target per row, at [MASK]
        logits = model(ids.to(device), attn.to(device), labels=labels.to(device), masked_only=True).logits.cpu()  # (B, V)
        margins[chunk] = logits[rows, original] - logits[rows, partner]
    return margins


def more_frequent_form(items: list[AgreementItem], counts: NGramCounts) -> list[bool]:
    """Per item: is the original the form of its pair more frequent in the training split (the
    smaller id on an exact tie)? That is, is the baseline that always answers that form right?"""
    def frequent(it):
        a, b = sorted((it.original, it.partner))
        return a if counts.unigram[a] >= counts.unigram[b] else b
    return [frequent(it) == it.original for it in items]


def by_pair(items: list[AgreementItem], right: list[bool]) -> dict:
    """{"acc", "balanced", "right", "n", "by_pair": {"is/are": {the same}, ...}} of per-item results
    (None with no item). balanced: the mean, over the forms present, of the accuracy on the items
    of that form; an answer that ignores the context (always `is`, never `are`) scores 0.5 on it
    whatever the forms' frequencies, where plain accuracy rewards knowing the commoner form."""
    groups: dict[str, list[int]] = {}
    for k, it in enumerate(items):
        groups.setdefault(it.pair, []).append(k)
    return {**tally(items, right, range(len(items))),
            "by_pair": {p: tally(items, right, ks) for p, ks in sorted(groups.items())}}


def tally(items: list[AgreementItem], right: list[bool], which) -> dict:
    """Accuracy, balanced accuracy and counts over the items numbered `which`."""
    forms: dict[int, list[bool]] = {}
    for k in which:
        forms.setdefault(items[k].original, []).append(right[k])
    n, ok = sum(len(v) for v in forms.values()), sum(sum(v) for v in forms.values())
    balanced = sum(sum(v) / len(v) for v in forms.values()) / len(forms) if n else None
    return {"acc": ok / n if n else None, "balanced": balanced, "right": ok, "n": n}


# ---- (c) frozen features --------------------------------------------------------------------------


def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """(B, T, C), (B, T) -> (B, C): the mean of the hidden states at the real positions (mask 1)."""
    m = attention_mask[..., None].to(hidden.dtype)                           # (B, T, 1)
    return (hidden * m).sum(dim=1) / m.sum(dim=1)                            # (B, C)


def encode_texts(tokenizer: Tokenizer, texts: list[str], max_length: int) -> list[list[int]]:
    """[CLS] ... [SEP] ids of each text, cut to max_length (the final [SEP] kept)."""
    return [truncate(e.ids, max_length) for e in plain_tokenizer(tokenizer).encode_batch(texts)]


@torch.no_grad()
def sentence_features(encoder: BertModel, seqs: list[list[int]], pad_id: int, batch_size: int = 64,
                      device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
    """{"cls": (N, C), "mean": (N, C)} final hidden states of the frozen encoder (eval mode).
    The texts run in batches of similar length (less padding), then go back to their order."""
    encoder.eval().to(device)
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    cls, mean = [], []
    for i in range(0, len(order), batch_size):
        ids, attn = pad_batch([seqs[j] for j in order[i:i + batch_size]], pad_id)  # (B, T)
        h = encoder(ids.to(device), attn.to(device)).last_hidden_state.cpu()      # (B, T, C)
        cls.append(h[:, 0])
        mean.append(mean_pool(h, attn))
    if any(overflowing(torch.cat(f)) for f in (cls, mean)):  # finite weights too large for float32
        raise CheckpointError(f"the model {NOT_FINITE}")
    back = torch.empty(len(order), dtype=torch.long)
    back[torch.tensor(order)] = torch.arange(len(order))
    return {"cls": torch.cat(cls)[back], "mean": torch.cat(mean)[back]}


def linear_probe(x: dict[str, torch.Tensor], y: dict[str, torch.Tensor], num_labels: int,
                 l2_grid: tuple[float, ...] = PROBE_L2_GRID, max_iter: int = PROBE_MAX_ITER) -> dict:
    """Softmax regression on features x["train"] (N, F) and labels y["train"] (N,), standardised
    with the training rows' mean and standard deviation; one fit per penalty, the best accuracy on
    x["valid"] picks it (the larger on a tie), then x["test"] is scored once."""
    mu, sd = x["train"].mean(dim=0), x["train"].std(dim=0).clamp(min=1e-6)  # (F,)
    z = {k: (v - mu) / sd for k, v in x.items()}
    grid = list(fits(lambda: SoftmaxRegression(z["train"].shape[1], num_labels), lambda m: (z["train"], y["train"]),
                     lambda m: (m.classify(z["valid"]) == y["valid"]).double().mean().item(), l2_grid, max_iter))
    chosen = best(grid)
    test = scores(chosen.model.classify(z["test"]), y["test"], num_labels)
    return {"l2": chosen.l2, "valid_acc": chosen.valid_acc, "grid_valid_acc": {str(f.l2): f.valid_acc for f in grid},
            "test_acc": test["acc"], "test_macro_f1": test["macro_f1"], "iterations": chosen.iterations,
            "grid_iterations": {str(f.l2): f.iterations for f in grid},
            "max_iter": max_iter, "n_train": len(y["train"])}


def labelled_splits(folder: str) -> tuple[dict[str, list[str]], dict[str, torch.Tensor], list[str]]:
    """The texts and label ids (labels numbered in sorted order) of a labelled folder's three splits."""
    rows = {s: read_split(p) for s, p in split_files(folder).items()}
    names = sorted({label for _, label in rows["train"]})
    ids = {n: i for i, n in enumerate(names)}
    return ({s: [t for t, _ in r] for s, r in rows.items()},
            {s: torch.tensor([ids[y] for _, y in r]) for s, r in rows.items()}, names)


# ---- the held-out text, prepared once per tokenizer ---------------------------------------------


@dataclass
class ProbeText:
    """The held-out text of (a) and (b), prepared for one tokenizer: the training split's n-gram
    counts, the masked validation split, and the agreement texts with their items (the
    validation split's lines; the labelled test sentences)."""

    tokenizer: Tokenizer
    counts: NGramCounts
    masked: dict[str, torch.Tensor]
    agreement: dict[str, tuple[list[list[int]], list[AgreementItem]]]
    seq_len: int

    @classmethod
    def build(cls, tokenizer: Tokenizer, corpus_folder: str, labelled_folder: str, seq_len: int = 128,
              mask_prob: float = 0.3) -> "ProbeText":
        """seq_len and mask_prob: train_mlm.py's --seq-len and --mask-prob (its defaults here)."""
        vocab = MaskingVocab.from_tokenizer(tokenizer)
        counts = count_ngrams(corpus_blocks(corpus_folder, tokenizer, "train", seq_len), vocab)
        masked = fixed_masking(corpus_blocks(corpus_folder, tokenizer, "valid", seq_len), vocab, mask_prob)
        partners, inner = agreement_partners(tokenizer), continuation_ids(tokenizer)
        agreement = {}
        texts = (corpus_lines(corpus_folder, "valid"), [t for t, _ in read_split(split_files(labelled_folder)["test"])])
        for source, lines in zip(SOURCES, texts, strict=True):
            ids, starts = tokenize_lines(tokenizer, lines)
            ends = [*starts[1:].tolist(), len(ids)]
            line_ids = [ids[s:e].tolist() for s, e in zip(starts.tolist(), ends, strict=True)]
            agreement[source] = (line_ids, find_agreement_items(line_ids, partners, inner))
        return cls(tokenizer, counts, masked, agreement, seq_len)

    def baselines(self) -> dict:
        """The n-gram models on the masked targets, the more frequent form on the agreement items."""
        return {"ngram": ngram_scores(self.counts, self.masked),
                "agreement": self.agreement_results({s: more_frequent_form(items, self.counts)
                                                     for s, (_, items) in self.agreement.items()})}

    def mlm_probes(self, model: BertForMaskedLM, device="cpu") -> dict:
        """(a) and (b) for a model with an MLM head."""
        right = {s: (agreement_margins(model, texts, items, self.tokenizer, self.seq_len, device=device) > 0).tolist()
                 for s, (texts, items) in self.agreement.items()}
        return {"masked": masked_token_scores(model, self.masked, device=device), "agreement": self.agreement_results(right)}

    def agreement_results(self, right: dict[str, list[bool]]) -> dict:
        """by_pair of each source's per-item results, and of all sources together ("pooled")."""
        out = {s: by_pair(self.agreement[s][1], r) for s, r in right.items()}
        out["pooled"] = by_pair([it for s in right for it in self.agreement[s][1]], [ok for s in right for ok in right[s]])
        return out


def frozen_probes(encoder: BertModel, tokenizer: Tokenizer, texts: dict[str, list[str]], labels: dict[str, torch.Tensor],
                  subsets: dict[str, list[int]], poolings=POOLINGS, max_length: int = 128, device="cpu") -> dict:
    """(c): {pooling: {budget: linear_probe result}}. `subsets` names the training rows of each label
    budget (e.g. {"1000": [...], "all": [...]}); the features of every row used are computed once."""
    pad_id = tokenizer.token_to_id("[PAD]") or 0
    num_labels = int(labels["train"].max()) + 1
    used = sorted({i for rows in subsets.values() for i in rows})   # the training rows any budget reads
    where = {i: k for k, i in enumerate(used)}
    rows_of = {"train": used, "valid": range(len(texts["valid"])), "test": range(len(texts["test"]))}
    feats = {s: sentence_features(encoder, encode_texts(tokenizer, [texts[s][i] for i in rows], max_length), pad_id,
                                  device=device) for s, rows in rows_of.items()}
    out = {}
    for pooling in poolings:
        out[pooling] = {}
        for name, rows in subsets.items():
            x = {"train": feats["train"][pooling][[where[i] for i in rows]], "valid": feats["valid"][pooling],
                 "test": feats["test"][pooling]}
            out[pooling][name] = linear_probe(x, {**labels, "train": labels["train"][rows]}, num_labels)
    return out


# ---- the one-line summary --------------------------------------------------------------------------

SUMMARY_FILE = "probes.json"  # `summary`'s dict in a train_mlm.py run folder: plot_metrics.py draws its n-gram levels


def summary(path: str, corpus_folder: str, labelled_folder: str, budget: int | None = 1000, seed: int = 0,
            seq_len: int = 128, mask_prob: float = 0.3, device="cpu") -> dict:
    """(a), (b) and (c) (mean-pooled, `budget` labelled training sentences: the seeded subset of
    label_subsets; None = all) for the checkpoint in `path` and its random-init twin, with the
    baselines: unigram, bigram, the more frequent form, the majority class."""
    tokenizer = load_tokenizer(path)
    text = ProbeText.build(tokenizer, corpus_folder, labelled_folder, seq_len, mask_prob)
    texts, labels, _ = labelled_splits(labelled_folder)
    (rows,) = label_subsets(len(labels["train"]), [budget])
    out = {"checkpoint": path, "budget": len(rows), "baselines": text.baselines()}
    majority = int(labels["train"][rows].bincount().argmax())
    out["baselines"]["majority_class_test_acc"] = (labels["test"] == majority).double().mean().item()
    for name, model in (("model", load_mlm(path)), ("random", random_twin(path, seed))):
        try:
            out[name] = text.mlm_probes(model, device)
            out[name]["frozen"] = frozen_probes(model.bert, tokenizer, texts, labels, {"budget": rows}, ("mean",),
                                                seq_len, device)["mean"]["budget"]
        except CheckpointError:
            if name == "model":
                raise
            raise CheckpointError(twin_not_finite(model.config)) from None
    return out


def summary_line(s: dict) -> str:
    """One line: the checkpoint, then its random init, then the baselines, probe by probe."""
    m, r, b = s["model"], s["random"], s["baselines"]
    ng = b["ngram"]
    agree = [x["agreement"]["pooled"] for x in (m, r, b)]

    def acc(x):
        return "-" if x is None else f"{x:.3f}"

    return (f"probes on held-out text, checkpoint / random init / baselines: masked-token loss "
            f"{m['masked']['loss']:.3f} / {r['masked']['loss']:.3f} / unigram {ng['unigram']['loss']:.3f}, "
            f"bigram {ng['bigram']['loss']:.3f} nats; agreement (is/are ..., {agree[0]['n']:,} items) "
            f"{acc(agree[0]['acc'])} / {acc(agree[1]['acc'])} / more frequent form {acc(agree[2]['acc'])}, balanced "
            f"over the forms {acc(agree[0]['balanced'])} / {acc(agree[1]['balanced'])} / {acc(agree[2]['balanced'])}; "
            f"logistic regression on frozen mean-pooled features, "
            f"{s['budget']:,} labels, sentiment test accuracy "
            f"{m['frozen']['test_acc']:.3f} / {r['frozen']['test_acc']:.3f} / majority class "
            f"{b['majority_class_test_acc']:.3f}")
