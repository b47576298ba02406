//! `flce plan`: the memory of one training step of a model on a GPU of a given size, for every
//! combination of loss (PyTorch, torch.compile, flce) and activation handling (kept,
//! checkpointing, checkpointing + offload), and the longest context that fits.

use clap::Args;
use flce_memory::{plan, table, write_chart, Model, Request};

#[derive(Args, Debug)]
pub struct PlanArgs {
    /// A built-in model (Llama-3.2-1B, Llama-3.1-8B, Qwen2.5-0.5B, Qwen2.5-1.5B, Qwen2.5-7B,
    /// Gemma-2-2B, Gemma-2-9B) or the path of a Hugging Face config.json.
    #[arg(long, default_value = "Llama-3.2-1B")]
    model: String,
    /// GPU memory in GiB (an RTX 3080 has 10).
    #[arg(long, default_value_t = 10.0)]
    gpu_gb: f64,
    /// Sequence length (tokens per sequence).
    #[arg(long, default_value_t = 4096)]
    seq: u64,
    /// Sequences per step.
    #[arg(long, default_value_t = 1)]
    batch: u64,
    /// adamw (f32 moments), adamw-bf16 (moments in the weights' bf16: torch.optim.AdamW on bf16 parameters), adamw-fused / adamw-bf16-fused (torch.optim.AdamW(fused=True): no step temporaries), adamw8bit or sgd.
    #[arg(long, default_value = "adamw")]
    optimizer: String,
    /// LoRA rank on the attention projections; 0 for a full fine-tune.
    #[arg(long, default_value_t = 16)]
    lora_rank: u64,
    /// The MLPs computed in this many token tiles (flce.tiled_mlp; `flce.patch(..., mlp_tiles=N)`).
    #[arg(long, default_value_t = 1)]
    mlp_tiles: u64,
    /// The layers' RMSNorms computed in this many token tiles (`flce.patch(..., norm_tiles=N)`).
    #[arg(long, default_value_t = 1)]
    norm_tiles: u64,
    /// The layers' frozen weights (LoRA's base weights) streamed from pinned host memory, two
    /// layers' on the GPU at a time (`flce.patch(..., stream_weights=True)`).
    #[arg(long)]
    stream_weights: bool,
    /// Hugging Face's attention kernel, for models with sliding-window layers (Gemma 2): flash
    /// (flash_attention_2 or flex_attention: the window without a mask) or sdpa (past the window a
    /// dense [T, T] mask; transformers ≤ 5.17).
    #[arg(long, default_value = "flash")]
    attention: String,
    /// Also name the cheapest `flce.patch` memory options whose planned peak fits (checkpointing,
    /// offload, MLP / norm tiles, streamed weights, in order of their step-time cost); the
    /// request's own --mlp-tiles / --norm-tiles / --stream-weights do not constrain it.
    #[arg(long)]
    suggest: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Also write peak memory against sequence length (256 tokens to 1M) as a chart here: a PNG
    /// where the path ends in .png, an SVG otherwise.
    #[arg(long)]
    plot: Option<std::path::PathBuf>,
}

pub fn run(args: &PlanArgs) -> flce::Result<()> {
    let err = |e: String| flce::Error::Unsupported(e);
    let model = Model::load(&args.model).map_err(|e| err(e.to_string()))?;
    let req = Request::new(args.gpu_gb, args.seq, args.batch, &args.optimizer, args.lora_rank)
        .and_then(|r| r.with_mlp_tiles(args.mlp_tiles))
        .and_then(|r| r.with_norm_tiles(args.norm_tiles))
        .map(|r| r.with_stream_weights(args.stream_weights))
        .and_then(|r| r.with_attention(&args.attention))
        .map_err(|e| err(e.to_string()))?;
    let rows = plan(&model, &req);
    if let Some(path) = &args.plot {
        write_chart(&model, &req, path).map_err(|e| err(format!("writing {}: {e}", path.display())))?;
        eprintln!("wrote {}", path.display());
    }
    if args.json {
        let items: Vec<String> = rows
            .iter()
            .map(|r| {
                let b = &r.breakdown;
                format!(
                    "{{\"loss\": \"{}\", \"activations\": \"{}\", \"weights\": {}, \"gradients\": {}, \"optimizer\": {}, \"activations_held\": {}, \"recompute\": {}, \"loss_bytes\": {}, \"optimizer_step\": {}, \"cuda_context\": {}, \"allocator_slack\": {}, \"peak\": {}, \"fits\": {}, \"longest_seq\": {}}}",
                    r.loss.name(), r.activations.name(), b.weights, b.gradients, b.optimizer, b.activations, b.recompute,
                    b.loss, b.optimizer_step, b.cuda_context, b.allocator_slack, b.peak, r.fits, r.longest.map_or("null".into(), |t| t.to_string())
                )
            })
            .collect();
        println!("[{}]", items.join(",\n "));
    } else {
        print!("{}", table(&model, &req, &rows));
    }
    if args.suggest {
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        match flce_memory::suggest(&model, &req) {
            (Some(o), b) => println!(
                "\n{} tokens fit in {:.2} GiB with {} (planned peak {:.2} GiB)",
                req.seq_len,
                gib(req.gpu_bytes),
                o.python_call(),
                gib(b.peak)
            ),
            (None, b) => println!(
                "\n{} tokens do not fit in {:.2} GiB with any of flce.patch's options (the most frugal, {}, plans {:.2} GiB)",
                req.seq_len,
                gib(req.gpu_bytes),
                flce_memory::ladder(&req).last().map(|o| o.python_call()).unwrap_or_default(),
                gib(b.peak)
            ),
        }
    }
    Ok(())
}
