"""The test suite under other CPU kernel paths: which tests pass, and how much each tolerance is used.

    python -m bench.kernel_paths --out runs/kernel-paths                  # every variant below, one after another
    python -m bench.kernel_paths --out runs/kernel-paths --only native aten-avx2 -- tests/test_model_math.py

CI runs the suite on one CPU, but a float32 result depends on the order a kernel sums in, and that
order changes with the CPU's vector width (AVX-512, AVX2, none), with the BLAS library's code path
and with the number of threads. This command runs pytest once per variant, each in its own process
with the environment below, and writes a table: tests failed, how many checked comparisons
(`assert_close` in tests/conftest.py, which logs each one's largest difference when
MINIBERT_TOLERANCE_LOG is set) found another largest difference than in the native run, the
largest such change, and the largest share of its tolerance any comparison used (1.0 = at the
tolerance). Not a benchmark of speed: the times only say how long
each run took. docs/testing.md explains the tolerances.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from minibert.files import parse_json, write_file

VARIANTS = {  # name: environment; each changes one thing from the native run
    "native": {},
    "aten-default": {"ATEN_CPU_CAPABILITY": "default"},  # torch's own kernels without vector instructions
    "aten-avx2": {"ATEN_CPU_CAPABILITY": "avx2"},
    "blas-avx2": {"ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},  # matmuls at AVX2
    "1-thread": {"OMP_NUM_THREADS": "1"},
    "4-threads": {"OMP_NUM_THREADS": "4", "OMP_WAIT_POLICY": "PASSIVE"},  # more threads than cores: no spinning
}


def run_variant(name: str, out: Path, pytest_args: list[str]) -> dict:
    """pytest in a fresh process with the variant's environment; its junit file and comparison log."""
    log, junit = out / f"{name}.jsonl", out / f"{name}.xml"
    log.unlink(missing_ok=True)
    env = {**os.environ, **VARIANTS[name], "MINIBERT_TOLERANCE_LOG": str(log.resolve())}
    start = time.time()
    code = subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            f"--junitxml={junit}", *pytest_args], env=env)
    if not junit.exists():
        sys.exit(f"pytest wrote no {junit} for {name} (exit status {code}): see its output above")
    root = ET.parse(junit).getroot()
    failed = sorted(f"{c.get('classname')}::{c.get('name')}" for c in root.iter("testcase")
                    if c.find("failure") is not None or c.find("error") is not None)
    tests = int(root.find("testsuite").get("tests"))
    return {"variant": name, "exit": code, "tests": tests, "failed": failed,
            "minutes": round((time.time() - start) / 60, 1)}


def comparisons(name: str, out: Path) -> dict:
    """(test, what, n-th comparison of that name in the test) -> its record."""
    seen, by_key = {}, {}
    path = out / f"{name}.jsonl"
    for line in (path.read_text().splitlines() if path.exists() else []):
        rec = parse_json(line)
        k = (rec["test"], rec["what"])
        seen[k] = seen.get(k, 0) + 1
        by_key[(*k, seen[k])] = rec
    return by_key


def table(results: list[dict], out: Path) -> str:
    base = comparisons("native", out)
    lines = ["| variant | tests | failed | comparisons | moved from native | largest move | largest share of "
             "tolerance (test) | minutes |", "|---|---|---|---|---|---|---|---|"]
    for r in results:
        recs = comparisons(r["variant"], out)
        moves = [(abs(rec["max_diff"] - base[k]["max_diff"]), k) for k, rec in recs.items() if k in base]
        moved = [m for m in moves if m[0] > 0]
        worst = max(recs.items(), key=lambda kv: kv[1]["used"], default=None)
        lines.append(" | ".join([
            f"| {r['variant']}", str(r["tests"]), ", ".join(r["failed"]) or "0", str(len(recs)),
            str(len(moved)), f"{max(moved)[0]:.1e}" if moved else "0",
            f"{worst[1]['used']:.2f} ({worst[0][0].split('::')[-1]}: {worst[0][1]})" if worst else "-",
            f"{r['minutes']} |"]))
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="folder for the logs and table.md")
    p.add_argument("--only", nargs="+", choices=list(VARIANTS), default=list(VARIANTS),
                   help="variants to run (native first, the others are compared with it; without native, the "
                        "native run already in --out is the one compared with)")
    p.add_argument("pytest_args", nargs="*", help="after --: what pytest gets (default: the whole suite)")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    names = sorted(args.only, key=list(VARIANTS).index)
    earlier = args.out / "results.json"
    if "native" not in names and not (args.out / "native.jsonl").exists():
        p.error(f"no native run in {args.out} to compare with: add native to --only")
    results = [r for r in (parse_json(earlier.read_text()) if earlier.exists() else []) if r["variant"] not in names]
    for name in names:
        results.append(run_variant(name, args.out, args.pytest_args))
        write_file(str(args.out / "results.json"), (json.dumps(results, indent=1) + "\n").encode())
        text = table(results, args.out)
        write_file(str(args.out / "table.md"), (text + "\n").encode())
        print(text, flush=True)


if __name__ == "__main__":
    main()
