"""The static-shape pretraining step: the masked positions gathered into a fixed number of slots
per row (BERT's max_predictions_per_seq), no attention mask for blocks without padding, no
value read on the host. It must give the eager reference step's loss and gradients, and
torch.compile must capture it as ONE graph (fullgraph=True) that is reused, not recompiled,
from batch to batch. The GPU speed it is for is measured by bench/gpu.py, not here."""

import pytest
import torch
from torch._dynamo.testing import CompileCounterWithBackend

from torch.optim.adamw import adamw

from minibert import IGNORE_INDEX, BertForMaskedLM, MaskingVocab, mask_batch
from minibert.masking import check_replacement_pool, max_predictions, target_slots

from conftest import TINY_REORDER, assert_close, assert_same_loss_and_grads, perturb_, tiny_config

X = IGNORE_INDEX


def test_target_slots_by_hand():
    """Row 0 has targets at columns 1 and 3 (ids 7, 9), row 1 at column 0 (id 5); 3 slots:
    positions [[1, 3, 0], [0, 0, 0]] and slot labels [[7, 9, -100], [5, -100, -100]] (unused slots
    point at column 0 and are ignored). With 1 slot a row keeps its first target only."""
    labels = torch.tensor([[X, 7, X, 9], [5, X, X, X]])
    positions, slot_labels = target_slots(labels, 3)
    assert positions.tolist() == [[1, 3, 0], [0, 0, 0]]
    assert slot_labels.tolist() == [[7, 9, X], [5, X, X]]
    positions, slot_labels = target_slots(labels, 1)
    assert positions.tolist() == [[1], [0]] and slot_labels.tolist() == [[7], [5]]


def test_max_predictions_is_the_mean_plus_five_binomial_sd():
    """T = 128, p = 0.15: mean 19.2, sd sqrt(19.2 * 0.85) = 4.04, 19.2 + 20.2 = 39.4 -> 40 slots.
    T = 8: 1.2 + 5 * 1.01 = 6.25 -> 7. Never more than T."""
    assert max_predictions(128) == 40
    assert max_predictions(8) == 7
    assert max_predictions(4, 1.0) == 4


def _batch(seed: int, B: int = 4, T: int = 16):
    """Packed-style blocks (every position real, [CLS] ... [SEP]) masked by mask_batch."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 99, (B, T), generator=g)
    ids[:, 0], ids[:, -1] = 2, 3
    special = (ids == 2) | (ids == 3)
    x, y, attn, _ = mask_batch(ids, torch.ones_like(ids), special, 4, list(range(5, 99)), g)
    types = torch.zeros_like(ids)
    types[:, T // 2:] = 1
    return x, attn, types, y


@pytest.mark.parametrize("use_sdpa", [False, True], ids=["manual", "sdpa"])
def test_static_step_equals_the_reference_step(use_sdpa):
    """Dropout 0, the same weights: the slot step without an attention mask against
    masked_only=True with the all-ones mask. Loss and every parameter's gradient agree to float32
    rounding (only the order of the summed terms differs, as the head runs on (B, P) slots against
    (M,) rows and SDPA without a mask may take another kernel: atol TINY_REORDER, conftest)."""
    config = tiny_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, use_sdpa=use_sdpa)
    ref = perturb_(BertForMaskedLM(config)).train()
    static = BertForMaskedLM(config).train()
    static.load_state_dict(ref.state_dict())
    x, attn, types, y = _batch(0)
    positions, slot_labels = target_slots(y, max_predictions(16))
    assert (slot_labels != X).sum() == (y != X).sum()  # no target was dropped
    a = ref(x, attn, types, labels=y, masked_only=True).loss
    b = static(x, None, types, labels=slot_labels, target_positions=positions).loss
    assert_same_loss_and_grads(b, a, static, ref, atol=TINY_REORDER)


def test_the_step_compiles_as_one_graph_and_is_not_recompiled():
    """torch.compile(fullgraph=True) fails on any graph break (a .item(), a boolean index, a
    data-dependent branch). Over three batches of new ids and new masks it captures the model
    once (forward and, through AOTAutograd, backward), and gives the eager step's losses and
    gradients (atol TINY_REORDER, conftest: the graph may order a sum differently; bit for bit here)."""
    torch._dynamo.reset()
    config = tiny_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, use_sdpa=True)
    eager = perturb_(BertForMaskedLM(config)).train()
    model = BertForMaskedLM(config).train()
    model.load_state_dict(eager.state_dict())
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(model, backend=counter, fullgraph=True, dynamic=False)
    for seed in range(3):
        x, _, types, y = _batch(seed)
        positions, slot_labels = target_slots(y, max_predictions(16))
        loss = compiled(x, None, types, labels=slot_labels, target_positions=positions).loss
        expected = eager(x, None, types, labels=slot_labels, target_positions=positions).loss
        assert_same_loss_and_grads(loss, expected, model, eager, atol=TINY_REORDER, what=f", batch {seed}")
    assert counter.frame_count == 1, f"{counter.frame_count} graphs: recompiled"


def _training_step(model: BertForMaskedLM, vocab: MaskingVocab, pool: torch.Tensor, slots: int, lr: float):
    """One whole MLM step as train_mlm.py runs it on a device: mask, gather the targets into
    slots, forward, backward, AdamW update. The masker is the per-step call (check=False, the
    pool checked once by the caller) with torch's global generator (Dynamo cannot trace a
    torch.Generator object). The update calls `adamw`, the function AdamW.step runs, directly:
    AdamW.step itself breaks the graph on purpose (torch/optim/optimizer.py, _use_grad).
    Gradients start as zeros and are zeroed in place, so they never change from None to a tensor."""
    params = list(model.parameters())
    for p in params:
        p.grad = torch.zeros_like(p)
    exp_avgs, exp_avg_sqs = [torch.zeros_like(p) for p in params], [torch.zeros_like(p) for p in params]
    steps = [torch.zeros(()) for _ in params]

    def step(ids, types):                                                    # (B, T) each
        x, y, _, _ = mask_batch(ids, torch.ones_like(ids), vocab.special_mask(ids), vocab.mask_id, pool,
                                None, check=False)
        positions, slot_labels = target_slots(y, slots)                      # (B, P) each
        loss = model(x, None, types, labels=slot_labels, target_positions=positions).loss
        loss.backward()
        with torch.no_grad():
            adamw(params, [p.grad for p in params], exp_avgs, exp_avg_sqs, [], steps, foreach=False,
                  amsgrad=False, beta1=0.9, beta2=0.999, lr=lr, weight_decay=0.01, eps=1e-8, maximize=False)
            for p in params:
                p.grad.zero_()
        return loss.detach(), x

    return step


def test_masking_and_the_whole_training_step_compile_as_one_graph():
    """mask_batch(check=False), target_slots, the forward, the backward and the AdamW update of
    a tiny model (2 layers, 32 wide, B = 4, T = 16) captured by torch.compile(fullgraph=True,
    dynamic=False) as ONE graph, reused over 4 batches of new ids: a value read on the host
    anywhere (an .any() branch, a nonzero, a .tolist(), an .item()) is a graph break and fails it;
    a second graph would be a recompilation. The compiled step draws the same masks as the eager
    one from the same global seed (aot_eager runs the graph's random ops eagerly), so the masked
    ids are equal and the losses agree to float32 rounding: the graph may sum in another order than
    eager, so TINY_REORDER (conftest: a loss moves by <= 3.6e-4; the weights the earlier updates
    left, within 1e-6 of each other (below), add <= 1e-6 x sum |dL/dw| = 1e-6 x 230 = 2.3e-4: 5.9e-4
    in all; measured 0 here, 1.4e-6 once with one thread). After the updates every
    parameter agrees to 1e-6: the two runs got the same gradients (bit for bit here, with one thread
    or two) and differ in AdamW's own roundings only, each run rounding each weight once a step
    (<= u |w|, |w| <= 1.3) and the ~1e-3 step in a few roundings: 4 x (2 x 6.0e-8 x 1.3 + 10 x 6.0e-8
    x 1e-3) = 6.3e-7. Not so the attention's key biases: their true gradient is 0 (a shift added to
    every key score of a query cancels in the softmax), so what each run holds there is rounding
    noise (~1e-9), which Adam scales up to steps of ~lr, differently in each run; they change no
    output."""
    torch._dynamo.reset()
    config = tiny_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, use_sdpa=True)
    model = perturb_(BertForMaskedLM(config)).train()
    twin = BertForMaskedLM(config).train()
    twin.load_state_dict(model.state_dict())
    vocab = MaskingVocab(mask_id=4, special_ids=(0, 1, 2, 3, 4), ordinary_token_ids=tuple(range(5, 99)))
    pool = check_replacement_pool(vocab.ordinary_tensor, vocab.special_ids, vocab.mask_id)  # once per run
    counter = CompileCounterWithBackend("aot_eager")
    with torch._dynamo.config.patch(trace_autograd_ops=True):  # trace loss.backward() into the graph
        compiled = torch.compile(_training_step(model, vocab, pool, max_predictions(16), 1e-3),
                                 backend=counter, fullgraph=True, dynamic=False)
        eager = _training_step(twin, vocab, pool, max_predictions(16), 1e-3)
        for seed in range(4):
            g = torch.Generator().manual_seed(seed)
            ids = torch.randint(5, 99, (4, 16), generator=g)                 # (B, T) packed-style blocks
            ids[:, 0], ids[:, -1] = 2, 3
            types = torch.zeros_like(ids)
            torch.manual_seed(100 + seed)
            loss, x = compiled(ids, types)
            torch.manual_seed(100 + seed)
            expected, expected_x = eager(ids, types)
            assert torch.equal(x, expected_x), f"batch {seed}: other masks"
            assert_close(loss, expected, atol=TINY_REORDER, what=f"loss, batch {seed}")
    assert counter.frame_count == 1, f"{counter.frame_count} graphs: recompiled"
    for (name, p), q in zip(twin.named_parameters(), model.parameters(), strict=True):
        if not name.endswith("key.bias"):
            assert_close(q, p, atol=1e-6, what=name)


@pytest.mark.parametrize("objective", ["mlm", "mlm+nsp"])
def test_train_mlm_compiled_follows_the_eager_run(tmp_path, corpus, documents, objective):
    """train_mlm.py --compile (inductor on this CPU; the slots step, one graph) against the eager
    run with the same seed, dropout 0: the same masks, so the logged training losses of 6 steps
    agree to 1e-4 (compiled kernels sum in another order), and so does the validation loss. The
    1e-4: a logit ends about 11 chained sums of at most 160 terms; reordered, each moves it by
    ~sqrt(160) u relative, of random sign (the worst case, 160 u each, bounds nothing once Adam has
    stepped on gradients that differ: it can turn a near-0 gradient's rounding into a step of lr):
    sqrt(11) x 12.6 x 6.0e-8 = 2.5e-6, 7.5e-6 on |z| <~ 3; a
    target's loss twice that, its mean over ~77 targets sd 1.7e-6, 4 sd 7e-6; the 5 updates'
    directions are off by as much relative, on a loss that falls 0.4 nats: 1e-6 more (measured: 1
    unit in the last place, 4.8e-7). Other masks or a step that updates nothing are off by 0.05; with
    NSP (on conftest's `documents`, from step 4, after the short phase) the next-sentence losses too.
    And --compile did compile: TorchDynamo turned at least one new graph into code during the
    compiled run and none during the eager one (torch._dynamo's unique_graphs counter), so the
    comparison is not eager against eager."""
    import json

    from torch._dynamo.utils import counters

    import train_mlm

    def run(out, *extra):
        train_mlm.main(["--corpus", str(documents if objective == "mlm+nsp" else corpus), "--data-root",
                        str(tmp_path / "cache"), "--out", str(out), "--layers", "1", "--hidden", "32", "--heads", "2", "--vocab-size", "160", "--seq-len", "32",
                        "--batch-size", "8", "--max-steps", "6", "--eval-every", "6", "--log-every", "1",
                        "--dropout", "0", "--no-progress", "--objective", objective, *extra])
        return [json.loads(line) for line in open(out / "metrics.jsonl")]

    graphs = counters["stats"]["unique_graphs"]
    eager = run(tmp_path / "eager")
    assert counters["stats"]["unique_graphs"] == graphs, "the eager run compiled a graph"
    compiled = run(tmp_path / "compiled", "--compile")
    assert counters["stats"]["unique_graphs"] > graphs, "--compile compiled nothing"
    for a, b in zip(eager, compiled, strict=True):
        for key in ("train_loss", "valid_loss", "train_nsp_loss", "valid_nsp_loss"):
            if key in a:
                assert abs(a[key] - b[key]) < 1e-4, (a, b)


def test_the_gpu_bench_runs_its_code_paths_on_a_cpu(capsys):
    """python -m bench.gpu --device cpu --smoke: every row (minibert and transformers, eager and
    compiled, the compiled minibert step with fullgraph=True) runs on a tiny model and reports a
    positive speed. It measures nothing; it keeps the GPU script from rotting between GPU runs."""
    from bench import gpu

    report = gpu.main(["--device", "cpu", "--smoke"])
    rows = report["smoke"]["rows"]
    assert sorted(rows) == ["minibert compiled", "minibert eager", "transformers compiled", "transformers eager"]
    assert all(r["tokens_per_s"] > 0 and r["median_s"] > 0 for r in rows.values())
    assert '"bench": "gpu"' in capsys.readouterr().out
