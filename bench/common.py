"""What the benchmarks share: real batches of English text, the FLOPs a training step needs, this
machine's matmul throughput, and a transformers twin of a minibert model. Run the benchmarks as
modules from the repository's root, e.g. `python -m bench.pretrain_step`."""

from __future__ import annotations

import statistics
import time

import torch
import transformers

from data.prepare import fetch_minilm, prepare
from minibert import IGNORE_INDEX, BertConfig, BertForMaskedLM, MaskingVocab, load_tokenizer, mask_batch
from minibert.checkpoint import to_hf_name
from minibert.run.corpus import corpus_lines
from minibert.text import pack_blocks, tokenize_lines


def padded_inputs(tok, n_rows: int, seq_len: int, seed: int = 0) -> torch.Tensor:
    """(n_rows, seq_len) ids: validation sentences in a seeded order, cut and padded to seq_len."""
    lines = corpus_lines(prepare("en"), "valid")
    order = torch.randperm(len(lines), generator=torch.Generator().manual_seed(seed)).tolist()
    tok = tok.__class__.from_str(tok.to_str())
    tok.enable_truncation(seq_len)
    tok.enable_padding(pad_id=0, pad_token="[PAD]", length=seq_len)
    return torch.tensor([e.ids for e in tok.encode_batch([lines[i] for i in order[:n_rows]])])


def packed_inputs(tok, n_rows: int, seq_len: int) -> torch.Tensor:
    """(n_rows, seq_len) ids: training text packed into full [CLS] A [SEP] B [SEP] blocks."""
    lines = corpus_lines(prepare("en"), "train")
    ids, starts = tokenize_lines(tok, lines[:n_rows * seq_len // 10])  # ~25 tokens a line: plenty
    blocks = pack_blocks(ids, starts, seq_len, tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]"), 0)
    if len(blocks) < n_rows:
        raise SystemExit(f"only {len(blocks)} packed blocks, {n_rows} wanted")
    return blocks.input_ids[:n_rows].long()


def real_batches(n_batches: int, batch_size: int, seq_len: int, seed: int = 0, packed: bool = False):
    """[(input_ids, attention_mask, labels)] of real English text, each (batch_size, seq_len), masked once."""
    tok = load_tokenizer(fetch_minilm())
    n = n_batches * batch_size
    ids = packed_inputs(tok, n, seq_len) if packed else padded_inputs(tok, n, seq_len, seed)
    vocab = MaskingVocab.from_tokenizer(tok)
    g = torch.Generator().manual_seed(seed)
    out = []
    for b in range(n_batches):
        x = ids[b * batch_size:(b + 1) * batch_size]
        x, y, att, _ = mask_batch(x, (x != 0).long(), vocab.special_mask(x), vocab.mask_id,
                                  vocab.ordinary_token_ids, g)
        out.append((x, att, y))
    return out


def useful_flops(config: BertConfig, attention_mask: torch.Tensor, labels: torch.Tensor) -> float:
    """FLOPs one training step needs: 3x the forward (backward = 2x forward), counting a
    multiply-add as 2 and only work on real tokens:
      per layer and real token: Q, K, V, output projections 4 * 2C^2, feed-forward 2 * 2CI;
      per layer and sequence of n real tokens: scores Q K^T and weights x V, 2 * 2 n^2 C;
      per masked position: the MLM transform 2C^2 and the vocabulary projection 2CV.
    Embedding lookups, LayerNorm, GELU, softmax and the optimizer are left out (memory-bound)."""
    C, I, V, layers = config.hidden_size, config.intermediate_size, config.vocab_size, config.num_hidden_layers
    lengths = attention_mask.sum(dim=1).double()  # (B,)
    n_real, n_masked = float(lengths.sum()), float((labels != IGNORE_INDEX).sum())
    encoder = layers * (n_real * (8 * C * C + 4 * C * I) + float((4 * lengths ** 2 * C).sum()))
    head = n_masked * (2 * C * C + 2 * C * V)
    return 3 * (encoder + head)


def matmul_flops_per_s(m: int, k: int, n: int, dtype=torch.float32, repeats: int = 20) -> float:
    """This machine's measured matmul throughput: median of `repeats` (m, k) @ (k, n) products."""
    a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
    for _ in range(3):
        a @ b
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t)
    return 2 * m * k * n / statistics.median(times)


def hf_twin(ours: BertForMaskedLM, config: BertConfig):
    """transformers' BertForMaskedLM with the same config and a copy of the same weights."""
    hf = transformers.BertForMaskedLM(transformers.BertConfig(
        vocab_size=config.vocab_size, hidden_size=config.hidden_size, num_hidden_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads, intermediate_size=config.intermediate_size,
        attn_implementation="sdpa"))
    hf_params = dict(hf.named_parameters())
    with torch.no_grad():
        for name, param in ours.named_parameters():
            hf_params[to_hf_name(name)].copy_(param)
    return hf
