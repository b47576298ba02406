"""flce.patch on tiny randomly initialised Llama-style and Gemma-2-style models built from a
config (no downloads): loss and every parameter's gradient match the unpatched model."""

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
    else:
        cfg = transformers.Gemma2Config(**common, head_dim=16, final_logit_softcapping=30.0,
                                        attn_logit_softcapping=50.0, sliding_window=16)
        cls = transformers.Gemma2ForCausalLM
    torch.manual_seed(0)
    return cls(cfg).to(DEVICE).float()


@pytest.mark.parametrize("num_items", [None, 37])
@pytest.mark.parametrize("budget", ["min", "peak"])
@pytest.mark.parametrize("kind", ["llama", "gemma2"])
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
