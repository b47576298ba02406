"""flce.offload (checkpointing with block inputs in pinned host memory) and flce.tiled_mlp, against
plain autograd: equal losses and gradients (bitwise where the arithmetic is the same), the pinned
pool reused across steps, and on CUDA the block inputs off the device between forward and backward."""

import gc

import pytest
import torch

import flce
from compile_drift import compile_drift, within_compile_drift

CUDA = torch.cuda.is_available()
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not CUDA, reason="no CUDA device"))]
cuda_only = pytest.mark.skipif(not CUDA, reason="no CUDA device")


def blocks_and_input(device, dtype=torch.float32, width=16, layers=3, dropout=0.1, seed=0):
    torch.manual_seed(seed)
    blocks = torch.nn.ModuleList([
        torch.nn.Sequential(torch.nn.Linear(width, 2 * width), torch.nn.GELU(), torch.nn.Dropout(dropout),
                            torch.nn.Linear(2 * width, width)) for _ in range(layers)]).to(device, dtype)
    x = torch.randn(4, 7, width, device=device, dtype=dtype, requires_grad=True)
    return blocks, x


def step(blocks, x, seed=1):
    for p in blocks.parameters():
        p.grad = None
    x.grad = None
    torch.manual_seed(seed)
    h = x
    for b in blocks:
        h = h + b(h)
    loss = h.square().mean()
    loss.backward()
    grads = [p.grad.clone() for p in blocks.parameters()] + ([x.grad.clone()] if x.requires_grad else [])
    return loss.detach(), grads


def bitwise(a, b):
    return all(torch.equal(u, v) for u, v in zip(a, b)) and len(a) == len(b)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("offload", [True, False])
def test_checkpointed_blocks_equal_plain_autograd_bitwise_dropout_included(device, offload):
    blocks, x = blocks_and_input(device)
    loss0, grads0 = step(blocks, x)
    off = flce.offload.wrap_blocks(blocks, offload=offload)
    loss1, grads1 = step(blocks, x)
    assert torch.equal(loss0, loss1) and bitwise(grads0, grads1)
    s = off.stats()
    assert s["in_flight"] == 0
    assert s["offloaded"] == (3 if offload else 0) and s["prefetched"] == (2 if offload else 0)
    flce.offload.unwrap_blocks(blocks)
    loss2, grads2 = step(blocks, x)
    assert torch.equal(loss0, loss2) and bitwise(grads0, grads2)


@pytest.mark.parametrize("device", DEVICES)
def test_pinned_pool_is_allocated_once_and_reused(device):
    blocks, x = blocks_and_input(device)
    off = flce.offload.wrap_blocks(blocks)
    step(blocks, x)
    first = off.stats()
    for _ in range(3):
        step(blocks, x)
    s = off.stats()
    assert s["pinned_bytes"] == first["pinned_bytes"] == 3 * x.numel() * x.element_size()
    assert s["pool_buffers"] == 3 and s["in_flight"] == 0 and s["offloaded"] == 12


def test_a_graph_dropped_without_backward_does_not_pile_up():
    blocks, x = blocks_and_input("cpu")
    off = flce.offload.wrap_blocks(blocks)
    for _ in range(3):
        h = x
        for b in blocks:
            h = h + b(h)
        del h
        gc.collect()
    step(blocks, x)
    assert off.stats()["in_flight"] == 0


@pytest.mark.parametrize("device", DEVICES)
def test_frozen_input_still_trains_the_block_weights(device):
    # LoRA-style: the block input does not require grad (frozen embeddings); the weights must
    # still get their gradients from the recompute
    blocks, x = blocks_and_input(device, dropout=0.0)
    x = x.detach()
    loss0, grads0 = step(blocks, x)
    flce.offload.wrap_blocks(blocks)
    loss1, grads1 = step(blocks, x)
    assert torch.equal(loss0, loss1) and bitwise(grads0, grads1) and len(grads1) == 12


def test_without_gradients_nothing_is_saved():
    blocks, x = blocks_and_input("cpu")
    off = flce.offload.wrap_blocks(blocks)
    with torch.no_grad():
        h = x
        for b in blocks:
            h = h + b(h)
    assert off.stats()["offloaded"] == 0


def test_checkpoint_needs_a_floating_point_input():
    off = flce.offload.Offloader()
    anchor_user = torch.zeros(3, requires_grad=True)
    with pytest.raises(TypeError, match="floating-point tensor argument"):
        flce.offload.checkpoint(lambda i: anchor_user * i, torch.arange(3), offloader=off)


def test_under_torch_compile_the_checkpoint_runs_eagerly_with_the_same_results():
    blocks, x = blocks_and_input("cpu", dropout=0.0)
    loss0, grads0 = step(blocks, x)
    flce.offload.wrap_blocks(blocks)

    def run(h):
        for b in blocks:
            h = h + b(h)
        return h.square().mean()

    compiled = torch.compile(run, backend="eager")
    for p in blocks.parameters():
        p.grad = None
    x.grad = None
    loss1 = compiled(x)
    loss1.backward()
    grads1 = [p.grad for p in blocks.parameters()] + [x.grad]
    assert torch.equal(loss0, loss1.detach()) and bitwise(grads0, grads1)


@pytest.mark.parametrize("tiles", [1, 2, 3, 5, 64])
@pytest.mark.parametrize("input_grad", [True, False])
def test_tiled_mlp_equals_the_mlp(tiles, input_grad):
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 24), torch.nn.SiLU(), torch.nn.Linear(24, 8)).double()
    x = torch.randn(3, 11, 8, dtype=torch.float64, requires_grad=input_grad)  # 33 tokens: uneven tiles
    g = torch.randn(3, 11, 8, dtype=torch.float64)
    y0 = mlp(x)
    y0.backward(g)
    ref = [p.grad.clone() for p in mlp.parameters()] + ([x.grad.clone()] if input_grad else [])
    mlp.zero_grad(set_to_none=True)
    x.grad = None
    y1 = flce.tiled_mlp.tiled_mlp(mlp, x, tiles)
    # rows are independent, but a GEMM over fewer rows may block (and round) differently
    torch.testing.assert_close(y0.detach(), y1.detach(), rtol=1e-13, atol=1e-15)
    y1.backward(g)
    got = [p.grad for p in mlp.parameters()] + ([x.grad] if input_grad else [])
    for a, b in zip(ref, got):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)  # weight grads: sums over tiles


def test_tiled_function_with_frozen_weights_and_no_input_grad():
    """A tiled function that nothing differentiates through (a LoRA model's first RMSNorm: frozen
    weight, input from frozen embeddings) while the rest of the graph trains: its backward, called
    through the anchor, has nothing to do (Gemma-2-2B LoRA with norm_tiles failed here on the H200,
    benchmarks/results/2026-12-01-h200-planner-calibration/norm-tiles-off/)."""
    torch.manual_seed(0)
    norm = torch.nn.LayerNorm(8).double().requires_grad_(False)
    head = torch.nn.Linear(8, 3).double()
    x = torch.randn(3, 11, 8, dtype=torch.float64)
    head(norm(x)).square().sum().backward()
    ref = [p.grad.clone() for p in head.parameters()]
    head.zero_grad(set_to_none=True)
    head(flce.tiled_mlp.tiled_mlp(norm, x, 3)).square().sum().backward()
    for a, b in zip(ref, [p.grad for p in head.parameters()]):
        torch.testing.assert_close(a, b, rtol=1e-13, atol=1e-15)
    assert all(p.grad is None for p in norm.parameters())


def test_tiled_mlp_rejects_zero_tiles():
    with pytest.raises(ValueError, match="tiles"):
        flce.tiled_mlp.tiled_mlp(torch.nn.Identity(), torch.zeros(2, 2), 0)


def tiny_llama(seed=0):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(cfg).double()
    model.train()
    return model


def model_step(model, ids):
    model.zero_grad(set_to_none=True)
    out = model(input_ids=ids, labels=ids)
    out.loss.backward()
    return out.loss.detach(), [p.grad.clone() for p in model.parameters()]


def test_hf_patch_with_checkpoint_offload_and_tiled_mlps():
    model = tiny_llama()
    ids = torch.randint(0, 300, (2, 33))
    loss0, grads0 = model_step(flce.patch(model), ids)
    flce.unpatch(model)
    # checkpointing + offload through transformers' checkpointing hook: bitwise
    loss1, grads1 = model_step(flce.patch(model, checkpoint=True, offload=True), ids)
    assert torch.equal(loss0, loss1) and bitwise(grads0, grads1)
    # the 3 layers' inputs and the final norm's; the norm's input prefetched from the loss's hook,
    # each layer's by the backward of the one after it
    s = model._flce_offloader.stats()
    assert (s["offloaded"], s["prefetched"], s["in_flight"]) == (4, 4, 0), s
    assert getattr(model.model.norm, "_flce_offload_forward", None) is not None
    flce.unpatch(model)
    assert getattr(model.model.norm, "_flce_offload_forward", None) is None
    # checkpointing alone: the same, nothing offloaded
    loss4, grads4 = model_step(flce.patch(model, checkpoint=True), ids)
    assert torch.equal(loss0, loss4) and bitwise(grads0, grads4)
    assert model._flce_offloader.stats()["offloaded"] == 0
    flce.unpatch(model)
    # + MLPs in 3 token tiles: the weight gradients are sums over tiles
    loss2, grads2 = model_step(flce.patch(model, checkpoint=True, offload=True, mlp_tiles=3), ids)
    torch.testing.assert_close(loss0, loss2, rtol=1e-13, atol=0)
    for a, b in zip(grads0, grads2):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-15)
    flce.unpatch(model)
    # unpatched: transformers' own path again, nothing of ours left on the layers
    for layer in model.model.layers:
        assert "_gradient_checkpointing_func" not in layer.__dict__ and "gradient_checkpointing" not in layer.__dict__
        assert getattr(layer.mlp, "_flce_tiled_forward", None) is None
    loss3, grads3 = model_step(flce.patch(model), ids)
    assert torch.equal(loss0, loss3) and bitwise(grads0, grads3)
    with pytest.raises(ValueError, match="mlp_tiles"):
        flce.patch(flce.unpatch(model), mlp_tiles=0)


def test_hf_patch_with_offload_under_torch_compile_is_bitwise_equal():
    # the checkpoints and the loss's prefetch hook run outside the compiled graph (graph breaks);
    # bitwise, except in the gradients that compiling the unpatched model already moves by ulps
    # (compile_drift.py)
    model = tiny_llama()
    ids = torch.randint(0, 300, (2, 33))
    drift = compile_drift(model, lambda m: model_step(m, ids))
    flce.patch(model, checkpoint=True, offload=True)
    loss0, grads0 = model_step(model, ids)
    loss1, grads1 = model_step(torch.compile(model, backend="eager"), ids)
    assert torch.equal(loss0, loss1)
    assert within_compile_drift(grads0, grads1, drift) is None, within_compile_drift(grads0, grads1, drift)
    s = model._flce_offloader.stats()
    assert (s["offloaded"], s["prefetched"], s["in_flight"]) == (8, 8, 0), s
    flce.unpatch(model)


def tiny_gemma2(seed=0):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.Gemma2Config(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                    num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                    max_position_embeddings=256, attn_implementation="eager")
    torch.manual_seed(seed)
    model = transformers.Gemma2ForCausalLM(cfg).double()
    model.train()
    return model


@pytest.mark.parametrize("build", [tiny_llama, tiny_gemma2], ids=["llama", "gemma2"])
def test_hf_patch_with_norms_in_token_tiles(build):
    """RMSNorms in token tiles (with checkpointing, offload and tiled MLPs): the same loss and
    gradients to rounding (each row's norm is its own; the norm weights' gradients become sums
    over tiles), every norm of every layer wrapped, all unwrapped by unpatch."""
    model = build()
    ids = torch.randint(0, 300, (2, 33))
    loss0, grads0 = model_step(flce.patch(model, checkpoint=True, offload=True), ids)
    flce.unpatch(model)
    patched = flce.patch(model, checkpoint=True, offload=True, mlp_tiles=2, norm_tiles=3)
    norms = [m for layer in model.model.layers for m in layer.modules() if type(m).__name__.endswith("RMSNorm")]
    assert len(norms) == len(model.model.layers) * (4 if build is tiny_gemma2 else 2)
    assert all(getattr(m, "_flce_tiled_forward", None) is not None for m in norms)
    loss1, grads1 = model_step(patched, ids)
    torch.testing.assert_close(loss0, loss1, rtol=1e-13, atol=0)
    # Gemma 2's norm computes in float32 whatever the model's dtype (x.float()): its weight
    # gradients, summed over tiles, differ at f32's rounding; Llama's stay at f64's
    rtol, atol = (1e-5, 1e-9) if build is tiny_gemma2 else (1e-10, 1e-15)
    for a, b in zip(grads0, grads1):
        torch.testing.assert_close(a, b, rtol=rtol, atol=atol)
    flce.unpatch(model)
    assert all(getattr(m, "_flce_tiled_forward", None) is None for m in norms)
    with pytest.raises(ValueError, match="norm_tiles"):
        flce.patch(model, norm_tiles=0)


def test_hf_patch_with_norm_tiles_when_only_the_mlps_train():
    """LoRA-like training (embeddings and norms frozen): the first layer's input norm gets no
    gradient from anything, its tiled backward must do nothing (it raised before), and the
    trained weights' gradients equal the untiled run's."""
    model = tiny_gemma2()
    for name, p in model.named_parameters():
        p.requires_grad_(".mlp." in name)
    ids = torch.randint(0, 300, (2, 33))

    def trained_step(m):
        model.zero_grad(set_to_none=True)
        out = m(input_ids=ids, labels=ids)
        out.loss.backward()
        return out.loss.detach(), [p.grad.clone() for p in model.parameters() if p.requires_grad]

    loss0, grads0 = trained_step(flce.patch(model, checkpoint=True, offload=True))
    flce.unpatch(model)
    loss1, grads1 = trained_step(flce.patch(model, checkpoint=True, offload=True, mlp_tiles=2, norm_tiles=3))
    flce.unpatch(model)
    torch.testing.assert_close(loss0, loss1, rtol=1e-13, atol=0)
    for a, b in zip(grads0, grads1):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-15)


class _Residual(torch.nn.Module):
    """h + tanh(W·h + b): a block whose only saved activation, checkpointed, is its input."""

    def __init__(self, width):
        super().__init__()
        self.linear = torch.nn.Linear(width, width)

    def forward(self, h):
        return h + torch.tanh(self.linear(h))


@cuda_only
def test_block_inputs_leave_the_device_between_forward_and_backward():
    # 8 blocks over a 64 MiB activation: checkpointing alone holds 8 inputs (512 MiB) until the
    # backward; with offload the device keeps at most the copies in flight (and the last output,
    # which the loss saves)
    width, tokens, layers = 2048, 8192, 8
    torch.manual_seed(0)
    blocks = torch.nn.ModuleList([_Residual(width) for _ in range(layers)]).cuda()
    x = torch.randn(tokens, width, device="cuda", requires_grad=True)
    held = {}
    for offload in (False, True):
        off = flce.offload.wrap_blocks(blocks, offload=offload)
        for p in blocks.parameters():
            p.grad = None
        x.grad = None
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        h = x
        for b in blocks:
            h = b(h)
        loss = h.square().mean()
        torch.cuda.synchronize()
        torch.empty(1, device="cuda")  # the allocator settles the blocks its side-stream events freed
        held[offload] = torch.cuda.memory_allocated() - before
        loss.backward()
        torch.cuda.synchronize()
        held[(offload, "grads")] = [p.grad.clone() for p in blocks.parameters()] + [x.grad.clone()]
        assert off.stats()["in_flight"] == 0
        flce.offload.unwrap_blocks(blocks)
    act = tokens * width * 4
    assert held[False] >= layers * act  # every block input kept
    assert held[True] <= 3 * act, f"{held[True] / 2**20:.0f} MiB held with offload"
    assert bitwise(held[(False, "grads")], held[(True, "grads")])
