"""BertConfig: the hyper-parameters of a BERT, under HuggingFace's field names.

The fields and their defaults are those of bert-base-uncased, so a `config.json` written
by `transformers` reads back into the same model and ours loads in `transformers`.
`id2label` is HF's label table of a classification checkpoint (its length is the number of
labels). Two fields are minibert's own run-time switches (`use_sdpa`, `unpad`): they pick a
code path, not a model, so they are never written into config.json, and a config.json that
has them (older minibert checkpoints) loads with them ignored.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import warnings
from dataclasses import dataclass

import torch.nn.functional as F

from .files import NO_BOM, UTF8_BOM, parse_json, read_bytes, write_file
from .text import shows_nothing

# Keys that `transformers` writes into config.json as bookkeeping or for model families
# other than BERT. They do not change what a BERT computes (tests/test_config.py shows it for
# each, in transformers itself), so reading them is silent.
# transformers' encoder families whose class names a config may carry beside model_type "bert" (edited, or
# converted by hand): their weights differ from BERT's in what the names do not say (RoBERTa's positions start
# at 2, ALBERT shares its layers, ...)
_OTHER_FAMILIES = ("Roberta", "XLM", "Camembert", "Electra", "Albert", "DistilBert", "Deberta", "MPNet", "Longformer",
                   "Ernie", "Nezha", "MobileBert", "MegatronBert", "ConvBert", "SqueezeBert", "RoFormer", "Funnel",
                   "Data2VecText", "Luke")

_HF_BOOKKEEPING_KEYS = frozenset({
    "architectures", "model_type", "transformers_version", "dtype", "torch_dtype",
    "use_cache", "bos_token_id", "eos_token_id", "label2id", "gradient_checkpointing", "output_past",
    "directionality", "pooler_fc_size", "pooler_num_attention_heads",
    "pooler_num_fc_layers", "pooler_size_per_head", "pooler_type",
    "_name_or_path", "finetuning_task", "tokenizer_class",
})

# Keys whose other values change what the model computes, which minibert does not implement:
# key -> (the values minibert computes as HF does, what another value would mean). Refused.
_HF_MATH_KEYS = {
    "is_decoder": ({False}, "causal (decoder) attention"),
    "add_cross_attention": ({False}, "cross-attention layers"),
    "tie_word_embeddings": ({True}, "an MLM decoder untied from the word embeddings"),
    "problem_type": ({None, "single_label_classification"}, "a loss and prediction other than single-label softmax"),
}

# minibert's own key in a checkpoint's config.json: the sha256 of the tokenizer.json saved with
# the model (checked by load_tokenizer). `transformers` keeps unknown keys as attributes, unused.
TOKENIZER_DIGEST = "tokenizer_sha256"

# Run-time switches: fields of BertConfig that choose a code path and are never saved.
RUNTIME_SWITCHES = ("use_sdpa", "unpad")

# hidden_act (HF's names) -> the function the model applies.
ACTIVATIONS = {
    "gelu": F.gelu,  # exact: x * Phi(x) = x/2 * (1 + erf(x / sqrt 2)), BERT's and HF's
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
    "silu": F.silu,
}


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _label_table(id2label) -> dict[int, str]:
    """{0: label, 1: label, ...} from a dict keyed by ids or their strings (config.json's "0")."""
    if not isinstance(id2label, dict):
        raise ValueError(f"BertConfig.id2label must be an object {{id: label}}, got a {type(id2label).__name__}")
    try:
        table = {int(k): str(v) for k, v in id2label.items()}
    except (TypeError, ValueError):
        table = {}
    if sorted(table) != list(range(len(id2label))):
        raise ValueError(f"BertConfig.id2label keys must be 0..N-1, got {sorted(map(str, id2label))}")
    blank = [k for k, v in id2label.items() if v is None or shows_nothing(str(v)) is not None]
    if blank:  # predict would print it as the label
        raise ValueError(f"BertConfig.id2label gives id {blank[0]} no label ({ascii(id2label[blank[0]])})")
    if len(set(table.values())) < len(table):
        twice = next(v for v in table.values() if list(table.values()).count(v) > 1)
        raise ValueError(f"BertConfig.id2label names two classes {twice!r}: each class needs its own label")
    return table


def _check_label_counts(d: dict) -> None:
    """HF's num_labels beside id2label must be its length (a ValueError otherwise); without
    id2label it must be a count of classes (from_dict then names them LABEL_0, LABEL_1, ..., as HF does).
    id2label names the classes (a save writes label2id from it); label2id must be its inverse, or
    HF's default table (LABEL_0: 0, ...) left behind when id2label was renamed."""
    count, table = d.get("num_labels"), d.get("id2label")
    if "num_labels" in d and (type(count) is not int or count < 1):
        raise ValueError(f"num_labels must be a count of classes, got {count!r}")
    if not isinstance(table, dict):
        return
    if "num_labels" in d and count != len(table):
        raise ValueError(f"num_labels {count} disagrees with id2label's {len(table)} labels")
    ids = {str(label): str(i) for i, label in table.items()}
    inverse = d.get("label2id")
    if inverse is None:
        return
    given = {str(label): str(i) for label, i in inverse.items()} if isinstance(inverse, dict) else {}
    if given in (ids, {f"LABEL_{i}": str(i) for i in table}):
        return
    contradicted = [(label, i) for label, i in given.items() if label in ids and i != ids[label]]
    if contradicted:
        label, i = contradicted[0]
        raise ValueError(f"label2id gives {label!r} the id {inverse[label]!r}, and id2label gives it {ids[label]}")
    raise ValueError(f"label2id ({str(inverse)[:60]}) is neither the inverse of id2label ({str(table)[:60]}) nor HF's "
                     "default LABEL_0, LABEL_1, ...")


@dataclass
class BertConfig:
    vocab_size: int = 30522
    hidden_size: int = 768              # C
    num_hidden_layers: int = 12         # L
    num_attention_heads: int = 12       # H; head size D = C / H
    intermediate_size: int = 3072       # feed-forward width, 4C in every preset
    hidden_act: str = "gelu"            # exact erf GELU, as HF's BERT
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2            # segments A and B
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    position_embedding_type: str = "absolute"
    classifier_dropout: float | None = None  # None: use hidden_dropout_prob (HF's rule)
    id2label: dict[int, str] | None = None
    use_sdpa: bool = False              # fast path: F.scaled_dot_product_attention
    unpad: bool = False                 # fast path: token-wise layers on the real tokens only

    def __post_init__(self):
        for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                     "intermediate_size", "max_position_embeddings", "type_vocab_size"):
            value = getattr(self, name)
            if not (_is_int(value) and value > 0):
                raise ValueError(f"BertConfig.{name} must be a positive integer, got {value!r}")
        if self.hidden_size % self.num_attention_heads != 0:
            raise ValueError(
                f"BertConfig.hidden_size ({self.hidden_size}) must be divisible by "
                f"num_attention_heads ({self.num_attention_heads})")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout"):
            value = getattr(self, name)
            if value is None and name == "classifier_dropout":
                continue  # None: use hidden_dropout_prob
            if not (_is_number(value) and 0.0 <= value < 1.0):
                raise ValueError(f"BertConfig.{name} must be a number in [0, 1), got {value!r}")
        for name in ("initializer_range", "layer_norm_eps"):
            value = getattr(self, name)
            if not (_is_number(value) and 0 < value < math.inf):
                raise ValueError(f"BertConfig.{name} must be a positive number, got {value!r}")
        if not (_is_int(self.pad_token_id) and 0 <= self.pad_token_id < self.vocab_size):
            raise ValueError(
                f"BertConfig.pad_token_id ({self.pad_token_id!r}) must be a token id below "
                f"vocab_size ({self.vocab_size})")
        if not isinstance(self.hidden_act, str) or self.hidden_act not in ACTIVATIONS:
            raise ValueError(
                f"BertConfig.hidden_act {self.hidden_act!r} is not supported; "
                f"choose one of {tuple(ACTIVATIONS)}")
        if self.position_embedding_type != "absolute":
            raise ValueError(
                f"BertConfig.position_embedding_type {self.position_embedding_type!r} is not "
                "supported; minibert implements BERT's learned absolute positions only")
        if self.id2label is not None:
            self.id2label = _label_table(self.id2label)

    @property
    def head_size(self) -> int:  # D
        return self.hidden_size // self.num_attention_heads

    # ---- presets ---------------------------------------------------------------------

    @classmethod
    def from_preset(cls, name: str, **overrides) -> "BertConfig":
        """One of the well-known BERT sizes (Turc et al. 2019 for the small ones)."""
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
        layers, hidden, heads = PRESETS[name]
        sizes = dict(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
                     intermediate_size=4 * hidden)
        return cls(**{**sizes, **overrides})

    # ---- HF config.json ----------------------------------------------------------------

    def to_dict(self) -> dict:
        """HF's config.json fields; the run-time switches are left out."""
        d = dataclasses.asdict(self)
        for name in RUNTIME_SWITCHES:
            del d[name]
        d["model_type"] = "bert"
        if self.id2label is None:
            del d["id2label"]
        else:
            d["id2label"] = {str(k): v for k, v in self.id2label.items()}
            d["label2id"] = {v: k for k, v in self.id2label.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "BertConfig":
        """Build from a HF-style dict. Unknown keys are ignored with ONE warning naming them;
        saved run-time switches are ignored silently (the caller chooses the code path).
        Anything but a dict, a dict for another `model_type` (or, without one, whose `architectures`
        name another class than a Bert...), or a key of _HF_MATH_KEYS set to a
        value minibert does not compute (is_decoder true, ...) is a ValueError."""
        if not isinstance(d, dict):
            raise ValueError(f"a config must be a JSON object {{field: value}}, got a {type(d).__name__}")
        if d.get("model_type", "bert") != "bert":  # HF's model types are lower-case keys: "BERT" names none
            raise ValueError(f"model_type is {d['model_type']!r}, not 'bert': not a BERT's config")
        architectures = d.get("architectures")
        if isinstance(architectures, (list, str)):  # the classes name the family: without model_type, any
            names = [a for a in ([architectures] if isinstance(architectures, str) else architectures)
                     if isinstance(a, str) and not a.startswith("Bert")]  # other than Bert...; beside it, a known one
            others = names if "model_type" not in d else [a for a in names if a.startswith(_OTHER_FAMILIES)]
            if others:
                raise ValueError(f"the config describes a {others[0]!r} model, not a BERT")
        for key, (allowed, meaning) in _HF_MATH_KEYS.items():
            value = d.get(key)
            if key in d and (not isinstance(value, (bool, str, type(None))) or value not in allowed):
                raise ValueError(f"the config sets {key} = {value!r} ({meaning}), which minibert does not implement")
        if d.get("pruned_heads") not in (None, {}):  # HF's {layer: [heads]}: those heads' rows cut from Q, K, V
            raise ValueError(f"the config sets pruned_heads = {str(d['pruned_heads'])[:60]} (attention heads removed "
                             "from their layers), which minibert does not implement")
        _check_label_counts(d)
        stored = next((d[k] for k in ("dtype", "torch_dtype") if d.get(k) not in (None, "float32")), None)
        if stored is not None:  # how the weights were stored; transformers 5 also computes in it by default
            warnings.warn(f"BertConfig: config.json's dtype is {str(stored)[:20]!r}; minibert computes in float32 "
                          f"(transformers 5 computes in the config's dtype unless given dtype=torch.float32, so its "
                          "numbers differ from these by that dtype's rounding)", stacklevel=2)
        if d.get("id2label") is None and "num_labels" in d:  # HF's classes without names: LABEL_0, LABEL_1, ...
            d = {**d, "id2label": {i: f"LABEL_{i}" for i in range(d["num_labels"])}}
        names = {f.name for f in dataclasses.fields(cls)} - set(RUNTIME_SWITCHES)
        unknown = sorted(k for k in d if k not in names and k not in _HF_BOOKKEEPING_KEYS and k not in _HF_MATH_KEYS
                         and k not in RUNTIME_SWITCHES and k not in (TOKENIZER_DIGEST, "num_labels", "pruned_heads"))
        if unknown:
            warnings.warn(f"BertConfig: ignoring unknown config keys {unknown}", stacklevel=2)
        return cls(**{k: v for k, v in d.items() if k in names})

    def save(self, path: str | os.PathLike, architectures: list[str] | None = None,
             tokenizer_sha256: str | None = None) -> None:
        """Write HF's config.json (to `path`, a file name), with the digest of the tokenizer saved
        beside it; through files.write_file, so never seen half-written."""
        d = self.to_dict()
        if architectures:
            d["architectures"] = architectures
        if tokenizer_sha256:
            d[TOKENIZER_DIGEST] = tokenizer_sha256
        write_file(os.fspath(path), (json.dumps(d, indent=2, sort_keys=True) + "\n").encode("utf-8"))

    @classmethod
    def load(cls, path: str | os.PathLike) -> "BertConfig":
        """Read a config.json file, or the config.json inside a checkpoint folder. Every
        problem with the file is one ValueError line that names it (FileNotFoundError if absent)."""
        return cls.load_with_architectures(path)[0]

    @classmethod
    def load_with_architectures(cls, path: str | os.PathLike) -> tuple["BertConfig", list[str]]:
        """`load`, and the model classes the file names in HF's `architectures` field ([] if none)."""
        if os.path.isdir(path):
            path = os.path.join(path, "config.json")
        try:
            raw = read_bytes(path)
            d = parse_json(raw)
        except FileNotFoundError:
            raise FileNotFoundError(f"no config.json at {path}") from None
        except OSError as e:  # a folder, a named pipe ... (files.read_bytes), or unreadable
            raise ValueError(f"cannot read {path}: it {e.strerror}") from None
        except ValueError as e:
            raise ValueError(f"{path} is not valid JSON: {e}") from None
        if raw.startswith(UTF8_BOM):  # json.loads of bytes passes over it; transformers' reading stops at it
            raise ValueError(f"{path} {NO_BOM}")
        try:
            config = cls.from_dict(d)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None
        saved = d.get("architectures")
        return config, [a for a in saved if isinstance(a, str)] if isinstance(saved, list) else []


# name -> (num_hidden_layers, hidden_size, num_attention_heads); intermediate = 4 * hidden.
PRESETS: dict[str, tuple[int, int, int]] = {
    "bert-tiny": (2, 128, 2),
    "bert-mini": (4, 256, 4),
    "bert-small": (4, 512, 8),
    "bert-medium": (8, 512, 8),
    "bert-base": (12, 768, 12),
}

__all__ = ["ACTIVATIONS", "BertConfig", "PRESETS", "TOKENIZER_DIGEST"]
