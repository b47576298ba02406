//! The memory of one training step, term by term (bytes), from the model's shape and the setup.
//!
//! Activations per token and layer are counted from what PyTorch's autograd keeps for a Hugging
//! Face decoder layer in bf16 with fused (sdpa / flash) attention — no T² scores:
//!
//! ```text
//! each RMSNorm        6h   (its f32 input copy 4h, its bf16 output 2h)
//! q/k/v and MLP input 2h + 2h
//! RoPE                4q + 4kv   (q, rotate_half(q), k, rotate_half(k))
//! attention           2q + 4kv + 2q + 4·heads   (q, k, v, output, f32 logsumexp)
//! o_proj input        2q
//! MLP                 8i   (gate, up, act(gate), act(gate)·up)
//! ```
//!
//! With LoRA on the attention projections the MLP's weights are frozen, and autograd keeps a
//! linear layer's input only for its weight's gradient: the MLP's input and act(gate)·up are not
//! kept (2h + 2i less).
//!
//! What autograd really saves in one layer's forward (`benchmarks/saved_bytes.py`, CPU:
//! benchmarks/results/2026-12-01-h200-planner-calibration/saved-bytes-cpu.txt) is 13–30% less than these per-token counts under
//! LoRA and 2–13% less in full fine-tunes: RoPE saves only cos / sin (not q, k and their rotated
//! copies), a norm with a frozen weight only its f32 input copy (4h, not 6h). The measured GPU
//! peaks the tests hold the plan to (±5%) include the backward's own transients (gradient buffers,
//! autograd temporaries, the tiled MLP's recompute), which these counts do not model apart and
//! which the over-count happens to cover; splitting the two needs a memory snapshot of one
//! layer's backward on the GPU, not a change of these counts alone.
//!
//! With activation checkpointing a layer keeps only its input (2h per token) and one layer's
//! activations are rebuilt during its backward (flce.patch checkpoints the final norm too: 2h
//! instead of its 6h, and offloaded with the layers' inputs; [`Setup::final_norm_checkpointed`]);
//! with offload the inputs wait in host memory and two layers' inputs (the one in use and the
//! prefetched next) stay on the GPU. With the MLP in k token tiles (flce.tiled_mlp) a layer keeps
//! only the MLP's input, and the MLP's 8i bytes a token exist for one tile at a time (in the
//! recompute, or in the MLP's own backward when nothing is checkpointed); with the norms in token
//! tiles each keeps 2h instead of 6h ([`NORM_TILED_SAVES`]). Models with sliding-window layers
//! (Gemma 2) add two T² terms past their window, from Hugging Face's sdpa path: the dense boolean
//! window mask, 1 byte per token pair, held for the whole step; and, while a layer's attention runs
//! backward, 4 bytes per pair more — the additive bf16 bias sdpa's memory-efficient kernel takes,
//! and a second copy of it — next to the attention's input gradients (dq, dk, dv, d·out). A layer's
//! backward peaks at the larger of its MLP phase (first) and its attention phase (the MLP's
//! intermediates freed). The 4 bytes are fitted (H200: Gemma-2-2B LoRA at 8k and 16k
//! tokens, where the tiled MLP's phase is the smaller one and the attention phase sets the peak);
//! the mechanism is inferred from the allocations, not traced. The loss adds its own transient:
//! plain PyTorch ~11 bytes per logit (bf16 logits, their f32 copy, log-softmax,
//! the f32 gradient), torch.compile ~2 (measured on the H200: 4.0 GB at Gemma 2, 2.0 GB at Llama 3,
//! 8192 tokens), flce the 10%-of-gradients workspace (with LoRA, the frozen head's dE-only
//! workspace: 10% of dE or ~1024 tokens' worth, whichever is more).
//!
//! The step's peak is the larger of two phases: forward/backward (weights, gradients, optimizer
//! states, held activations and the larger of the loss's and the recompute's transients, less
//! what of the held layer inputs the backward has freed by the time the layers' gradients exist)
//! and the optimizer step (weights, gradients, states and the step's temporaries: torch's foreach AdamW
//! makes one moment-sized temporary list, `_foreach_sqrt` of the second moments; measured on the
//! H200: Llama-3.2-1B as built then, with untied embeddings (1.50 B parameters),
//! a 14,364 MB peak in every activation mode at 16k tokens, for 11,431 MB of weights, gradients
//! and bf16 moments and 2,858 MB of one list; Qwen2.5-1.5B, tied, 14,801 MB for 11,780 + 2,945).
//! Checked against the H200's measured peaks in the tests
//! (`the_plan_matches_the_h200_measurements`).

use flce_core::{DType, Shape};
use flce_cuda::plan::{default_backward_budget, Wanted};
use flce_cuda::BackwardMode;

use crate::model::Model;

/// Bytes of a bf16 value.
const BF16: u64 = 2;
/// Sliding-window models: the window mask held through the step, and the attention phase's
/// transient copies of it as a bf16 bias, in bytes per token pair (see the module doc).
const WINDOW_MASK_BYTES_PER_PAIR: u64 = 1;
const WINDOW_BIAS_BYTES_PER_PAIR: u64 = 4;
/// Bytes a token and norm that a norm in token tiles does not keep (6h → 2h, in units of h): the
/// H200's Gemma-2-2B LoRA runs at 25,856 tokens (offload, 4 MLP tiles, flex attention) peaked at
/// 8,991 MB allocated without norm tiles and 8,104 with 4 (results/2026-12-01-h200-planner-calibration/
/// final-norm, norm-tiles): 887 MB, 97.6% of 4 norms × 4h × 25,856 tokens. (One tile's
/// f32 copy exists while that norm runs backward, apart from the MLP's tiles: not modeled.)
pub const NORM_TILED_SAVES: u64 = 4;
/// Loss transient per logit (T·V) for the plain PyTorch loss and for torch.compile.
const PLAIN_LOSS_BYTES_PER_LOGIT: f64 = 11.0;
const COMPILE_LOSS_BYTES_PER_LOGIT: f64 = 2.0;
/// What the CUDA context and the caching allocator's slack cost: a fixed context and a fraction
/// of everything allocated. The fraction is what PyTorch's caching allocator reserved beyond its
/// allocated peak in the capped H200 runs (Gemma-2-2B LoRA at 16k tokens: 10,114 /
/// 9,199 and 9,274 / 8,408 MB with sdpa, 9,818 / 8,369 and 8,450 / 7,577 with flex attention:
/// 1.10–1.17); a cap counts reserved bytes, and at 5% the planner named 29,184 tokens as the
/// longest that fits with offload and 4 MLP tiles on 10 GiB, where a step ran out of memory
/// (benchmarks/results/2026-12-01-h200-planner-calibration/gemma2-lora-10gib-longest/).
pub const CUDA_CONTEXT_BYTES: u64 = 600 << 20;
pub const ALLOCATOR_SLACK: f64 = 0.15;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Optimizer {
    /// AdamW with f32 moments: 8 bytes per trainable parameter.
    AdamW,
    /// AdamW with its moments in the weights' dtype (bf16) — what `torch.optim.AdamW` keeps for
    /// bf16 parameters: 4 bytes per trainable parameter.
    AdamWBf16,
    /// AdamW with 8-bit moments (bitsandbytes): 2 bytes per trainable parameter.
    AdamW8bit,
    /// `torch.optim.AdamW(fused=True)` with f32 moments (8 bytes per trainable parameter): one
    /// kernel updates each parameter in place, no temporary lists.
    AdamWFused,
    /// The same with bf16 moments (4 bytes), as on bf16 parameters.
    AdamWBf16Fused,
    /// Plain SGD: no state.
    Sgd,
}

impl std::str::FromStr for Optimizer {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "adamw" | "adam" => Ok(Optimizer::AdamW),
            "adamw-bf16" | "adamw_bf16" | "adamwbf16" => Ok(Optimizer::AdamWBf16),
            "adamw8bit" | "adamw-8bit" | "8bit" => Ok(Optimizer::AdamW8bit),
            "adamw-fused" | "adamw_fused" => Ok(Optimizer::AdamWFused),
            "adamw-bf16-fused" | "adamw_bf16_fused" => Ok(Optimizer::AdamWBf16Fused),
            "sgd" => Ok(Optimizer::Sgd),
            other => Err(format!(
                "optimizer '{other}': expected adamw, adamw-bf16, adamw-fused, adamw-bf16-fused, adamw8bit or sgd"
            )),
        }
    }
}

impl Optimizer {
    fn bytes_per_param(self) -> u64 {
        match self {
            Optimizer::AdamW | Optimizer::AdamWFused => 8,
            Optimizer::AdamWBf16 | Optimizer::AdamWBf16Fused => 4,
            Optimizer::AdamW8bit => 2,
            Optimizer::Sgd => 0,
        }
    }

    /// The step's temporaries per trainable parameter: one moment-sized list for torch's foreach
    /// AdamW (`exp_avg_sq_sqrt = torch._foreach_sqrt(exp_avg_sqs)`, in the moments' dtype);
    /// bitsandbytes' 8-bit step, the fused AdamW and SGD update in place.
    fn step_bytes_per_param(self) -> u64 {
        match self {
            Optimizer::AdamW | Optimizer::AdamWBf16 => self.bytes_per_param() / 2,
            Optimizer::AdamW8bit | Optimizer::AdamWFused | Optimizer::AdamWBf16Fused | Optimizer::Sgd => 0,
        }
    }
}

/// Which loss computes the logits' cross-entropy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loss {
    Plain,
    Compile,
    Flce,
}

impl Loss {
    pub const ALL: [Loss; 3] = [Loss::Plain, Loss::Compile, Loss::Flce];
    pub fn name(self) -> &'static str {
        match self {
            Loss::Plain => "PyTorch",
            Loss::Compile => "torch.compile",
            Loss::Flce => "flce",
        }
    }
}

/// The attention kernel Hugging Face runs, for the sliding-window layers' masks (models without a
/// window: the same either way).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attention {
    /// `attn_implementation="sdpa"`: a dense [T, T] window mask past the window (measured with
    /// transformers 5.17, whose sdpa path runs Gemma 2 without its attention-logit softcap; from
    /// about 5.2x on, transformers refuses sdpa for Gemma 2).
    Sdpa,
    /// `attn_implementation="flash_attention_2"` or `"flex_attention"` (the default): the window
    /// is a kernel argument or a block mask, nothing T² (flex's block mask, (T/128)² entries, is
    /// not counted). Checked against Gemma-2-2B peaks with flex attention (16k and 23k tokens).
    Flash,
}

impl std::str::FromStr for Attention {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "sdpa" => Ok(Attention::Sdpa),
            "flash" | "flash_attention_2" | "flash-attention-2" | "flex" | "flex_attention" => Ok(Attention::Flash),
            other => Err(format!("attention '{other}': expected flash (flash_attention_2, flex_attention) or sdpa")),
        }
    }
}

/// What happens to the layers' activations between forward and backward.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activations {
    /// Everything autograd saves stays on the GPU.
    Kept,
    /// Activation checkpointing: each layer keeps its input, recomputes the rest in backward.
    Checkpointed,
    /// Checkpointing with the layer inputs offloaded to pinned host memory.
    Offloaded,
}

impl Activations {
    pub const ALL: [Activations; 3] = [Activations::Kept, Activations::Checkpointed, Activations::Offloaded];
    pub fn name(self) -> &'static str {
        match self {
            Activations::Kept => "no checkpointing",
            Activations::Checkpointed => "checkpointing",
            Activations::Offloaded => "checkpointing + offload",
        }
    }
}

/// One training step's setup.
#[derive(Clone, Debug, PartialEq)]
pub struct Setup {
    pub seq_len: u64,
    pub batch: u64,
    pub optimizer: Optimizer,
    /// LoRA rank on the attention projections; None for a full fine-tune.
    pub lora_rank: Option<u64>,
    pub loss: Loss,
    pub activations: Activations,
    /// The MLPs computed in this many token tiles (flce.tiled_mlp); 1: not tiled.
    pub mlp_tiles: u64,
    /// The layers' RMSNorms computed in token tiles (`flce.patch(..., norm_tiles=N)`); 1: not
    /// tiled. A tiled norm keeps its bf16 input (2h a token) instead of its f32 input copy and
    /// output (6h): 4h a token and norm fewer in a layer's activations (`NORM_TILED_SAVES`).
    pub norm_tiles: u64,
    /// The layers' frozen weights streamed from pinned host memory (`flce.patch(...,
    /// stream_weights=True)`, flce.weights): with LoRA, two layers' base weights on the GPU at a
    /// time (the running one and the next) instead of every layer's. Nothing changes for a full
    /// fine-tune (no frozen weights).
    pub stream_weights: bool,
    pub attention: Attention,
    /// The decoder's final norm checkpointed with the layers (`flce.patch(checkpoint=True)` does):
    /// it keeps its bf16 input (offloaded with the layers') instead of its f32 input copy and
    /// output: the loss's phase is lower, the layers' backward is not (the H200 runs of the tests:
    /// the first ones without it, those in planner-calibration/final-norm and after with it).
    pub final_norm_checkpointed: bool,
}

/// What flce's loss holds beyond its gradients at `tokens` tokens: the default backward
/// workspace flce-cuda's planner gives the call (a tenth of the gradient bytes, or the smallest
/// good plan's where that is more: [`default_backward_budget`]), planned for the Hopper family's
/// tiles, and the lse, per-token loss and grad_output the call holds beside it (16 bytes a token).
fn flce_loss_bytes(model: &Model, tokens: u64, dc: bool) -> u64 {
    let shape = Shape { n: tokens as usize, d: model.hidden as usize, v: model.vocab as usize };
    let wanted = Wanted { de: true, dc, dbias: false };
    (default_backward_budget(shape, DType::BF16, wanted, BackwardMode::FusedTiles) + 16 * shape.n) as u64
}

/// The memory of one training step, in bytes, term by term.
#[derive(Clone, Debug, PartialEq)]
pub struct Breakdown {
    pub weights: u64,
    pub gradients: u64,
    pub optimizer: u64,
    /// Activations held between forward and backward.
    pub activations: u64,
    /// One layer's activations rebuilt during its backward (checkpointing), one MLP tile's (tiled
    /// MLPs without checkpointing), or 0.
    pub recompute: u64,
    /// The loss's own transient memory at its peak.
    pub loss: u64,
    /// The optimizer step's temporaries (its phase comes after the activations are freed).
    pub optimizer_step: u64,
    pub cuda_context: u64,
    pub allocator_slack: u64,
    pub peak: u64,
}

/// Activation bytes one token leaves in one layer (see the module doc).
pub fn layer_activation_bytes_per_token(m: &Model) -> u64 {
    let (h, q, kv, i) = (m.hidden, m.q_dim(), m.kv_dim(), m.intermediate);
    m.norms_per_layer * 6 * h + BF16 * (2 * h + 5 * q + 4 * kv + 4 * i) + 4 * m.heads
}

/// The MLP's share of [`layer_activation_bytes_per_token`]: gate, up, act(gate), act(gate)·up.
pub fn mlp_activation_bytes_per_token(m: &Model) -> u64 {
    BF16 * 4 * m.intermediate
}

/// The breakdown of `setup` for `model`.
pub fn estimate(model: &Model, setup: &Setup) -> Breakdown {
    let tokens = setup.seq_len * setup.batch;
    let params = model.params();
    let trainable = setup.lora_rank.map_or(params, |r| model.lora_params(r));
    // streamed: every layer's frozen weights but two leave the GPU (LoRA's base weights; the
    // adapters, embeddings, final norm and head stay)
    let streamed = if setup.stream_weights && setup.lora_rank.is_some() {
        model.layers.saturating_sub(2) * model.layer_params()
    } else {
        0
    };
    let weights = BF16 * (params - streamed + setup.lora_rank.map_or(0, |r| model.lora_params(r)));
    let gradients = BF16 * trainable;
    let optimizer = setup.optimizer.bytes_per_param() * trainable;
    let per_layer = layer_activation_bytes_per_token(model) * tokens;
    let layer_input = BF16 * model.hidden * tokens;
    // tiled MLPs keep none of their intermediates; one tile's exist at a time in the backward
    let tiles = setup.mlp_tiles.max(1);
    // LoRA on the attention projections leaves the MLP's weights frozen, and autograd saves a
    // linear layer's input only for its weight's gradient: neither the MLP's input (gate and up)
    // nor act(gate)·up (down) is kept, 2h + 2i bytes a token fewer (H200, Gemma-2-2B
    // LoRA at 16k tokens with flex attention, where the MLP phase sets the peak: the plan without
    // this was 7% over). A tiled MLP keeps its input all the same (its checkpoint's).
    let lora = setup.lora_rank.is_some();
    let all_mlp = mlp_activation_bytes_per_token(model) * tokens;
    // bytes a token a frozen MLP does not keep: its input, act(gate)·up
    let (mlp_input, mlp_product) = if lora { (BF16 * model.hidden, BF16 * model.intermediate) } else { (0, 0) };
    let mlp = all_mlp - mlp_product * tokens;
    let (kept_per_layer, mlp_tile) = if tiles > 1 {
        (per_layer - all_mlp, mlp.div_ceil(tiles))
    } else {
        (per_layer - (mlp_input + mlp_product) * tokens, 0)
    };
    let norms_tiled =
        if setup.norm_tiles > 1 { NORM_TILED_SAVES * model.norms_per_layer * model.hidden * tokens } else { 0 };
    let kept_per_layer = kept_per_layer - norms_tiled;
    // the final norm's saved tensors and the LM head's input (the loss's): 6h + 2h; with the norm
    // checkpointed its input instead (2h), offloaded with the layers' — and then brought back
    // while the loss's backward runs (flce.patch prefetches it from a hook on the loss)
    let hidden = model.hidden * tokens;
    let head_not_checkpointed = (6 + BF16) * hidden;
    let (head, head_prefetch) = match (setup.activations, setup.final_norm_checkpointed) {
        (Activations::Kept, _) | (_, false) => (head_not_checkpointed, 0),
        (Activations::Checkpointed, true) => (2 * BF16 * hidden, 0),
        (Activations::Offloaded, true) => (BF16 * hidden, BF16 * hidden),
    };
    // a layer's backward also holds the MLP's gradient buffers (of gate, up and act(gate)·up) next
    // to its saved activations: 3i bf16 values a token, of one tile when tiled
    let mlp_grads = (BF16 * 3 * model.intermediate * tokens).div_ceil(tiles);
    // past the window, the dense window mask (held) and its bias copies in the attention backward
    let pairs = setup.batch * setup.seq_len * setup.seq_len;
    let windowed = setup.attention == Attention::Sdpa && model.sliding_window.is_some_and(|w| setup.seq_len > w);
    let window_mask = if windowed { WINDOW_MASK_BYTES_PER_PAIR * pairs } else { 0 };
    let attention_grads = BF16 * (2 * model.q_dim() + 2 * model.kv_dim()) * tokens;
    let attention_phase = if windowed { WINDOW_BIAS_BYTES_PER_PAIR * pairs + attention_grads } else { 0 };
    // A layer's backward runs its MLP's first: the MLP phase holds the layer's saved activations
    // and the MLP's gradient buffers (and one tile's intermediates, when tiled); by the attention
    // phase the MLP's saved intermediates are gone
    let mlp_kept = if tiles > 1 { 0 } else { mlp };
    // A trainable down projection keeps act(gate)·up for its weight's gradient and frees it with
    // its backward, before act(gate)·up's own backward makes the other two gradient buffers: not
    // beside them (of one tile, when tiled). Llama-3.2-1B full fine-tunes at 16k–64k tokens
    // (results/2026-12-01-h200-planner-calibration/final-norm) were over-predicted by 2.1–2.3 bytes a token and
    // intermediate unit without this; this is one of them.
    let product_freed = if lora { 0 } else { (BF16 * model.intermediate * tokens).div_ceil(tiles) };
    let rebuilt_layer =
        (kept_per_layer + mlp_tile + mlp_grads - product_freed).max(kept_per_layer - mlp_kept + attention_phase);
    let (activations, recompute) = match setup.activations {
        Activations::Kept => {
            (model.layers * kept_per_layer + head + window_mask, (mlp_tile + mlp_grads).max(attention_phase))
        }
        Activations::Checkpointed => (model.layers * layer_input + head + window_mask, rebuilt_layer),
        Activations::Offloaded => (2 * layer_input + head + window_mask, rebuilt_layer),
    };
    let logits = (tokens * model.vocab) as f64;
    let loss = match setup.loss {
        Loss::Plain => (PLAIN_LOSS_BYTES_PER_LOGIT * logits) as u64,
        Loss::Compile => (COMPILE_LOSS_BYTES_PER_LOGIT * logits) as u64,
        // the planner's default workspace for the head's gradients (dE and dC; with LoRA the head
        // is frozen: dE only) and the call's per-token buffers beside it
        Loss::Flce => flce_loss_bytes(model, tokens, !lora),
    };
    // the loss runs at the end of the forward, the recompute during the backward: not both at once.
    // The final norm's saved tensors (the head term) are freed by its backward, before any layer's;
    // in the layers' phase the term stands for what the H200 runs measured there beyond the model
    // (calibrated with the norm not checkpointed), so checkpointing the norm lowers the loss's
    // phase only: Gemma-2-2B LoRA at 25,856 tokens with it peaked as without it (8,991 MB
    // allocated, results/2026-12-01-h200-planner-calibration/final-norm) where lowering both phases planned 8,369
    let head_in_layers_phase = head_not_checkpointed - head;
    let transient = (loss + head_prefetch).max(recompute + head_in_layers_phase);
    // The backward frees a layer's held input as it creates that layer's gradients: at layer k
    // (from the top) the inputs of the k layers below and the gradients of the L − k above exist,
    // never all of both. Gradients are allocated as the backward makes them (zero_grad sets them
    // to None), so at most max(held, layer gradients) of the two per-layer terms coexist.
    let layer_grads = if setup.lora_rank.is_some() { gradients } else { BF16 * model.layers * model.layer_params() };
    // what the layers hold: every held activation but the head's and the mask
    let overlap = layer_grads.min(activations - head - window_mask);
    let optimizer_step = setup.optimizer.step_bytes_per_param() * trainable;
    // an untied input embedding's gradient is made last, after every layer's backward has freed
    // its held input: never beside the activations
    let late_embedding = if lora || model.tied_embeddings { 0 } else { BF16 * model.vocab * model.hidden };
    let backward = gradients - late_embedding + activations + transient - overlap;
    let allocated = weights + optimizer + backward.max(gradients + optimizer_step);
    let allocator_slack = (ALLOCATOR_SLACK * allocated as f64) as u64;
    let peak = allocated + allocator_slack + CUDA_CONTEXT_BYTES;
    Breakdown {
        weights,
        gradients,
        optimizer,
        activations,
        recompute,
        loss,
        optimizer_step,
        cuda_context: CUDA_CONTEXT_BYTES,
        allocator_slack,
        peak,
    }
}

/// The longest sequence length (a multiple of `step`, at most `max`) whose step fits in
/// `gpu_bytes`, or None when not even `step` tokens fit.
pub fn longest_context(model: &Model, setup: &Setup, gpu_bytes: u64, step: u64, max: u64) -> Option<u64> {
    let fits = |k: u64| estimate(model, &Setup { seq_len: k * step, ..setup.clone() }).peak <= gpu_bytes;
    let (mut lo, mut hi, mut best) = (1u64, max / step, None);
    while lo <= hi {
        let mid = (lo + hi) / 2;
        if fits(mid) {
            best = Some(mid * step);
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    best
}
