"""Hugging Face transformers: make a causal LM compute its training loss through flce.

``flce.patch(model)`` replaces ``model.forward`` (on the instance) so that a call with ``labels``
runs the model body (``base_model``), then ``flce.linear_cross_entropy`` on the final hidden
states and the output embedding (``get_output_embeddings()``) — no logits are materialised — and
returns the usual output with ``logits=None``: any transformers causal LM whose head is a linear
layer (Llama, Qwen 2, Gemma 2, GPT-2, …).
Calls without labels (generation, evaluation of logits) go to the original forward unchanged.
The loss follows transformers' ``ForCausalLMLoss``: labels shifted by one within each sequence,
ignore_index -100, mean over the non-ignored tokens (or sum / ``num_items_in_batch`` when the
trainer passes it), computed in float32; Gemma 2's ``final_logit_softcapping`` becomes flce's
``softcap``.

``flce.patch(model, checkpoint=True, offload=True, mlp_tiles=4)`` also makes the decoder layers
checkpointed with their inputs offloaded to pinned host memory (flce.offload), the final norm
with them, and their MLPs computed in token tiles (flce.tiled_mlp): on layers built on transformers'
``GradientCheckpointingLayer`` through its checkpointing hook (which also turns the KV cache off
while training, as transformers does for its own checkpointing); on others by wrapping each layer.
"""

from __future__ import annotations

import functools
import types

import torch

from . import offload as _offload
from . import weights as _weights
from . import tiled_mlp as _tiled
from .ops import linear_cross_entropy


def _output_class(model):
    try:
        from transformers.modeling_outputs import CausalLMOutputWithPast
    except ImportError as e:  # pragma: no cover - only without transformers
        raise ImportError("flce.patch needs the transformers package") from e
    return CausalLMOutputWithPast


def _body(model):
    """The model without its LM head (transformers' ``base_model``: ``model.model`` for Llama,
    Qwen 2 and Gemma 2, ``model.transformer`` for GPT-2), which returns the final hidden states."""
    body = getattr(model, "base_model", None)
    if not isinstance(body, torch.nn.Module) or body is model:
        body = getattr(model, "model", None)
    if not isinstance(body, torch.nn.Module):
        raise TypeError(f"flce.patch expects a transformers causal LM (a base_model and an output embedding), "
                        f"got {type(model).__name__}")
    return body


def _head(model):
    """The LM head (``get_output_embeddings()``: ``lm_head`` for most models), a linear layer."""
    get = getattr(model, "get_output_embeddings", None)
    head = get() if callable(get) else getattr(model, "lm_head", None)
    if not isinstance(getattr(head, "weight", None), torch.Tensor):
        raise TypeError(f"flce.patch expects a causal LM whose output embedding is a linear layer, "
                        f"got {type(model).__name__} with {type(head).__name__}")
    return head


def _layers(model):
    """The decoder layers: the body's ModuleList of as many blocks as the config has layers
    (``layers`` for Llama-style models, ``h`` for GPT-2)."""
    body = _body(model)
    config = getattr(model, "config", None)
    count = getattr(config, "num_hidden_layers", None) or getattr(config, "n_layer", None)
    lists = [m for m in body.children() if isinstance(m, torch.nn.ModuleList) and len(m) > 0]
    for m in lists:
        if count is None or len(m) == count:
            return list(m)
    raise TypeError(f"checkpoint, offload, mlp_tiles, norm_tiles and stream_weights need the decoder layers "
                    f"(a ModuleList of the body); {type(body).__name__} has none")


def _mlps(model):
    """Each decoder layer's MLP (its ``mlp`` module)."""
    layers = _layers(model)
    missing = [type(m).__name__ for m in layers if not isinstance(getattr(m, "mlp", None), torch.nn.Module)]
    if missing:
        raise TypeError(f"mlp_tiles needs each decoder layer's MLP at .mlp; {missing[0]} has none")
    return [m.mlp for m in layers]


def _install_checkpointing(model, offloader, streamer=None):
    try:
        from transformers.modeling_layers import GradientCheckpointingLayer
    except ImportError:  # pragma: no cover - older transformers
        GradientCheckpointingLayer = None
    layers = _layers(model)
    if GradientCheckpointingLayer is not None and all(isinstance(m, GradientCheckpointingLayer) for m in layers):
        for i, m in enumerate(layers):
            m._flce_saved_checkpointing = (m.__dict__.get("gradient_checkpointing"),
                                           m.__dict__.get("_gradient_checkpointing_func"))
            m.gradient_checkpointing = True
            m._gradient_checkpointing_func = functools.partial(
                _offload.checkpoint, offloader=offloader, weights=streamer.block(i) if streamer is not None else None)
    else:
        _offload.wrap_blocks(layers, offloader, streamer=streamer)
    _offload.wrap_blocks(_final_norm(model), offloader)


def _final_norm(model):
    """The decoder's final norm (``model.model.norm``), checkpointed with the layers: left out, its
    saved tensors (an RMSNorm's f32 copy of its input, 4 bytes a value, and its bf16 output for the
    weight's gradient) stay on the device through the loss and the whole backward — as much as two
    layer inputs at any length. Checkpointed, it keeps its input (offloaded with the layers'),
    and is recomputed first in the backward."""
    body = _body(model)
    for name in ("norm", "ln_f", "final_layer_norm", "norm_f"):
        norm = getattr(body, name, None)
        if isinstance(norm, torch.nn.Module):
            return [norm]
    return []


@torch.compiler.disable
def _prefetch_from_the_loss(loss, offloader, streamer=None):
    """The backward starts with the final norm, whose input was offloaded last (and then the
    last layer, whose streamed weights are not on the GPU): bring them back while the loss's own
    backward runs (a hook on the loss; outside torch.compile's graph, as the checkpoints are)."""
    def prefetch(grad):
        if offloader.offload:
            offloader.prefetch_newest()
        if streamer is not None:
            streamer.prefetch_last()
    loss.register_hook(prefetch)


def _remove_checkpointing(model):
    layers = _layers(model)
    _offload.unwrap_blocks(layers)
    _offload.unwrap_blocks(_final_norm(model))
    for m in layers:
        saved = m.__dict__.pop("_flce_saved_checkpointing", None)
        if saved is None:
            continue
        for name, value in zip(("gradient_checkpointing", "_gradient_checkpointing_func"), saved):
            if value is None:
                m.__dict__.pop(name, None)
            else:
                setattr(m, name, value)


def _layer_norms(model):
    """The decoder layers' normalisation modules (RMSNorm by class name, nn.LayerNorm): token-wise
    over the last dimension, so they can run in token tiles."""
    def is_norm(m):
        return type(m).__name__.endswith("RMSNorm") or isinstance(m, torch.nn.LayerNorm)
    return [m for layer in _layers(model) for m in layer.modules() if is_norm(m)]


def patch(model, checkpoint: bool = False, offload: bool = False, mlp_tiles: int = 1, norm_tiles: int = 1,
          stream_weights: bool = False, **loss_options):
    """Route ``model``'s training loss through flce. ``loss_options`` go to
    ``linear_cross_entropy`` (e.g. ``label_smoothing``, ``z_loss``); ``workspace_budget`` is
    ``"peak"`` unless given: from a training loop's second step the loss takes the memory the
    step's own peak leaves it (the faster three-product pass where that holds a token chunk) and
    never raises the peak (the CPU, torch.compile and a small headroom get the default plans;
    ``workspace_budget="min"`` or ``None`` asks for those always). ``checkpoint``: checkpoint
    every decoder layer (flce.offload, replacing transformers' own checkpointing function);
    ``offload``: and keep each layer's input in pinned host memory until its backward (implies
    ``checkpoint``); ``mlp_tiles``: compute each layer's MLP in that many token tiles
    (flce.tiled_mlp); ``norm_tiles``: the same for the layers' RMSNorms, which otherwise keep an
    f32 copy of their input for the backward (4 bytes a value: Gemma 2's four norms a layer are a
    third of what a LoRA layer saves; benchmarks/saved_bytes.py); ``stream_weights``: keep the
    layers' frozen weights (LoRA's base weights) in pinned host memory, each layer's on the GPU
    only while it runs, one layer ahead (flce.weights; implies ``checkpoint``). The offloader is
    ``model._flce_offloader``, the streamer ``model._flce_streamer``. Returns the model."""
    body, head = _body(model), _head(model)
    if getattr(model, "_flce_original_forward", None) is not None:
        return model
    if mlp_tiles < 1:
        raise ValueError(f"mlp_tiles must be >= 1, got {mlp_tiles}")
    if norm_tiles < 1:
        raise ValueError(f"norm_tiles must be >= 1, got {norm_tiles}")
    if checkpoint or offload or stream_weights:
        model._flce_offloader = _offload.Offloader(offload=offload)
        model._flce_streamer = _weights.WeightStreamer(_layers(model)) if stream_weights else None
        _install_checkpointing(model, model._flce_offloader, model._flce_streamer)
    if mlp_tiles > 1:
        _tiled.wrap_mlps(_mlps(model), mlp_tiles)
    if norm_tiles > 1:
        _tiled.wrap_mlps(_layer_norms(model), norm_tiles)
    # (the training step with "peak" 0.892–0.904× / 0.963–0.973× Liger's at 8k / 16k tokens, with
    # "min" 0.965× / 1.072×, peaks equal: benchmarks/train_step.py, H200, journal v43)
    loss_options.setdefault("workspace_budget", "peak")  # (**loss_options is the call's own dict)
    original = model.forward
    out_cls = _output_class(model)
    fields = set(getattr(out_cls, "__dataclass_fields__", {}))

    def forward(self, *args, labels=None, **kwargs):
        if labels is None:
            return original(*args, **kwargs)
        kwargs.pop("logits_to_keep", None)
        kwargs.pop("return_dict", None)
        num_items = kwargs.pop("num_items_in_batch", None)
        if getattr(self, "_flce_offloader", None) is not None and self.training:
            # no KV cache while the layers are checkpointed, as transformers' own checkpointing
            # has it: a recomputed layer would append its keys and values to the cache a second
            # time (GPT-2 passes the cache to its blocks positionally, where the layers' own
            # guard does not see it)
            kwargs["use_cache"] = False
        outputs = body(*args, **kwargs)
        hidden = outputs[0] if not hasattr(outputs, "last_hidden_state") else outputs.last_hidden_state
        softcap = getattr(self.config, "final_logit_softcapping", None)
        options = dict(loss_options)
        options.setdefault("softcap", softcap)
        scale = None
        if num_items is not None:
            # the sum / num_items_in_batch as sum · (1 / num_items), that factor the grad_output the
            # sum's backward gets: the passes that form the gradients in the forward form them for
            # it, rounded once (a division after them would round them twice: 2.7e-3 against
            # 2.1e-3, docs/journal.md v54)
            scale = torch.reciprocal(torch.as_tensor(num_items, dtype=torch.float32, device=hidden.device)).reshape(1)
            options.setdefault("expected_grad_output", scale)
        loss = linear_cross_entropy(hidden, head.weight, labels, getattr(head, "bias", None),
                                    shift=True, reduction="sum" if num_items is not None else "mean",
                                    out_dtype=torch.float32, **options)
        offloader, streamer = getattr(self, "_flce_offloader", None), getattr(self, "_flce_streamer", None)
        if offloader is not None and (offloader.offload or streamer is not None) and loss.requires_grad:
            _prefetch_from_the_loss(loss, offloader, streamer)
        if scale is not None:
            loss = loss * scale[0]
        extra = {k: getattr(outputs, k) for k in ("cache", "past_key_values", "hidden_states", "attentions")
                 if k in fields and hasattr(outputs, k)}
        return out_cls(loss=loss, logits=None, **extra)

    model._flce_original_forward = original
    model.forward = types.MethodType(forward, model)
    return model


def unpatch(model):
    """Undo :func:`patch`."""
    original = getattr(model, "_flce_original_forward", None)
    if original is not None:
        model.forward = original
        model._flce_original_forward = None
        if getattr(model, "_flce_offloader", None) is not None:
            _remove_checkpointing(model)
            model._flce_offloader = None
        if getattr(model, "_flce_streamer", None) is not None:
            model._flce_streamer.close()
            model._flce_streamer = None
        try:
            layers = _layers(model)
        except TypeError:
            layers = []
        if layers:
            _tiled.unwrap_mlps([m.mlp for m in layers if hasattr(m, "mlp")])
            _tiled.unwrap_mlps(_layer_norms(model))
    return model
