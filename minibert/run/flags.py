"""Command-line flags that several scripts share, defined once: where a script runs (--device,
--tf32) and the range checks of numeric flags, each a one-line `parser.error` before anything
is read or written.
"""

from __future__ import annotations

import argparse
import math

DEVICES = ("auto", "cpu", "cuda", "mps")


class Parser(argparse.ArgumentParser):
    """argparse's parser whose refusal of a command line is one line, like every other refusal:
    `error: ...` and where to read the flags, with argparse's exit status 2 (a wrong command
    line), instead of the usage block and a line of its own. --help still prints the usage."""

    def error(self, message: str):
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def utf8_text(value: str) -> str:
    """argparse `type` of a flag that holds text (not a path): bytes that are not UTF-8 (Python
    keeps them as lone surrogates, which no tokenizer reads) are a one-line flag error."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        try:
            shown = value.encode("utf-8", "surrogateescape")  # the bytes as given on the command line
        except UnicodeEncodeError:  # a surrogate no byte makes (a string passed from Python)
            shown = value.encode("utf-8", "backslashreplace")
        raise argparse.ArgumentTypeError(f"{str(shown)[1:]} is not UTF-8 text") from None
    return value


def add_device(parser, default: str = "auto", tf32: bool = False) -> None:
    """--device (and, with `tf32`, --tf32): auto picks a CUDA GPU, then Apple's MPS, then the CPU."""
    parser.add_argument("--device", default=default, choices=DEVICES,
                        help=f"auto picks cuda, then mps, then cpu (default: {default})")
    if tf32:
        parser.add_argument("--tf32", action=argparse.BooleanOptionalAction, default=True,
                            help="on a CUDA GPU, fp32 matrix products in TF32 (default: on; no effect elsewhere)")


# the ranges a flag may take: name -> (test, what the message says it must be)
AT_LEAST_1 = (lambda v: v >= 1, "at least 1")
AT_LEAST_0 = (lambda v: v >= 0, "0 or more")
POSITIVE = (lambda v: v > 0, "a positive number")
FRACTION = (lambda v: 0 <= v < 1, "in [0, 1)")
HELD_OUT_SHARE = (lambda v: 0 < v < 1, "in (0, 1): at least one row of each label is held out")
PROBABILITY = (lambda v: 0 < v <= 1, "in (0, 1]")
SEED = (lambda v: 0 <= v < 2 ** 32, "in [0, 2^32)")
BATCH_SIZE = (lambda v: 1 <= v < 2 ** 31, "in [1, 2^31)")  # fine-tuning evaluates in twice the batch: torch sizes are int64


def check_ranges(parser: argparse.ArgumentParser, args, rules: dict) -> None:
    """Stop with one line (`parser.error`) at the first flag outside its range: `rules` maps a
    flag's attribute name to one of the ranges above; a value of None (a default still to be
    chosen) passes, and a float must also be finite."""
    for name, (ok, limit) in rules.items():
        value = getattr(args, name)
        if value is None:
            continue
        if not ok(value) or (isinstance(value, float) and not math.isfinite(value)):
            parser.error(f"--{name.replace('_', '-')} must be {limit}, got {value}")
