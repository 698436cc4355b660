"""Inference (sequences/s) of the MiniLM configuration, minibert vs transformers, side by side.

    python -m bench.inference

The real MiniLM weights in both implementations (eval mode, no grad, SDPA attention in both),
batch 32 of real sentences of variable length padded to 128 (~27% real tokens). minibert runs
with unpad=True: the padding is removed before the encoder. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import transformers

from bench.common import real_batches
from data.prepare import fetch_minilm
from minibert import BertModel


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=12, help="timed batches per implementation (default: 12)")
    p.add_argument("--warmup", type=int, default=3, help="untimed batches first (default: 3)")
    args = p.parse_args(argv)
    steps, warmup = args.steps, args.warmup
    minilm = fetch_minilm()
    ours = BertModel.from_pretrained(minilm, use_sdpa=True, unpad=True).eval()
    hf = transformers.BertModel.from_pretrained(minilm, attn_implementation="sdpa").eval()
    batches = [(x, att) for x, att, _ in real_batches(warmup + steps, 32, 128)]
    results = {}
    for name, fn in (("minibert", lambda x, a: ours(x, a)),
                     ("transformers", lambda x, a: hf(input_ids=x, attention_mask=a))):
        times = []
        with torch.no_grad():
            for i, (x, att) in enumerate(batches):
                t = time.perf_counter()
                fn(x, att)
                if i >= warmup:
                    times.append(time.perf_counter() - t)
        results[name] = 32 / statistics.median(times)
    x, att = batches[0]
    with torch.no_grad():  # same numbers at every real position
        real = att.bool()
        diff = (ours(x, att).last_hidden_state[real] - hf(input_ids=x, attention_mask=att).last_hidden_state[real])
    max_diff = diff.abs().max().item()
    ratio = results["minibert"] / results["transformers"]
    print(f"inference, MiniLM (6/384/12), batch 32 x 128 padded, real sentences; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads")
    for name, sps in results.items():
        print(f"  {name:13s} {sps:8.1f} sequences/s")
    print(f"  ratio minibert / transformers: {ratio:.2f}x; max |difference| of the hidden states at real "
          f"positions: {max_diff:.1e}")
    print(json.dumps({"bench": "inference", **{f"{k}_sequences_per_s": v for k, v in results.items()},
                      "ratio": ratio, "max_abs_diff": max_diff, "torch": torch.__version__, "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
