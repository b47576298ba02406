"""Hugging Face transformers: make a causal LM compute its training loss through flce.

``flce.patch(model)`` replaces ``model.forward`` (on the instance) so that a call with ``labels``
runs the model body, then ``flce.linear_cross_entropy`` on the final hidden states and
``lm_head`` — no logits are materialised — and returns the usual output with ``logits=None``.
Calls without labels (generation, evaluation of logits) go to the original forward unchanged.
The loss follows transformers' ``ForCausalLMLoss``: labels shifted by one within each sequence,
ignore_index -100, mean over the non-ignored tokens (or sum / ``num_items_in_batch`` when the
trainer passes it), computed in float32; Gemma 2's ``final_logit_softcapping`` becomes flce's
``softcap``.
"""

from __future__ import annotations

import types

import torch

from .ops import linear_cross_entropy


def _output_class(model):
    try:
        from transformers.modeling_outputs import CausalLMOutputWithPast
    except ImportError as e:  # pragma: no cover - only without transformers
        raise ImportError("flce.patch needs the transformers package") from e
    return CausalLMOutputWithPast


def patch(model, **loss_options):
    """Route ``model``'s training loss through flce. ``loss_options`` go to
    ``linear_cross_entropy`` (e.g. ``label_smoothing``, ``z_loss``). Returns the model."""
    if not (hasattr(model, "model") and hasattr(model, "lm_head")):
        raise TypeError(f"flce.patch expects a causal LM with .model and .lm_head, got {type(model).__name__}")
    if getattr(model, "_flce_original_forward", None) is not None:
        return model
    original = model.forward
    out_cls = _output_class(model)
    fields = set(getattr(out_cls, "__dataclass_fields__", {}))

    def forward(self, *args, labels=None, **kwargs):
        if labels is None:
            return original(*args, **kwargs)
        kwargs.pop("logits_to_keep", None)
        kwargs.pop("return_dict", None)
        num_items = kwargs.pop("num_items_in_batch", None)
        outputs = self.model(*args, **kwargs)
        hidden = outputs[0] if not hasattr(outputs, "last_hidden_state") else outputs.last_hidden_state
        softcap = getattr(self.config, "final_logit_softcapping", None)
        options = dict(loss_options)
        options.setdefault("softcap", softcap)
        loss = linear_cross_entropy(hidden, self.lm_head.weight, labels, getattr(self.lm_head, "bias", None),
                                    shift=True, reduction="sum" if num_items is not None else "mean",
                                    out_dtype=torch.float32, **options)
        if num_items is not None:
            loss = loss / num_items
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
    return model
