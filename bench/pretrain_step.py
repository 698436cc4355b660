"""One MLM pretraining step (forward, backward, AdamW), minibert vs transformers, side by side.

    python bench/pretrain_step.py --preset bert-mini
    python bench/pretrain_step.py --preset bert-medium
    python bench/pretrain_step.py --preset bert-medium --input packed     # train_mlm.py's input
    python bench/pretrain_step.py --preset bert-mini --dtype bf16         # autocast, both sides

Both models are built from the same config and hold the same weights; both get the same
batches of real text, tokenised with the uncased BERT vocabulary (30,522 words) and masked once
with mask_batch: `--input padded` (default) takes sentences cut at --seq-len and padded to it
(~27% real tokens), `--input packed` full 128-token blocks as train_mlm.py makes them. Both use
the same optimizer, PyTorch's fused AdamW. minibert runs its fast settings (SDPA attention,
padding removed before the encoder, the vocabulary projection at the masked positions only);
transformers runs its defaults (SDPA attention, the dense MLM head).

Tokens/s counts real (non-padding) tokens. MFU is the FLOPs the step really needs (below)
divided by the step time and by this machine's matmul throughput in the step's dtype (fp32, or
bf16 with --dtype bf16), measured in the same run on a matrix product of the model's own
feed-forward shape. Prints a short table and one
JSON line. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import transformers  # noqa: E402

from data.prepare import fetch_minilm, prepare  # noqa: E402
from minibert import BertConfig, BertForMaskedLM, MaskingVocab, load_tokenizer, mask_batch  # noqa: E402
from minibert.checkpoint import to_hf_name  # noqa: E402
from minibert.data import pack_blocks, tokenize_lines  # noqa: E402


def english_lines(split: str) -> list[str]:
    with open(os.path.join(prepare("en"), "pretrain", f"{split}.txt"), encoding="utf-8") as f:
        return f.read().splitlines()


def padded_inputs(tok, n_rows: int, seq_len: int, seed: int = 0) -> torch.Tensor:
    """(n_rows, seq_len) ids: validation sentences in a seeded order, cut and padded to seq_len."""
    lines = english_lines("valid")
    order = torch.randperm(len(lines), generator=torch.Generator().manual_seed(seed)).tolist()
    tok = tok.__class__.from_str(tok.to_str())
    tok.enable_truncation(seq_len)
    tok.enable_padding(pad_id=0, pad_token="[PAD]", length=seq_len)
    return torch.tensor([e.ids for e in tok.encode_batch([lines[i] for i in order[:n_rows]])])


def packed_inputs(tok, n_rows: int, seq_len: int) -> torch.Tensor:
    """(n_rows, seq_len) ids: training text packed into full [CLS] A [SEP] B [SEP] blocks."""
    lines = english_lines("train")
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
      per layer and sequence of L real tokens: scores Q K^T and weights x V, 2 * 2 L^2 C;
      per masked position: the MLM transform 2C^2 and the vocabulary projection 2CV.
    Embedding lookups, LayerNorm, GELU, softmax and the optimizer are left out (memory-bound)."""
    C, I, V, L = config.hidden_size, config.intermediate_size, config.vocab_size, config.num_hidden_layers
    lengths = attention_mask.sum(dim=1).double()  # (B,)
    n_real, n_masked = float(lengths.sum()), float((labels != -100).sum())
    encoder = L * (n_real * (8 * C * C + 4 * C * I) + float((4 * lengths ** 2 * C).sum()))
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


def adamw_step_ms(model: torch.nn.Module, repeats: int = 8) -> dict[str, float]:
    """Median ms of one AdamW update of all of `model`'s parameters (random gradients), with
    PyTorch's foreach and fused kernels: the optimizer's share of a step."""
    params = [p.detach().clone().requires_grad_(True) for p in model.parameters()]
    for p in params:
        p.grad = torch.randn_like(p)
    out = {}
    for kernel in ("foreach", "fused"):
        opt = torch.optim.AdamW(params, lr=1e-4, **{kernel: True})
        opt.step()  # the first step allocates the optimizer state
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            opt.step()
            times.append(time.perf_counter() - t)
        out[kernel] = 1000 * statistics.median(times)
    return out


def time_steps(step, batches, warmup: int) -> list[float]:
    times = []
    for i, batch in enumerate(batches):
        t = time.perf_counter()
        step(*batch)
        if i >= warmup:
            times.append(time.perf_counter() - t)
    return times


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


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="bert-mini", help="bert-mini (default) or another preset")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--input", choices=["padded", "packed"], default="padded",
                   help="padded sentences (default) or packed blocks")
    p.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32", help="autocast dtype, both sides")
    p.add_argument("--compile", action="store_true", help="torch.compile both models first")
    p.add_argument("--steps", type=int, default=12, help="timed steps per implementation (default: 12)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (default: 3)")
    args = p.parse_args(argv)
    torch.manual_seed(0)
    config = BertConfig.from_preset(args.preset, use_sdpa=True, unpad=True)
    ours = BertForMaskedLM(config)
    hf = hf_twin(ours, config)
    batches = real_batches(args.warmup + args.steps, args.batch_size, args.seq_len, packed=args.input == "packed")
    timed = batches[args.warmup:]
    tokens = statistics.mean(int(att.sum()) for _, att, _ in timed)
    flops = statistics.mean(useful_flops(config, att, y) for _, att, y in timed)

    def autocast():
        return torch.autocast("cpu", dtype=torch.bfloat16) if args.dtype == "bf16" else contextlib.nullcontext()

    def stepper(model, forward):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
        run = torch.compile(model) if args.compile else model

        def step(x, att, y):
            with autocast():
                loss = forward(run, x, att, y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return step

    results = {}
    for name, model, forward in (
            ("minibert", ours, lambda m, x, a, y: m(x, a, labels=y, masked_only=True).loss),
            ("transformers", hf, lambda m, x, a, y: m(input_ids=x, attention_mask=a, labels=y).loss)):
        model.train()
        times = time_steps(stepper(model, forward), batches, args.warmup)
        median = statistics.median(times)
        results[name] = {"median_s": median, "tokens_per_s": tokens / median}
    matmul_dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    peak = matmul_flops_per_s(args.batch_size * args.seq_len, config.hidden_size, config.intermediate_size,
                              matmul_dtype)
    for r in results.values():
        r["mfu"] = flops / r["median_s"] / peak
    adamw = adamw_step_ms(ours)
    ratio = results["minibert"]["tokens_per_s"] / results["transformers"]["tokens_per_s"]
    print(f"pretraining step, {args.preset} ({config.num_hidden_layers}/{config.hidden_size}/"
          f"{config.num_attention_heads}, vocab {config.vocab_size}), batch {args.batch_size} x {args.seq_len} "
          f"{args.input}, {tokens:.0f} real tokens per batch, {args.dtype}{', compiled' if args.compile else ''}; "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"  useful work {flops / 1e9:.1f} GFLOP/step; measured {args.dtype} matmul throughput {peak / 1e9:.0f} GFLOP/s")
    for name, r in results.items():
        print(f"  {name:13s} {r['median_s'] * 1000:8.1f} ms/step  {r['tokens_per_s']:9,.0f} tokens/s  "
              f"MFU {r['mfu']:.0%}")
    print(f"  ratio minibert / transformers: {ratio:.2f}x")
    print(f"  AdamW update alone: foreach {adamw['foreach']:.1f} ms, fused {adamw['fused']:.1f} ms (both sides use fused)")
    print(json.dumps({"bench": "pretrain_step", "adamw_ms": adamw, "preset": args.preset, "batch_size": args.batch_size,
                      "seq_len": args.seq_len, "input": args.input, "dtype": args.dtype, "compile": args.compile,
                      "real_tokens_per_batch": tokens, "useful_flops_per_step": flops,
                      "matmul_flops_per_s": peak, **{
                          f"{k}_{m}": v for k, r in results.items() for m, v in r.items()},
                      "ratio": ratio, "torch": torch.__version__, "threads": torch.get_num_threads(),
                      "transformers": transformers.__version__}))


if __name__ == "__main__":
    main()
