"""One MLM pretraining step (forward, backward, AdamW), minibert vs transformers, side by side.

    python bench/pretrain_step.py --preset bert-mini
    python bench/pretrain_step.py --preset bert-medium

Both models are built from the same config and hold the same weights; both get the same
batches: real sentences of the English pretraining text, tokenised with the uncased BERT
vocabulary (30,522 words), cut at --seq-len and padded to it, masked once with mask_batch.
minibert runs its fast settings (SDPA attention, the vocabulary projection at the masked
positions only); transformers runs its defaults (SDPA, the dense MLM head). Tokens/s counts
real (non-padding) tokens. Prints a short table and one JSON line. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
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


def real_batches(n_batches: int, batch_size: int, seq_len: int, seed: int = 0):
    """Padded batches of real text (the validation lines of the English corpus), masked once."""
    tok = load_tokenizer(fetch_minilm())
    tok.enable_truncation(seq_len)
    tok.enable_padding(pad_id=0, pad_token="[PAD]", length=seq_len)
    with open(os.path.join(prepare("en"), "pretrain", "valid.txt"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    vocab = MaskingVocab.from_tokenizer(tok)
    g = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(lines), generator=g).tolist()
    out = []
    for b in range(n_batches):
        enc = tok.encode_batch([lines[i] for i in order[b * batch_size:(b + 1) * batch_size]])
        ids = torch.tensor([e.ids for e in enc])
        att = torch.tensor([e.attention_mask for e in enc])
        x, y, att, _ = mask_batch(ids, att, vocab.special_mask(ids), vocab.mask_id, vocab.ordinary_token_ids, g)
        out.append((x, att, y))
    return out


def time_steps(step, batches, warmup: int) -> list[float]:
    times = []
    for i, batch in enumerate(batches):
        t = time.perf_counter()
        step(*batch)
        if i >= warmup:
            times.append(time.perf_counter() - t)
    return times


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="bert-mini", help="bert-mini (default) or another preset")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--steps", type=int, default=12, help="timed steps per implementation (default: 12)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (default: 3)")
    args = p.parse_args(argv)
    torch.manual_seed(0)
    config = BertConfig.from_preset(args.preset, use_sdpa=True, unpad=True)
    ours = BertForMaskedLM(config)
    hf = transformers.BertForMaskedLM(transformers.BertConfig(
        vocab_size=config.vocab_size, hidden_size=config.hidden_size, num_hidden_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads, intermediate_size=config.intermediate_size,
        attn_implementation="sdpa"))
    hf_params = dict(hf.named_parameters())
    with torch.no_grad():
        for name, param in ours.named_parameters():
            hf_params[to_hf_name(name)].copy_(param)
    batches = real_batches(args.warmup + args.steps, args.batch_size, args.seq_len)
    tokens = statistics.mean(int(att.sum()) for _, att, _ in batches)

    def stepper(model, forward):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)

        def step(x, att, y):
            forward(model, x, att, y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return step

    results = {}
    for name, model, forward in (
            ("minibert", ours, lambda m, x, a, y: m(x, a, labels=y, masked_only=True).loss),
            ("transformers", hf, lambda m, x, a, y: m(input_ids=x, attention_mask=a, labels=y).loss)):
        model.train()
        times = time_steps(stepper(model, forward), batches, args.warmup)
        results[name] = {"median_s": statistics.median(times), "tokens_per_s": tokens / statistics.median(times)}
    ratio = results["minibert"]["tokens_per_s"] / results["transformers"]["tokens_per_s"]
    print(f"pretraining step, {args.preset} ({config.num_hidden_layers}/{config.hidden_size}/"
          f"{config.num_attention_heads}, vocab {config.vocab_size}), batch {args.batch_size} x {args.seq_len}, "
          f"{tokens:.0f} real tokens per batch; torch {torch.__version__}, {torch.get_num_threads()} threads")
    for name, r in results.items():
        print(f"  {name:13s} {r['median_s'] * 1000:8.1f} ms/step  {r['tokens_per_s']:9,.0f} tokens/s")
    print(f"  ratio minibert / transformers: {ratio:.2f}x")
    print(json.dumps({"bench": "pretrain_step", "preset": args.preset, "batch_size": args.batch_size,
                      "seq_len": args.seq_len, "real_tokens_per_batch": tokens, **{
                          f"{k}_{m}": v for k, r in results.items() for m, v in r.items()},
                      "ratio": ratio, "torch": torch.__version__, "threads": torch.get_num_threads(),
                      "transformers": transformers.__version__}))


if __name__ == "__main__":
    main()
