"""flce.weights (frozen block weights in pinned host memory, each block's on the device only while
it runs) against the resident model: bitwise-equal losses and gradients, placeholders between
calls, the weights back exactly on close / unpatch, and on CUDA the device memory it frees."""

import pytest
import torch

import flce
from compile_drift import compile_drift, within_compile_drift

CUDA = torch.cuda.is_available()
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not CUDA, reason="no CUDA device"))]


def frozen_blocks(device, width=16, layers=4, seed=0):
    """Blocks whose linear weights are frozen and whose second linear's bias trains (LoRA-like:
    frozen base weights, a few trainable parameters per block)."""
    torch.manual_seed(seed)
    blocks = torch.nn.ModuleList([
        torch.nn.Sequential(torch.nn.Linear(width, 2 * width), torch.nn.GELU(), torch.nn.Dropout(0.1),
                            torch.nn.Linear(2 * width, width)) for _ in range(layers)]).to(device)
    for b in blocks:
        b[0].requires_grad_(False)
        b[3].weight.requires_grad_(False)
    return blocks


def run(blocks, x, seed=1):
    for p in blocks.parameters():
        p.grad = None
    x.grad = None
    torch.manual_seed(seed)
    h = x
    for b in blocks:
        h = h + b(h)
    loss = h.square().mean()
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in blocks.parameters() if p.requires_grad] + [x.grad.clone()]


@pytest.mark.parametrize("device", DEVICES)
def test_streamed_blocks_equal_resident_ones_bitwise(device):
    blocks = frozen_blocks(device)
    x = torch.randn(4, 7, 16, device=device, requires_grad=True)
    frozen = [p.detach().clone() for p in blocks.parameters() if not p.requires_grad]
    off = flce.offload.wrap_blocks(blocks, offload=False)
    loss0, grads0 = run(blocks, x)
    flce.offload.unwrap_blocks(blocks)
    streamer = flce.weights.WeightStreamer(blocks)
    flce.offload.wrap_blocks(blocks, off, streamer=streamer)
    for _ in range(2):  # the second step reuses the host copies
        loss1, grads1 = run(blocks, x)
        assert torch.equal(loss0, loss1)
        assert all(torch.equal(a, b) for a, b in zip(grads0, grads1))
        # between steps every frozen weight is a placeholder, nothing held
        assert all(p.numel() == 0 for p in blocks.parameters() if not p.requires_grad)
        assert streamer.stats()["held"] == 0
    s = streamer.stats()
    # each block loaded once in the forward and once in the backward, every step
    assert s["loads"] == 2 * 2 * len(blocks), s
    assert s["pinned_bytes"] == sum(p.numel() * p.element_size() for p in frozen)
    # the trainable biases stayed where they were
    assert all(p.numel() > 0 for p in blocks.parameters() if p.requires_grad)
    # evaluation outside checkpointing (no grad): the module hooks bring the weights in
    with torch.no_grad():
        h = x.detach()
        for b in blocks:
            h = h + b.eval()(h)
    assert streamer.stats()["held"] == 0
    flce.offload.unwrap_blocks(blocks)
    streamer.close()
    assert all(torch.equal(a, b) for a, b in zip(frozen, [p for p in blocks.parameters() if not p.requires_grad]))


def test_shared_and_trainable_parameters_stay():
    torch.manual_seed(0)
    shared = torch.nn.Linear(8, 8).requires_grad_(False)
    own = [torch.nn.Linear(8, 8).requires_grad_(False) for _ in range(2)]
    blocks = [torch.nn.Sequential(shared, own[0]), torch.nn.Sequential(shared, own[1], torch.nn.Linear(8, 8))]
    streamer = flce.weights.WeightStreamer(blocks)
    assert shared.weight.numel() == 64 and shared.bias.numel() == 8
    assert all(p.numel() == 0 for m in own for p in m.parameters())
    assert all(p.numel() > 0 for p in blocks[1][2].parameters())
    streamer.close()
    assert all(p.numel() > 0 for m in own for p in m.parameters())


def tiny_lora_llama():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).double()
    model.train()
    for name, p in model.named_parameters():
        p.requires_grad_("q_proj" in name or "v_proj" in name)  # as LoRA adapters would be the trainable part
    return model


def test_hf_patch_streams_the_frozen_layer_weights():
    model = tiny_lora_llama()
    ids = torch.randint(0, 300, (2, 33))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}

    def step():
        model.zero_grad(set_to_none=True)
        out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        return out.loss.detach(), [p.grad.clone() for p in model.parameters() if p.requires_grad]

    flce.patch(model, checkpoint=True, offload=True)
    loss0, grads0 = step()
    flce.unpatch(model)
    flce.patch(model, checkpoint=True, offload=True, stream_weights=True)
    streamer = model._flce_streamer
    loss1, grads1 = step()
    assert torch.equal(loss0, loss1) and all(torch.equal(a, b) for a, b in zip(grads0, grads1))
    layer_frozen = [p for layer in model.model.layers for p in layer.parameters() if not p.requires_grad]
    assert layer_frozen and all(p.numel() == 0 for p in layer_frozen)
    assert model.model.embed_tokens.weight.numel() > 0  # outside the layers: resident
    assert streamer.stats()["loads"] == 2 * len(model.model.layers)
    # evaluation (transformers calls the layers without its checkpointing function)
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    model.train()
    flce.unpatch(model)
    assert model._flce_streamer is None
    assert all(torch.equal(before[n], p) for n, p in model.named_parameters())
    with torch.no_grad():
        assert torch.equal(logits, model.eval()(input_ids=ids).logits)


@pytest.mark.skipif(not CUDA, reason="no CUDA device")
def test_streamed_weights_leave_the_device():
    # 8 blocks of 2 × 2048 × 4096 frozen f32 weights (64 MiB a block): resident 512 MiB; streamed,
    # at most two blocks' at once
    blocks = torch.nn.ModuleList([
        torch.nn.Sequential(torch.nn.Linear(2048, 4096, bias=False), torch.nn.GELU(),
                            torch.nn.Linear(4096, 2048, bias=False)) for _ in range(8)]).cuda().requires_grad_(False)
    x = torch.randn(512, 2048, device="cuda", requires_grad=True)
    ref = None
    for stream in (False, True):
        streamer = flce.weights.WeightStreamer(blocks) if stream else None
        flce.offload.wrap_blocks(blocks, offload=True, streamer=streamer)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        x.grad = None
        h = x
        for b in blocks:
            h = h + b(h)
        h.square().mean().backward()
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
        if ref is None:
            ref = (x.grad.clone(), peak)
        else:
            assert torch.equal(ref[0], x.grad)
            assert base < before_base - 400 * 2**20  # the blocks' weights left the device
            assert peak < ref[1] + 2 * 64 * 2**20 + 32 * 2**20, (peak, ref[1])  # two blocks in flight
        before_base = base
        flce.offload.unwrap_blocks(blocks)
        if streamer is not None:
            streamer.close()


def test_hf_patch_with_streamed_weights_under_torch_compile():
    # the checkpoints run outside the compiled graph, and the layers' hooks with them; an eval call
    # (no checkpointing) traces the hooks' loads and releases
    model = tiny_lora_llama()
    ids = torch.randint(0, 300, (2, 33))

    def step(m):
        model.zero_grad(set_to_none=True)
        out = m(input_ids=ids, labels=ids)
        out.loss.backward()
        return out.loss.detach(), [p.grad.clone() for p in model.parameters() if p.requires_grad]

    # bitwise, except in the gradients that compiling the unpatched model already moves by ulps
    # (compile_drift.py)
    drift = compile_drift(model, step)
    flce.patch(model, checkpoint=True, offload=True)
    loss0, grads0 = step(model)
    flce.unpatch(model)
    flce.patch(model, checkpoint=True, offload=True, stream_weights=True)
    loss1, grads1 = step(torch.compile(model, backend="eager"))
    assert torch.equal(loss0, loss1)
    assert within_compile_drift(grads0, grads1, drift) is None, within_compile_drift(grads0, grads1, drift)
    model.eval()
    with torch.no_grad():
        compiled = torch.compile(model, backend="eager")(input_ids=ids).logits
    flce.unpatch(model)
    with torch.no_grad():
        assert torch.equal(compiled, model(input_ids=ids).logits)


def test_peft_lora_gemma2_with_streamed_weights():
    # peft's LoRA layers read their base layer's weight inside the call only; its adapters train
    # and stay on the device, the base weights and norms stream (runs where peft is installed)
    transformers = pytest.importorskip("transformers")
    peft = pytest.importorskip("peft", minversion="0.10")
    cfg = transformers.Gemma2Config(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                    num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                    max_position_embeddings=256, attn_implementation="eager")
    torch.manual_seed(0)
    model = transformers.Gemma2ForCausalLM(cfg).double()
    lora = peft.LoraConfig(r=4, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])
    model = peft.get_peft_model(model, lora).base_model.model
    for name, p in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.02)  # non-zero adapters: their gradients reach lora_A too
    model.train()
    ids = torch.randint(0, 300, (2, 33))

    def step():
        model.zero_grad(set_to_none=True)
        out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        return out.loss.detach(), [p.grad.clone() for p in model.parameters() if p.requires_grad]

    flce.patch(model, checkpoint=True, offload=True, mlp_tiles=2, norm_tiles=2)
    loss0, grads0 = step()
    flce.unpatch(model)
    flce.patch(model, checkpoint=True, offload=True, mlp_tiles=2, norm_tiles=2, stream_weights=True)
    loss1, grads1 = step()
    # per layer: q, k, v, o base weights, the MLP's three, four norms
    assert sum(len(b.params) for b in model._flce_streamer.blocks) == 11 * len(model.model.layers)
    flce.unpatch(model)
    assert torch.equal(loss0, loss1) and all(torch.equal(a, b) for a, b in zip(grads0, grads1))
