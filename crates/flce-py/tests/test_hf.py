"""flce.patch on tiny randomly initialised Llama-style, Gemma-2-style and GPT-2 models built from
a config (no downloads): loss and every parameter's gradient match the unpatched model."""

import pytest
import torch

import flce

transformers = pytest.importorskip("transformers")

DEVICE = "cuda" if torch.cuda.is_available() and flce.cuda_device_count() > 0 else "cpu"


def tiny(kind):
    common = dict(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    if kind == "llama":
        cfg = transformers.LlamaConfig(**common)
        cls = transformers.LlamaForCausalLM
    elif kind == "gpt2":
        # (no .model, no .lm_head attribute on the body: flce.patch finds the body through
        # base_model, the head through get_output_embeddings(); the head is tied to the embedding)
        cfg = transformers.GPT2Config(vocab_size=1000, n_embd=64, n_layer=2, n_head=4, n_positions=64,
                                      resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        cls = transformers.GPT2LMHeadModel
    else:
        cfg = transformers.Gemma2Config(**common, head_dim=16, final_logit_softcapping=30.0,
                                        attn_logit_softcapping=50.0, sliding_window=16)
        cls = transformers.Gemma2ForCausalLM
    torch.manual_seed(0)
    return cls(cfg).to(DEVICE).float()


@pytest.mark.parametrize("num_items", [None, 37])
@pytest.mark.parametrize("budget", ["min", "peak"])
@pytest.mark.parametrize("kind", ["llama", "gemma2", "gpt2"])
def test_patched_model_matches_unpatched(kind, budget, num_items):
    # (num_items: Trainer's num_items_in_batch, the sum over the accumulated micro-batches' tokens
    # divided by it; flce.patch passes 1 / num_items as the expected grad_output)
    model = tiny(kind)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 1000, (2, 24), generator=g).to(DEVICE)
    labels = ids.clone()
    labels[0, :5] = -100

    def run():
        model.zero_grad(set_to_none=True)
        extra = {} if num_items is None else {"num_items_in_batch": torch.tensor(num_items, device=DEVICE)}
        out = model(input_ids=ids, labels=labels, **extra)
        out.loss.backward()
        return out, {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}

    ref_out, ref_grads = run()
    flce.patch(model, workspace_budget=budget)
    out, grads = run()
    out, grads = run()  # (a second step: "peak" reads the first one's peak)
    assert out.logits is None, "the patched model must not materialise logits"
    assert torch.allclose(out.loss, ref_out.loss.float(), rtol=1e-5, atol=1e-6), (out.loss, ref_out.loss)
    assert grads.keys() == ref_grads.keys()
    for name, g_ref in ref_grads.items():
        err = ((grads[name] - g_ref).norm() / g_ref.norm().clamp_min(1e-12)).item()
        assert err < 1e-4, f"{name}: rel err {err:.2e}"
    # without labels the original forward runs (logits for generation)
    assert model(input_ids=ids).logits.shape == (2, 24, 1000)
    flce.unpatch(model)


def test_patch_takes_the_peak_budget_unless_told(monkeypatch):
    """flce.patch's loss runs with workspace_budget="peak" by default; a budget given to patch
    (None: linear_cross_entropy's own default, "min") replaces it."""
    from flce import hf
    seen = []
    real = hf.linear_cross_entropy

    def spy(*args, **kwargs):
        seen.append(kwargs.get("workspace_budget", "absent"))
        return real(*args, **kwargs)

    monkeypatch.setattr(hf, "linear_cross_entropy", spy)
    ids = torch.randint(0, 1000, (1, 8), generator=torch.Generator().manual_seed(2)).to(DEVICE)
    for given, expect in (({}, "peak"), ({"workspace_budget": None}, None), ({"workspace_budget": "min"}, "min")):
        model = flce.patch(tiny("llama"), **given)
        model(input_ids=ids, labels=ids).loss.backward()
        assert seen[-1] == expect, (given, seen)
        flce.unpatch(model)


def test_gpt2_checkpointed_with_offload_and_tiles_matches_unpatched():
    """The memory options find GPT-2's blocks (transformer.h), their MLPs and its final norm
    (ln_f) as they find a Llama's."""
    model = tiny("gpt2")
    ids = torch.randint(0, 1000, (2, 24), generator=torch.Generator().manual_seed(2)).to(DEVICE)

    def run():
        model.zero_grad(set_to_none=True)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        return loss.detach(), {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}

    ref_loss, ref_grads = run()
    model.train()
    flce.patch(model, checkpoint=True, offload=True, mlp_tiles=2, norm_tiles=2)
    loss, grads = run()
    assert torch.allclose(loss, ref_loss, rtol=1e-5, atol=1e-6)
    for name, g_ref in ref_grads.items():
        err = ((grads[name] - g_ref).norm() / g_ref.norm().clamp_min(1e-12)).item()
        assert err < 1e-4, f"{name}: rel err {err:.2e}"
    flce.unpatch(model)


def test_patch_names_what_it_cannot_use():
    with pytest.raises(TypeError, match="causal LM"):
        flce.patch(torch.nn.Linear(4, 4))
