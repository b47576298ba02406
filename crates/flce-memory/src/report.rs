//! Every combination of loss and activation mode for one request: the breakdown at the asked
//! sequence length and the longest one that fits, as rows and as a markdown table.

use crate::estimate::{estimate, longest_context, Activations, Attention, Breakdown, Loss, Optimizer, Setup};
use crate::model::Model;
use crate::PlanError;

/// What the user asks.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub gpu_bytes: u64,
    pub seq_len: u64,
    pub batch: u64,
    pub optimizer: Optimizer,
    pub lora_rank: Option<u64>,
    /// The MLPs in this many token tiles (flce.tiled_mlp); 1: not tiled.
    pub mlp_tiles: u64,
    /// The layers' RMSNorms in this many token tiles; 1: not tiled.
    pub norm_tiles: u64,
    /// The layers' frozen weights streamed from host memory (flce.weights).
    pub stream_weights: bool,
    /// Hugging Face's attention kernel (sdpa by default).
    pub attention: Attention,
}

impl Request {
    /// A request from the user's units: GiB, tokens, an optimizer name (adamw, adamw8bit, sgd)
    /// and a LoRA rank (0: full fine-tune).
    pub fn new(gpu_gb: f64, seq_len: u64, batch: u64, optimizer: &str, lora_rank: u64) -> Result<Request, PlanError> {
        if !(gpu_gb > 0.0 && seq_len > 0 && batch > 0) {
            return Err(PlanError::Invalid("the GPU size, sequence length and batch must be positive".into()));
        }
        Ok(Request {
            gpu_bytes: (gpu_gb * (1u64 << 30) as f64) as u64,
            seq_len,
            batch,
            optimizer: optimizer.parse::<Optimizer>().map_err(PlanError::Invalid)?,
            lora_rank: (lora_rank > 0).then_some(lora_rank),
            mlp_tiles: 1,
            norm_tiles: 1,
            stream_weights: false,
            attention: Attention::Flash,
        })
    }

    /// The setup of one combination at `seq_len` tokens.
    pub fn setup(&self, loss: Loss, activations: Activations, seq_len: u64) -> Setup {
        Setup {
            seq_len,
            batch: self.batch,
            optimizer: self.optimizer,
            lora_rank: self.lora_rank,
            loss,
            activations,
            mlp_tiles: self.mlp_tiles,
            norm_tiles: self.norm_tiles,
            stream_weights: self.stream_weights,
            attention: self.attention,
            // flce.patch checkpoints it; Hugging Face's own checkpointing (the other losses' rows)
            // does not
            final_norm_checkpointed: loss == Loss::Flce,
        }
    }

    /// The same request with Hugging Face's attention kernel named: flash (flash_attention_2 or
    /// flex_attention, the default) or sdpa.
    pub fn with_attention(self, attention: &str) -> Result<Request, PlanError> {
        Ok(Request { attention: attention.parse().map_err(PlanError::Invalid)?, ..self })
    }

    /// The same request with the MLPs in `tiles` token tiles (at least 1).
    pub fn with_mlp_tiles(self, tiles: u64) -> Result<Request, PlanError> {
        if tiles == 0 {
            return Err(PlanError::Invalid("the MLP tile count must be at least 1".into()));
        }
        Ok(Request { mlp_tiles: tiles, ..self })
    }

    /// The same request with the layers' RMSNorms in `tiles` token tiles (at least 1).
    pub fn with_norm_tiles(self, tiles: u64) -> Result<Request, PlanError> {
        if tiles == 0 {
            return Err(PlanError::Invalid("the norm tile count must be at least 1".into()));
        }
        Ok(Request { norm_tiles: tiles, ..self })
    }

    /// The same request with the layers' frozen weights streamed from host memory or not.
    pub fn with_stream_weights(self, stream_weights: bool) -> Request {
        Request { stream_weights, ..self }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct PlanRow {
    pub loss: Loss,
    pub activations: Activations,
    /// At the requested sequence length.
    pub breakdown: Breakdown,
    pub fits: bool,
    /// The longest sequence length (multiple of 256, up to 1M tokens) that fits.
    pub longest: Option<u64>,
}

/// Sequence lengths are searched in steps of this many tokens, up to MAX_SEQ.
pub const SEQ_STEP: u64 = 256;
pub const MAX_SEQ: u64 = 1 << 20;

pub fn plan(model: &Model, req: &Request) -> Vec<PlanRow> {
    let mut rows = vec![];
    for loss in Loss::ALL {
        for activations in Activations::ALL {
            let setup = req.setup(loss, activations, req.seq_len);
            let breakdown = estimate(model, &setup);
            rows.push(PlanRow {
                loss,
                activations,
                fits: breakdown.peak <= req.gpu_bytes,
                longest: longest_context(model, &setup, req.gpu_bytes, SEQ_STEP, MAX_SEQ),
                breakdown,
            });
        }
    }
    rows
}

fn gib(b: u64) -> String {
    format!("{:.2}", b as f64 / (1u64 << 30) as f64)
}

/// The rows as a markdown table (GiB), with the request in the heading.
pub fn table(model: &Model, req: &Request, rows: &[PlanRow]) -> String {
    let mut s = format!(
        "{}: {:.2}B parameters; {} GiB GPU, sequence {} × batch {}, {:?}, {}{}{}{}{}\n\n",
        model.name,
        model.params() as f64 / 1e9,
        gib(req.gpu_bytes),
        req.seq_len,
        req.batch,
        req.optimizer,
        req.lora_rank.map_or("full fine-tune".to_string(), |r| format!("LoRA r {r} on q/k/v/o")),
        if req.mlp_tiles > 1 { format!(", MLPs in {} token tiles", req.mlp_tiles) } else { String::new() },
        if req.norm_tiles > 1 { format!(", norms in {} token tiles", req.norm_tiles) } else { String::new() },
        if req.stream_weights && req.lora_rank.is_some() { ", frozen layer weights streamed" } else { "" },
        match (model.sliding_window, req.attention) {
            (Some(w), Attention::Sdpa) => format!(", sdpa attention (a dense mask past the {w}-token window)"),
            (Some(_), Attention::Flash) => ", flash / flex attention".to_string(),
            (None, _) => String::new(),
        },
    );
    s.push_str("| loss function | activations | weights GiB | grads GiB | optimizer GiB | activations held GiB | recompute GiB | loss GiB | optimizer step GiB | context + slack GiB | peak GiB | fits | longest sequence (tokens) |\n");
    s.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for r in rows {
        let b = &r.breakdown;
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.loss.name(),
            r.activations.name(),
            gib(b.weights),
            gib(b.gradients),
            gib(b.optimizer),
            gib(b.activations),
            gib(b.recompute),
            gib(b.loss),
            gib(b.optimizer_step),
            gib(b.cuda_context + b.allocator_slack),
            gib(b.peak),
            if r.fits { "yes" } else { "no" },
            r.longest.map_or("none".to_string(), |t| t.to_string()),
        ));
    }
    s.push_str("\nMemory in GiB (2^30 bytes). Estimates from the model's shape (crates/flce-memory/src/estimate.rs): the peak is the larger of the backward (held activations + the larger transient) and the optimizer step; against 36 peaks measured on an H200 (Llama-3.2-1B, full fine-tunes at 16k, 32k and 64k tokens, with untied embeddings and with the real model's tied ones; Qwen2.5-1.5B, full fine-tunes at 16k and 32k; Gemma-2-2B LoRA at 8k and 16k with sdpa attention, at 16k, 23k and 26k with flex attention, with norm tiles too at 26k, 29k and 31k, and with streamed weights at 26k and 74k) they came within -7.1% to +6.1% (over by up to 6% where a full fine-tune's backward sets the peak past 32k without tiled MLPs; Gemma 2's runs under by ~11 KB a token, which streaming's smaller total makes -7%); the allocator slack is what the caching allocator reserved beyond that in the capped runs (flce-memory's tests).\n");
    s
}
