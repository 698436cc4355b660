"""Checkpoints in HuggingFace's layout: config.json + model.safetensors (+ tokenizer.json).

A folder written by `save_pretrained` loads in `transformers` (`BertForMaskedLM.from_pretrained`
and friends) and a folder written by `transformers` loads here. Weights are read from
`model.safetensors` (or its sharded index), else from `pytorch_model.bin` with
`torch.load(weights_only=True)`, never with pickle's full power.

A file that cannot be read (a cut or garbled safetensors file or index, a `.bin` that
`weights_only=True` refuses, a config.json of wrong types, a corrupt tokenizer.json, a file
given where a folder is expected) is a one-line CheckpointError naming it.

Loading is strict: a missing or unexpected tensor, or a shape mismatch, raises a
CheckpointError listing all of them. Any tensor of the file that is not finite (inf or nan),
even one of a head the model drops, is a CheckpointError too, so that no command computes with
one; and weights none of which is named as a BERT's (roberta.*, ...) are refused by their names
before anything is built. The documented exceptions to strictness:
- the buffers `embeddings.position_ids` / `embeddings.token_type_ids` that older checkpoints
  carry are skipped;
- the pretraining heads, masked-LM `cls.predictions.*` and next-sentence `cls.seq_relationship.*`,
  load into the classes that have them; a task class without one drops its tensors in an info
  line (BertForMaskedLM the next-sentence head, BertForNextSentencePrediction the masked-LM
  head); BertForPreTraining and BertForNextSentencePrediction start a new pooler and
  next-sentence head on an MLM checkpoint, in an info line too;
- the tied aliases `cls.predictions.decoder.weight` / `.bias` that `.bin` files carry are
  accepted when they equal the word embeddings / `cls.predictions.bias` they alias;
- a model without a pooler (BertForMaskedLM, as in HF) skips a checkpoint's pooler, but a
  classifier without one (BertForClassification) refuses it: such a classifier was trained on it;
- `BertModel.from_pretrained` takes the encoder out of any task checkpoint: the head's
  tensors are dropped, and a pooler the checkpoint lacks (MLM checkpoints have none) is
  freshly initialised. Both are expected when starting a classifier from a pretrained
  checkpoint, so they are logged as one info line (logger "minibert"), not warned about.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import io
import json
import logging
import math
import os
import re
import struct
import sys
import warnings
from collections import Counter
from dataclasses import replace

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from .config import TOKENIZER_DIGEST, BertConfig
from .files import NO_BOM, UTF8_BOM, not_a_file, open_file, parse_json, read_bytes, write_file
from .text import plain_tokenizer

logger = logging.getLogger("minibert")

# The one name-mapping table: our state-dict names -> HF's, first matching rule wins.
# Every LayerNorm is `norm` or `*_norm` here, `LayerNorm` in HF's files; the other embedding and
# classifier names are HF's own and need no rule.
OURS_TO_HF = [
    (r"embeddings\.norm\.", "embeddings.LayerNorm."),
    (r"layers\.(\d+)\.attention\.(query|key|value)\.", r"encoder.layer.\1.attention.self.\2."),
    (r"layers\.(\d+)\.attention\.output\.", r"encoder.layer.\1.attention.output.dense."),
    (r"layers\.(\d+)\.attention_norm\.", r"encoder.layer.\1.attention.output.LayerNorm."),
    (r"layers\.(\d+)\.intermediate\.", r"encoder.layer.\1.intermediate.dense."),
    (r"layers\.(\d+)\.output\.", r"encoder.layer.\1.output.dense."),
    (r"layers\.(\d+)\.output_norm\.", r"encoder.layer.\1.output.LayerNorm."),
    (r"pooler\.", "pooler.dense."),
    (r"^mlm_head\.dense\.", "cls.predictions.transform.dense."),
    (r"^mlm_head\.norm\.", "cls.predictions.transform.LayerNorm."),
    (r"^mlm_head\.bias$", "cls.predictions.bias"),
    (r"^nsp_head\.", "cls.seq_relationship."),
]

_SKIPPED = re.compile(r"(^|\.)embeddings\.(position_ids|token_type_ids)$")
_NSP_HEAD = "cls.seq_relationship."
_PRETRAINING_HEADS = {"cls.predictions.": "masked-LM", _NSP_HEAD: "next-sentence"}  # HF name prefix -> head
_TIED_ALIASES = {  # alias in `.bin` files -> the tensor it must equal
    "cls.predictions.decoder.weight": "bert.embeddings.word_embeddings.weight",
    "cls.predictions.decoder.bias": "cls.predictions.bias",
}
_CLASSIFIERS = {"BertForSequenceClassification", "BertForClassification"}


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded (a damaged file, or tensors that do not fit the
    model), said in one line naming the file or listing the misfits: nothing was loaded."""


class NotFiniteError(CheckpointError):
    """A checkpoint whose weights hold an inf or a nan, or (`too_large`) float64 values beyond
    float32's range, which the model's float32 copy would hold as inf; `tensors` names them (HF's
    names)."""

    def __init__(self, source: str, tensors: list[str], too_large: bool = False):
        self.tensors = tensors
        shown = ", ".join(tensors[:3]) + (" ..." if len(tensors) > 3 else "")
        what = "too large for float32 (float64 values beyond 3.4e38)" if too_large else "not finite (inf or nan)"
        super().__init__(f"{source} holds weights that are {what} in {shown}; nothing was loaded")


def to_hf_name(name: str) -> str:
    for pattern, replacement in OURS_TO_HF:
        new, n = re.subn(pattern, replacement, name)
        if n:
            return new
    return name


def read_state_dict(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """The tensors of a checkpoint folder, under HF's names, on the CPU.

    A file that cannot be read (cut short, garbled, a pickle holding more than tensors) is a
    one-line CheckpointError naming it; no reader's own traceback or advice reaches the caller.
    """
    path = os.fspath(path)
    st, index, binary = _weight_files(path)
    odd = next((f for f in (st, index, binary) if os.path.lexists(f) and not os.path.isfile(f)), None)
    if odd is not None:  # a folder or a named pipe where the weights go: named as such, not as missing
        raise CheckpointError(f"{odd} is {not_a_file(odd)}; {DAMAGED}")
    if os.path.isfile(st):
        return _read_safetensors(st)
    if os.path.isfile(index):
        state = {}
        for shard in _shard_files(index):
            state.update(_read_safetensors(os.path.join(path, shard)))
        return state
    if os.path.isfile(binary):
        return _read_bin(binary)
    found = sorted(os.listdir(path)) if os.path.isdir(path) else "no such folder"
    raise FileNotFoundError(f"no model.safetensors or pytorch_model.bin in {path} (found: {found})")


def _weight_files(path: str) -> tuple[str, str, str]:
    return tuple(os.path.join(path, f) for f in ("model.safetensors", "model.safetensors.index.json",
                                                  "pytorch_model.bin"))


def read_header(file: str) -> tuple[dict[str, tuple[int, ...]], dict[str, str]]:
    """The tensor shapes and the metadata of a safetensors file, from its header alone: nothing
    is allocated for the tensors. Layout: an 8-byte little-endian length, then that much JSON,
    then the data. Every tensor's bytes (its shape times its dtype's size) must be the span its
    data_offsets give, inside the file: a header that claims more than the file holds (2^40
    tokens of vocabulary, with a config.json that agrees) is refused before any allocation."""
    try:
        with os.fdopen(open_file(file, os.O_RDONLY), "rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(8)
            n = struct.unpack("<Q", head)[0] if len(head) == 8 else -1
            if not 0 < n <= size - 8:
                raise ValueError(f"a header of {n} bytes in a file of {size}")
            header = parse_json(f.read(n))
        shapes = {k: tuple(v["shape"]) for k, v in header.items() if k != "__metadata__"}
        if not all(isinstance(d, int) and d >= 0 for s in shapes.values() for d in s):
            raise ValueError("a shape that is not a list of sizes")
        for name, shape in shapes.items():
            begin, end = header[name]["data_offsets"]
            nbytes = math.prod(shape) * _DTYPE_BYTES[header[name]["dtype"]]
            if not (isinstance(begin, int) and isinstance(end, int) and 0 <= begin <= end <= size - 8 - n
                    and end - begin == nbytes):
                raise ValueError(f"{name}: {header[name]['dtype']} {list(shape)} needs {nbytes} bytes, its "
                                 f"data_offsets give [{begin}, {end}) of the {size - 8 - n} the file holds")
        metadata = header.get("__metadata__") or {}
        if not isinstance(metadata, dict):
            raise ValueError("__metadata__ is not an object")
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as e:
        raise CheckpointError(f"{file}: not a readable safetensors file ({_first_line(e)}); {DAMAGED}") from None
    return shapes, metadata


def weight_shapes(path: str) -> dict[str, tuple[int, ...]]:
    """The name -> shape of every tensor in a checkpoint folder, read from the safetensors
    headers (a .bin file has no header: it is read whole, its size being the file's)."""
    st, index, binary = _weight_files(path)
    if os.path.isfile(st):
        return read_header(st)[0]
    if os.path.isfile(index):
        shapes = {}
        for shard in _shard_files(index):
            shapes.update(read_header(os.path.join(path, shard))[0])
        return shapes
    return {k: tuple(v.shape) for k, v in read_state_dict(path).items()}


def check_sizes(config: BertConfig, shapes: dict[str, tuple[int, ...]], source: str) -> None:
    """The sizes config.json gives, checked against the weights' shapes BEFORE a model is
    built from them: an edited config.json (100,000 layers, a vocabulary of 10^13) is a
    CheckpointError, never an allocation that runs the machine out of memory."""
    check_bert_names(shapes, source)
    prefix = "bert." if any(k.startswith("bert.") for k in shapes) else ""
    C, I = config.hidden_size, config.intermediate_size
    expected = {"embeddings.word_embeddings.weight": (config.vocab_size, C),
                "embeddings.position_embeddings.weight": (config.max_position_embeddings, C),
                "embeddings.token_type_embeddings.weight": (config.type_vocab_size, C),
                "encoder.layer.0.attention.self.query.weight": (C, C),
                "encoder.layer.0.intermediate.dense.weight": (I, C)}
    problems = [f"{name}: config.json says {shape}, the weights hold {shapes.get(prefix + name, 'nothing')}"
                for name, shape in expected.items() if shapes.get(prefix + name) != shape]
    layer = re.compile(re.escape(prefix) + r"encoder\.layer\.(\d+)\.")
    layers = {int(m.group(1)) for k in shapes if (m := layer.match(k))}
    if not set(range(config.num_hidden_layers)) <= layers:
        problems.append(f"config.json says {config.num_hidden_layers} layers, the weights hold {len(layers)}")
    if problems:
        raise CheckpointError(f"{source}: config.json does not match the weights ({'; '.join(problems[:3])}); "
                              f"{DAMAGED}")


_BERT_PREFIXES = ("bert.", "embeddings.", "encoder.", "pooler.", "cls.", "classifier.")  # HF's names, any head


def check_bert_names(shapes: dict[str, tuple[int, ...]], source: str) -> None:
    """Weights whose encoder is not named as a BERT's (roberta.*, electra.*, distilbert.*: another
    architecture behind a config.json that says bert, with or without BERT-named heads beside it)
    are a CheckpointError naming what they are."""
    others = Counter(k.split(".")[0] for k in shapes if not k.startswith(_BERT_PREFIXES))
    if others and not any(k.startswith(_BERT_PREFIXES[:3]) for k in shapes):  # no bert., embeddings., encoder.
        first = others.most_common(1)[0][0]
        raise CheckpointError(f"{source}: its weights are named {first}.*, not as a BERT's ({', '.join(_BERT_PREFIXES)}"
                              "...): a checkpoint of another architecture, which minibert does not load")


_SAFETENSORS_DTYPES = {
    torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
    torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
    torch.uint8: "U8", torch.bool: "BOOL",
}
_DTYPE_BYTES = {**{name: dtype.itemsize for dtype, name in _SAFETENSORS_DTYPES.items()},
                "U16": 2, "U32": 4, "U64": 8, "F8_E4M3": 1, "F8_E5M2": 1}  # every dtype safetensors names

DAMAGED = "the checkpoint is damaged — re-save or re-download it"
# what a command says when finite weights still give NaN or inf (too large for float32: a LayerNorm weight of 1e38)
NOT_FINITE = "computes numbers that are not finite from its weights (they overflow float32): the checkpoint is damaged"


def overflowing(hidden: torch.Tensor) -> bool:
    """Whether hidden states (..., C) are not finite, or so large that their squares overflow
    float32 (beyond about 1.8e19, where a real model's are tens): a norm, a cosine or the next
    LayerNorm of them is then inf. What finite weights too large for float32 give (a LayerNorm gain
    of 1e30): said as NOT_FINITE wherever a command reads hidden states, never a score of them."""
    return not bool(torch.isfinite(hidden.float().square().sum(-1)).all())


def _first_line(e: Exception) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def _read_safetensors(file: str) -> dict[str, torch.Tensor]:
    try:
        return load_file(file)
    except (SafetensorError, OSError) as e:
        raise CheckpointError(f"{file}: not a readable safetensors file ({_first_line(e)}); {DAMAGED}") from None


def _shard_files(index: str) -> list[str]:
    """The shard file names in a model.safetensors.index.json ({"weight_map": {tensor: file}})."""
    try:
        d = parse_json(read_bytes(index))
    except ValueError as e:
        raise CheckpointError(f"{index}: not valid JSON ({_first_line(e)}); {DAMAGED}") from None
    weight_map = d.get("weight_map") if isinstance(d, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(f, str) for f in weight_map.values()):
        raise CheckpointError(f'{index}: no "weight_map" {{tensor name: shard file}}; {DAMAGED}')
    outside = sorted({f for f in weight_map.values() if os.path.basename(f) != f or f in ("", ".", "..")
                      or (os.altsep and os.altsep in f)})
    if outside:
        raise CheckpointError(f"{index}: names shard {outside[0]!r}, not a file name inside the checkpoint "
                              "folder; a shard is never read from elsewhere")
    return sorted(set(weight_map.values()))


def torch_load(data: bytes):
    """torch.load(weights_only=True) of a file's bytes, on the CPU: never pickle's full power. Its
    warnings (a pickle protocol other than torch's own) are silenced: whatever it refuses raises,
    and each caller says it in one line."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)


def _read_bin(file: str) -> dict[str, torch.Tensor]:
    """torch.load(weights_only=True); whatever it refuses is refused here, in one line."""
    try:
        state = torch_load(read_bytes(file))
    except Exception:  # a refused object, a cut zip, garbage: torch raises many types, with wrong advice
        raise CheckpointError(f"{file}: cannot be loaded safely with weights_only=True: it holds more than "
                              "tensors (or is damaged); minibert never unpickles arbitrary objects — "
                              "convert it to model.safetensors") from None
    if not isinstance(state, dict) or not all(torch.is_tensor(v) for v in state.values()):
        raise CheckpointError(f"{file}: holds a {type(state).__name__}, not a state dict {{name: tensor}}")
    odd = [k for k, v in state.items() if not isinstance(k, str) or v.layout != torch.strided]
    if odd:
        raise CheckpointError(f"{file}: {odd[0]!r} is not a name of a dense tensor; a state dict maps names "
                              f"to dense tensors; {DAMAGED}")
    return state


def _listing(title: str, items: list[str], limit: int = 20) -> str:
    more = f"\n    ... and {len(items) - limit} more" if len(items) > limit else ""
    return f"  {title} ({len(items)}):\n" + "\n".join(f"    {s}" for s in items[:limit]) + more


def load_state(model: torch.nn.Module, state: dict[str, torch.Tensor], source: str = "checkpoint") -> None:
    """Copy HF-named `state` into `model`, strictly (see the module docstring)."""
    not_finite = sorted(k for k, v in state.items() if v.is_floating_point()  # .float(): fp8 too; float64 as it is
                        and not bool(torch.isfinite(v if v.dtype == torch.float64 else v.float()).all()))
    if not_finite:  # every tensor of the file, also a head this model drops and a tied alias: the file is bad
        raise NotFiniteError(source, not_finite)
    too_large = sorted(k for k, v in state.items()
                       if v.dtype == torch.float64 and not bool(torch.isfinite(v.float()).all()))
    if too_large:
        raise NotFiniteError(source, too_large, too_large=True)
    own = model.state_dict()
    expected = {to_hf_name(k): k for k in own}  # HF name -> our name
    is_base = not any(k.startswith("bert.") for k in expected)
    has_pooler = any(".pooler." in f".{k}" for k in expected)
    notes = []

    if is_base and any(k.startswith("bert.") for k in state):
        head = sorted(k for k in state if not k.startswith("bert.") and not _SKIPPED.search(k))
        state = {k[len("bert."):]: v for k, v in state.items() if k.startswith("bert.")}
        if head:
            notes.append(f"dropped the task head's tensors {head}")

    state = dict(state)
    for alias, target in _TIED_ALIASES.items():
        if alias in state and target in state:
            if not torch.equal(state[alias], state[target]):
                raise CheckpointError(f"{source}: {alias} differs from {target}; minibert ties "
                                      "the MLM decoder to the word embeddings, so it cannot load "
                                      "an untied decoder")
            del state[alias]

    dropped = set()
    for prefix, head in _PRETRAINING_HEADS.items():  # a pretraining head this model does not have
        unused = sorted(k for k in state if k.startswith(prefix))
        if unused and not any(k.startswith(prefix) for k in expected):
            notes.append(f"dropped the {head} head's tensors {unused}")
            dropped |= set(unused)
    has_nsp = any(k.startswith(_NSP_HEAD) for k in expected)
    pooled = sorted(k for k in state if ".pooler." in f".{k}")
    if pooled and not has_pooler and "classifier.weight" in expected:  # a head on [CLS] alone, as HF's has none
        raise CheckpointError(f"{source} holds a pooler ({pooled[0]}, ...), which {type(model).__name__} does not "
                              "have: its classifier was trained on the pooled [CLS] vector, so it is a "
                              "BertForSequenceClassification, whatever its config.json's architectures say")
    skipped = {k for k in state if _SKIPPED.search(k) or (not has_pooler and ".pooler." in f".{k}")} | dropped
    missing = sorted(k for k in expected if k not in state)
    if is_base and missing and all(k.startswith("pooler.") for k in missing):
        notes.append(f"initialised a new pooler {missing} (the checkpoint has none)")
        missing = []
    if has_nsp and missing and all(k.startswith(("bert.pooler.", _NSP_HEAD)) for k in missing):
        notes.append(f"initialised a new pooler and next-sentence head {missing} (an MLM checkpoint has neither)")
        missing = []
    unexpected = sorted(k for k in state if k not in expected and k not in skipped)
    mismatched = sorted(f"{k}: checkpoint {tuple(state[k].shape)}, model {tuple(own[expected[k]].shape)}"
                        for k in expected if k in state and state[k].shape != own[expected[k]].shape)
    not_float = sorted(f"{k} ({str(state[k].dtype).removeprefix('torch.')})" for k in expected
                       if k in state and own[expected[k]].is_floating_point() and not state[k].is_floating_point())
    if not_float:  # integers or booleans would be cast to floats and computed with, silently
        raise CheckpointError(f"{source} holds weights that are not floating-point numbers: {', '.join(not_float[:3])}"
                              f"{' ...' if len(not_float) > 3 else ''}; {DAMAGED}")
    held = state.get("classifier.weight")
    if mismatched and all(m.startswith("classifier.") for m in mismatched) and held is not None and held.dim() == 2 \
            and held.shape[0] != len(model.config.id2label):  # config.json edited, or of another run
        raise CheckpointError(f"{source}: its config.json gives {len(model.config.id2label)} classes (num_labels, "
                              f"id2label), but its classifier.weight {tuple(held.shape)} scores {held.shape[0]}: give "
                              f"config.json the num_labels and id2label of the {held.shape[0]} classes it was "
                              "fine-tuned on")
    if missing or unexpected or mismatched:
        parts = [(t, x) for t, x in (("missing from the checkpoint", missing),
                                     ("unexpected in the checkpoint", unexpected),
                                     ("shape mismatch", mismatched)) if x]
        raise CheckpointError(f"{source} does not fit {type(model).__name__}; nothing was loaded.\n"
                              + "\n".join(_listing(t, x) for t, x in parts))
    with torch.no_grad():
        for hf_name, ours in expected.items():
            if hf_name in state:
                own[ours].copy_(state[hf_name])
    if notes:
        logger.info(f"{type(model).__name__}.from_pretrained({source}): " + "; ".join(notes))




def save_file(tensors: dict[str, torch.Tensor], filename: str, metadata: dict[str, str] | None = None) -> None:
    """Write the safetensors format by hand (safetensors.torch.save_file goes through NumPy).

    Layout: 8-byte little-endian header length, a JSON header {name: {dtype, shape,
    data_offsets}} padded with spaces to a multiple of 8, then the raw bytes. Tensors go
    largest item size first, so every tensor starts aligned to its item size.
    """
    if sys.byteorder != "little":
        raise RuntimeError("minibert writes safetensors on little-endian machines only")
    order = sorted(tensors, key=lambda k: (-tensors[k].element_size(), k))
    header, offset = ({"__metadata__": metadata} if metadata else {}), 0
    for name in order:
        t = tensors[name]
        nbytes = t.numel() * t.element_size()
        header[name] = {"dtype": _SAFETENSORS_DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(text)))
            f.write(text)
            for name in order:
                t = tensors[name].detach().cpu().contiguous()
                if t.numel():
                    f.write(ctypes.string_at(t.data_ptr(), t.numel() * t.element_size()))
    write_file(os.fspath(filename), write)  # never seen half-written


@contextlib.contextmanager
def warnings_if_loaded():
    """Hold the warnings raised inside the block (config.json's unknown keys) until it ends
    without an error, then give them: a checkpoint refused for another reason is one line."""
    with warnings.catch_warnings(record=True) as held:
        warnings.simplefilter("always")
        yield
    for w in held:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def read_config(path: str) -> tuple[BertConfig, list[str]]:
    """A checkpoint folder's config.json, read once: the config and the `architectures` it names;
    its problems (no folder, wrong types, bad JSON) as CheckpointError."""
    if not os.path.isdir(path):
        problem = "is a file" if os.path.exists(path) else "does not exist (no such folder)"
        raise CheckpointError(f"{path} {problem}; from_pretrained takes a checkpoint folder "
                              "(config.json + model.safetensors)")
    try:
        return BertConfig.load_with_architectures(path)
    except ValueError as e:
        raise CheckpointError(str(e)) from None


class Pretrained:
    """from_pretrained / save_pretrained for every model class, in HF's folder layout."""

    hf_architecture: str

    @classmethod
    def _from_config(cls, config: BertConfig):
        return cls(config)

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, **config_overrides):
        """Build from `path`/config.json and load its weights strictly.

        `config_overrides` replace config fields that do not change the weights' shapes,
        e.g. `use_sdpa=True` or `hidden_dropout_prob=0.0`.
        """
        path = os.fspath(path)
        with warnings_if_loaded():
            return cls._load(path, *read_config(path), config_overrides)

    @classmethod
    def _load(cls, path: str, config: BertConfig, architectures: list[str], config_overrides: dict):
        """from_pretrained, on a config.json already read."""
        saved = set(architectures) & _CLASSIFIERS
        if cls.hf_architecture in _CLASSIFIERS and saved and cls.hf_architecture not in saved:
            raise CheckpointError(f"{path} holds a {saved.pop()}; its head differs from "
                                  f"{cls.hf_architecture}'s, so load it with that class")
        check_sizes(config, weight_shapes(path), path)
        model = cls._from_config(replace(config, **config_overrides))
        state = read_state_dict(path)
        load_state(model, state, path)
        _say_a_stored_dtype(path, state)
        return model

    def save_pretrained(self, path: str | os.PathLike, tokenizer=None, metadata: dict[str, str] | None = None) -> None:
        """Write config.json, model.safetensors (`metadata` joins its header's) and, given a
        tokenizers.Tokenizer, tokenizer.json, whose sha256 config.json records, and beside it
        tokenizer_config.json (tokenizer_settings), so that transformers reads text as minibert does. Each file goes
        through files.write_file: a full disk is an OSError, and no file is ever half-written."""
        path = os.fspath(path)
        os.makedirs(path, exist_ok=True)
        tensors = {to_hf_name(k): v for k, v in self.state_dict().items()}
        save_file(tensors, os.path.join(path, "model.safetensors"), metadata={"format": "pt", **(metadata or {})})
        digest = None
        if tokenizer is not None:
            text = tokenizer.to_str(pretty=True).encode("utf-8")
            write_file(os.path.join(path, "tokenizer.json"), text)
            digest = hashlib.sha256(text).hexdigest()
            write_file(os.path.join(path, "tokenizer_config.json"),
                       (json.dumps(tokenizer_settings(tokenizer), indent=2, sort_keys=True) + "\n").encode("utf-8"))
        self.config.save(os.path.join(path, "config.json"), [self.hf_architecture], tokenizer_sha256=digest)


def _say_a_stored_dtype(path: str, state: dict[str, torch.Tensor]) -> None:
    """A warning where the weights are stored in float16 or bfloat16 and config.json names no dtype
    (where it names one, BertConfig says so): transformers 5 then computes in the first floating
    tensor's dtype, minibert in float32."""
    stored = next((v.dtype for v in state.values() if v.is_floating_point()), torch.float32)
    given = _json_object(os.path.join(path, "config.json")) or {}
    if stored in (torch.float16, torch.bfloat16) and not any(given.get(k) for k in ("dtype", "torch_dtype")):
        warnings.warn(f"{path}: its weights are stored in {str(stored).removeprefix('torch.')} and config.json names "
                      "no dtype; minibert computes in float32 (transformers 5 computes in the weights' dtype unless "
                      "given dtype=torch.float32, so its numbers differ from these by that dtype's rounding)",
                      stacklevel=3)


def load_tokenizer(path: str | os.PathLike):
    """The `tokenizers.Tokenizer` saved in a checkpoint folder (its tokenizer.json)."""
    from tokenizers import Tokenizer

    file = os.path.join(os.fspath(path), "tokenizer.json")
    if not os.path.lexists(file):
        raise FileNotFoundError(f"no tokenizer.json in {path}")
    try:
        text = read_bytes(file)
    except OSError as e:
        raise CheckpointError(f"{file}: cannot read it ({e.strerror})") from None
    if text.startswith(UTF8_BOM):  # neither the tokenizers library nor transformers reads past it
        raise CheckpointError(f"{file} {NO_BOM}")
    try:
        tokenizer = Tokenizer.from_str(text.decode("utf-8"))
    except Exception as e:  # the tokenizers library raises a bare Exception
        raise CheckpointError(f"{file}: not a valid tokenizer.json ({_first_line(e)})") from None
    config = _json_object(os.path.join(os.fspath(path), "config.json"))  # None: a tokenizer alone, or damaged
    state = parse_json(text)
    _check_no_added_tokens_file(path, file, state)  # before the sizes: a token it adds may be what they miss
    _check_tokenizer_belongs(config, file, text, tokenizer)
    _check_vocabulary(file, tokenizer)
    _check_template(file, tokenizer)
    _check_read_as_transformers_reads(path, file, tokenizer, state, config or {})
    return tokenizer


def _check_no_added_tokens_file(path, file: str, state: dict) -> None:
    """added_tokens.json (a file older transformers wrote beside a vocabulary) adds each token it
    names, as a token of its own, when transformers reads the folder; minibert reads tokenizer.json
    alone. So every token it names must be one of tokenizer.json's added tokens, with the same id
    (a CheckpointError otherwise), and the file a JSON object (_tokenizer_file)."""
    where = os.path.join(os.fspath(path), "added_tokens.json")
    listed = _tokenizer_file(where) or {}
    held = {token.get("content"): token.get("id") for token in state.get("added_tokens") or [] if isinstance(token, dict)}
    for token, given_id in listed.items():
        if held.get(token, object()) != given_id:
            raise CheckpointError(f"{where} adds {token!r} (id {given_id}), which {file} does not hold among its added "
                                  f"tokens with that id: transformers would read it as a token of its own, minibert "
                                  f"reads {file} alone: remove {where}, or add the token to {file}")


# the special tokens minibert reads by name, under the keys transformers' tokenizer files give them
SPECIAL_TOKEN_KEYS = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
                      "mask_token": "[MASK]"}
# transformers' BertTokenizer builds its own pipeline from the vocabulary and these settings of
# tokenizer_config.json, whatever tokenizer.json says: key -> (its default, a text, what the text normalises
# to with the setting on, with it off)
_NORMALIZER_SETTINGS = {"do_lower_case": (True, "A", "a", "A"), "strip_accents": (None, "\u00e0", "a", "\u00e0"),
                        "tokenize_chinese_chars": (True, "\u4e2d", " \u4e2d ", "\u4e2d")}
_BERT_TOKENIZERS = (None, "BertTokenizer", "BertTokenizerFast")  # tokenizer_class values that mean BertTokenizer
# tokenizer_class values with which transformers reads tokenizer.json as it is (its generic fast tokenizer)
_AS_IT_IS = ("PreTrainedTokenizerFast", "TokenizersBackend")


def tokenizer_settings(tokenizer) -> dict:
    """tokenizer_config.json for a tokenizer minibert saves: transformers' generic fast tokenizer,
    which reads tokenizer.json as it is (its BertTokenizer would build its own pipeline, with
    its defaults: accents stripped where minibert's WordPiece keeps them), and the special tokens
    by the names minibert reads them (the unknown-word token as the model names it)."""
    model = parse_json(tokenizer.to_str()).get("model") or {}
    return {"tokenizer_class": "PreTrainedTokenizerFast", **SPECIAL_TOKEN_KEYS,
            "unk_token": model.get("unk_token") or SPECIAL_TOKEN_KEYS["unk_token"]}


def _token_name(value):
    """A special token as transformers' files give it: a string, or {"content": string, ...}."""
    return value.get("content") if isinstance(value, dict) else value


def _check_read_as_transformers_reads(path: str, file: str, tokenizer, state: dict, config: dict) -> None:
    """The tokenizer files transformers reads beside tokenizer.json say what tokenizer.json does,
    so that the two libraries read a text alike; a CheckpointError naming the disagreement
    otherwise (minibert reads tokenizer.json):
    - tokenizer_config.json or special_tokens_map.json naming a special token minibert reads by
      name ([CLS], [SEP], [MASK], [PAD], the unknown-word token) as another or as none (null), or making special a
      token tokenizer.json does not hold as an added token (_check_no_other_special_tokens);
    - a tokenizer_class other than BertTokenizer and the generic fast tokenizer (transformers builds
      that class's own pipeline), named by tokenizer_config.json or, where that names none, by
      config.json (`config`), as transformers looks for it; tokenizer_config.json's split_special_tokens;
    - a folder transformers reads with its BertTokenizer (tokenizer_class BertTokenizer, or none):
      it builds BERT's pipeline from the vocabulary and do_lower_case, strip_accents,
      tokenize_chinese_chars (each missing one at its default: true, null, true; strip_accents
      null strips accents when lower-casing), so tokenizer.json's normalizer, pre-tokenizer and
      WordPiece settings must be those. A minibert checkpoint saved before minibert wrote
      tokenizer_config.json (its config.json records its tokenizer's digest) is read as it was
      trained; transformers reads it with BERT's defaults. A file that is there but not a JSON
      object is refused (_tokenizer_file). `state`: tokenizer.json's content."""
    saved_by_minibert = TOKENIZER_DIGEST in config
    files = {name: os.path.join(os.fspath(path), name) for name in ("tokenizer_config.json", "special_tokens_map.json")}
    given = {name: _tokenizer_file(where) for name, where in files.items()}
    unk = (state.get("model") or {}).get("unk_token") or SPECIAL_TOKEN_KEYS["unk_token"]
    untyped = next((key for key, value in (given["tokenizer_config.json"] or {}).items() if key.endswith("_token")
                    and isinstance(value, dict) and value.get("__type") != "AddedToken"), None)
    if untyped:  # special_tokens_map.json may give a token so; tokenizer_config.json only with its __type
        raise CheckpointError(f"{files['tokenizer_config.json']} gives {untyped} as an object without "
                              '"__type": "AddedToken", which transformers cannot read: give the token as a string')
    for name, settings in given.items():
        for key, expected in {**SPECIAL_TOKEN_KEYS, "unk_token": unk}.items():
            named = _token_name(settings.get(key)) if settings else None
            if settings and key in settings and not isinstance(named, str):  # null: transformers goes without it
                raise CheckpointError(f"{files[name]} gives {key} {json.dumps(settings[key])}, which names no token: "
                                      f"transformers then goes without one, while {file} reads {expected} as it: give "
                                      f"{json.dumps(expected)}, or remove {key}")
            if isinstance(named, str) and named != expected:
                raise CheckpointError(f"{files[name]} names {key} {named!r}, but {file} reads {expected} as it; "
                                      "transformers follows the first, minibert the second: remove the one that is wrong")
        _check_no_other_special_tokens(files[name], file, settings or {}, state)
    settings = given["tokenizer_config.json"] or {}
    named_in = files["tokenizer_config.json"] if settings.get("tokenizer_class") else os.path.join(path, "config.json")
    kind = settings.get("tokenizer_class") or config.get("tokenizer_class")
    if given["tokenizer_config.json"] is None and saved_by_minibert and kind is None:
        return
    if kind not in _BERT_TOKENIZERS + _AS_IT_IS:
        raise CheckpointError(f"{named_in} names tokenizer_class {kind!r}: transformers builds "
                              f"that class's own pipeline, whatever {file} says, and minibert reads {file}: name "
                              "BertTokenizer or PreTrainedTokenizerFast (which reads tokenizer.json as it is)")
    if settings.get("split_special_tokens"):
        raise CheckpointError(f"{files['tokenizer_config.json']} sets split_special_tokens: transformers would split "
                              "a [MASK] typed in a text into pieces, minibert reads it as its one token: remove it")
    if kind in _AS_IT_IS:
        return
    problem = _not_berts_pipeline(tokenizer, state, settings)
    if problem:
        named = f"tokenizer_class {kind!r}" if kind else "no tokenizer_class named"
        raise CheckpointError(f"transformers reads {path} with its BertTokenizer ({named}), which builds BERT's own "
                              f"pipeline whatever {file} says, and {problem}; transformers would read text otherwise "
                              "than minibert: make the two agree")


def _check_no_other_special_tokens(where: str, file: str, settings: dict, state: dict) -> None:
    """Every token that `settings` (tokenizer_config.json's or special_tokens_map.json's) makes
    special (bos_token, eos_token, additional_special_tokens, extra_special_tokens,
    added_tokens_decoder; the five of SPECIAL_TOKEN_KEYS are checked by name, as minibert reads
    them) is one tokenizer.json (`state`) already holds among its added tokens:
    transformers reads such a token apart from any word around it ("the" in "there"), and
    minibert reads tokenizer.json; a CheckpointError naming the token otherwise."""
    named = [value for key, value in settings.items() if key.endswith("_token") and key not in SPECIAL_TOKEN_KEYS]
    for key in ("additional_special_tokens", "extra_special_tokens", "added_tokens_decoder"):
        listed = settings.get(key) or []
        named += list(listed.values()) if isinstance(listed, dict) else listed if isinstance(listed, list) else []
    added = {token.get("content"): token for token in state.get("added_tokens") or [] if isinstance(token, dict)}
    for token in (_token_name(value) for value in named):
        if isinstance(token, str) and token not in added:
            raise CheckpointError(f"{where} makes {token!r} a special token, which {file} does not hold among its "
                                  "added tokens: transformers would read it apart from any word around it, minibert "
                                  "as tokenizer.json does: remove it, or add it to tokenizer.json's added_tokens")
    decoder = settings.get("added_tokens_decoder")
    for entry in decoder.values() if isinstance(decoder, dict) else ():
        if isinstance(entry, dict) and isinstance(entry.get("content"), str):
            _check_added_token_agrees(where, file, entry, added[entry["content"]])


def _check_added_token_agrees(where: str, file: str, entry: dict, held: dict) -> None:
    """An added_tokens_decoder entry of tokenizer_config.json (`entry`) gives its token the
    matching properties that tokenizer.json's added token (`held`) has: transformers adds the token
    again with the properties the entry gives, so a [MASK] made single_word is no longer read in
    "x[MASK]y", and one made normalized is matched after lower-casing ("[mask]"); a CheckpointError
    naming the property otherwise. (lstrip and rstrip take only the spaces beside the token, which
    BERT's pre-tokenizer drops anyway; its id and special flag change no id read.)"""
    for key in ("single_word", "normalized"):
        if key in entry and entry[key] != held.get(key):
            raise CheckpointError(f"{where} gives {entry['content']!r} {key} {json.dumps(entry[key])}, but {file} "
                                  f"gives it {json.dumps(held.get(key))}: transformers would read text with the "
                                  f"first, minibert with the second: make the two agree")


def _tokenizer_file(file: str) -> dict | None:
    """The JSON object in `file`, one of the tokenizer files transformers reads beside tokenizer.json,
    or None where there is none; a CheckpointError for one that is there but not a JSON object (cut
    short, empty, a list): transformers cannot read the folder's tokenizer then."""
    if not os.path.lexists(file):
        return None
    try:
        raw = read_bytes(file)
        settings = parse_json(raw)
    except OSError as e:
        raise CheckpointError(f"{file}: cannot read it ({e.strerror})") from None
    except ValueError as e:
        raw, settings = b"", e
    if raw.startswith(UTF8_BOM):
        raise CheckpointError(f"{file} {NO_BOM}")
    if not isinstance(settings, dict):
        why = f"not JSON: {getattr(settings, 'msg', settings)}" if isinstance(settings, ValueError) else \
            f"a JSON {type(settings).__name__}"
        raise CheckpointError(f"{file} is not a JSON object ({why}): transformers cannot read the folder's tokenizer "
                              "with it; mend it, or remove it")
    return settings


def _json_object(file: str) -> dict | None:
    """The JSON object in `file`, or None (missing, unreadable, not an object, not JSON)."""
    try:
        settings = parse_json(read_bytes(file))
    except (OSError, ValueError):
        return None
    return settings if isinstance(settings, dict) else None


def _not_berts_pipeline(tokenizer, state: dict, settings: dict) -> str | None:
    """How `tokenizer` (`state`: its tokenizer.json) differs from what transformers' BertTokenizer
    builds from its vocabulary and `settings` (tokenizer_config.json's), in words, or None."""
    normalizer, pre, model = (state.get(k) or {} for k in ("normalizer", "pre_tokenizer", "model"))
    for key in _NORMALIZER_SETTINGS:  # transformers cannot build its pipeline from another value
        value = settings.get(key, False)
        if not isinstance(value, bool) and not (key == "strip_accents" and value is None):
            return f"its {key} is {json.dumps(value)}, not true or false"
    if normalizer.get("type") != "BertNormalizer" or normalizer.get("clean_text") is not True:
        return f"{_described(normalizer)} is not BERT's normalizer with clean_text"
    wanted = {key: settings.get(key, default) for key, (default, *_) in _NORMALIZER_SETTINGS.items()}
    if wanted["strip_accents"] is None:
        wanted["strip_accents"] = wanted["do_lower_case"]
    for key, value in wanted.items():
        _, text, on, off = _NORMALIZER_SETTINGS[key]
        does = tokenizer.normalizer.normalize_str(text)
        if does != (on if value else off):
            given = json.dumps(settings[key]) if key in settings else "left out"
            if key == "strip_accents" and settings.get(key) is None:
                given += f" (so {str(value).lower()}, as do_lower_case)"
            return (f"its {key} is {given}, but tokenizer.json does {'not ' if value else ''}"
                    f"{key.replace('_', ' ').replace('do ', '')} ({text!r} reads as {does!r})")
    if pre.get("type") != "BertPreTokenizer":
        return f"its pre-tokenizer {_described(pre)} is not BERT's (BertPreTokenizer)"
    unk = _token_name(settings.get("unk_token")) or SPECIAL_TOKEN_KEYS["unk_token"]
    if model.get("type") == "WordPiece" and model.get("unk_token") != unk:
        return f"its unknown-word token is {model.get('unk_token')!r}, not {unk!r}, BertTokenizer's"
    if model.get("type") != "WordPiece" or model.get("continuing_subword_prefix") != "##" \
            or model.get("max_input_chars_per_word") != 100:
        return (f"its model ({model.get('type')}, continuing_subword_prefix {model.get('continuing_subword_prefix')!r}, "
                f"max_input_chars_per_word {model.get('max_input_chars_per_word')}) is not BERT's WordPiece "
                "('##', 100)")
    return None


def _described(part: dict) -> str:
    return str(part.get("type")) if part else "none"


def _check_template(file: str, tokenizer) -> None:
    """The tokenizer frames a text as BERT's input, `[CLS] A [SEP]` (its post-processor): every
    command reads its input that way; and it reads a [MASK] the user types as that one token.
    A CheckpointError otherwise (no post-processor, or one of another kind than BERT's two, whose
    Sequence the tokenizers library cannot always run (a panic); another template, with any
    token more or less than `[CLS] A [SEP]`, or a segment id other than 0 on any of them, since
    every command feeds segment 0; [MASK] not a special token). (A pair's template is checked
    where a pair is encoded: attention.py.)"""
    kind = type(tokenizer.post_processor).__name__
    if kind not in ("TemplateProcessing", "BertProcessing"):
        found = "missing" if tokenizer.post_processor is None else kind
        raise CheckpointError(f"{file}: its post_processor is {found}, "
                              "not BERT's TemplateProcessing (or BertProcessing) framing a text as [CLS] text [SEP]")
    cls, sep, mask = (tokenizer.token_to_id(t) for t in ("[CLS]", "[SEP]", "[MASK]"))
    plain = plain_tokenizer(tokenizer)
    framed, bare = plain.encode("a"), plain.encode("a", add_special_tokens=False).ids
    if cls is None or sep is None or framed.ids != [cls, *bare, sep]:
        raise CheckpointError(f"{file} does not frame a text as BERT's input, [CLS] text [SEP] (its post_processor), "
                              "so the model would read other input than it was trained on")
    if any(framed.type_ids):
        raise CheckpointError(f"{file} gives a single text the segment ids {framed.type_ids} (its post_processor's "
                              "template); BERT reads one text as segment 0, which is what minibert feeds")
    if mask is not None and plain.encode("[MASK]", add_special_tokens=False).ids != [mask]:
        raise CheckpointError(f"{file} does not read [MASK] in a text as its one token (id {mask}): [MASK] is not "
                              "among its special tokens (added_tokens), so a masked text would be split into pieces")


def _check_vocabulary(file: str, tokenizer) -> None:
    """Each id 0 to N-1 has exactly one token (else a guessed id may have none to print, or two),
    and the unknown-word token of a WordPiece model is one of them (else a word it cannot split
    stops the tokenizer), not a word piece, and the model's prefix of word pieces is the one its
    vocabulary uses (else every word it splits is unknown): a CheckpointError otherwise."""
    vocab = tokenizer.get_vocab(with_added_tokens=True)
    count = Counter(vocab.values())
    shared = sorted(i for i, n in count.items() if n > 1)
    if shared:
        a, b = sorted(t for t, i in vocab.items() if i == shared[0])[:2]
        raise CheckpointError(f"{file} gives {a!r} and {b!r} the same id {shared[0]:,}: each id of a vocabulary "
                              "has one token")
    gaps = sorted(set(range(len(vocab))) - set(count))
    if gaps:
        raise CheckpointError(f"{file} has no token with the id {gaps[0]:,} (its {len(vocab):,} tokens do not have "
                              f"the ids 0 to {len(vocab) - 1:,}): each id of a vocabulary has one token")
    unk = getattr(tokenizer.model, "unk_token", None)
    if unk is not None and unk not in vocab:
        raise CheckpointError(f"{file}: its unknown-word token {unk!r} is not in its vocabulary, so a word it cannot "
                              "split would have no id")
    if unk in ("[CLS]", "[SEP]", "[MASK]", "[PAD]"):
        raise CheckpointError(f"{file}: its unknown-word token is {unk}, so a word it cannot split would be read as "
                              f"{unk}, which has another role in BERT's input")
    prefix = getattr(tokenizer.model, "continuing_subword_prefix", None)  # WordPiece's "##"
    if prefix and unk is not None and unk.startswith(prefix):
        raise CheckpointError(f"{file}: its unknown-word token {unk!r} is a word piece (it starts with its "
                              f"continuing_subword_prefix {prefix!r}), so a word it cannot split would be read as one")
    if prefix and not any(token.startswith(prefix) for token in tokenizer.get_vocab(with_added_tokens=False)):
        raise CheckpointError(f"{file}: no token of its vocabulary starts with its continuing_subword_prefix "
                              f"{prefix!r}, so every word it must split into pieces would be read as {unk}")


def _check_tokenizer_belongs(config: dict | None, file: str, text: bytes, tokenizer) -> None:
    """A tokenizer.json beside a config.json (`config`, None without a readable one: a tokenizer
    alone, or a damaged config, which loading the model says) must be the one the model was saved
    with: the sha256 config.json records (minibert's checkpoints), and in any case exactly as many
    tokens as the model's vocabulary (fewer would leave ids the model can guess with no token to
    print). A CheckpointError otherwise: the pair does not belong together."""
    if config is None:
        return
    recorded = config.get(TOKENIZER_DIGEST)
    if recorded is not None and recorded != hashlib.sha256(text).hexdigest():
        raise CheckpointError(f"{file} is not the tokenizer its model was saved with (its sha256 differs from "
                              f"config.json's {TOKENIZER_DIGEST}): the tokenizer does not belong to its model")
    vocab, size = config.get("vocab_size"), tokenizer.get_vocab_size()
    if isinstance(vocab, int) and size != vocab:
        raise CheckpointError(f"{file} has {size:,} tokens, {'more' if size > vocab else 'fewer'} than its model's "
                              f"vocabulary ({vocab:,}): the tokenizer does not belong to its model")
    pad, pad_id = tokenizer.token_to_id("[PAD]"), config.get("pad_token_id", 0)  # transformers' default: 0
    if pad is not None and type(pad_id) is int and pad != pad_id:
        raise CheckpointError(f"{file} gives [PAD] the id {pad:,}, its model's pad_token_id is {pad_id:,}: the "
                              "tokenizer does not belong to its model")
    token, top = max(tokenizer.get_vocab().items(), key=lambda item: item[1], default=("", -1))
    if isinstance(vocab, int) and top >= vocab:  # as many tokens, but an id past the embedding table
        raise CheckpointError(f"{file} gives {token!r} the id {top:,}, past its model's vocabulary (ids 0 to "
                              f"{vocab - 1:,}): the tokenizer does not belong to its model")
