use std::io::Write;

use super::*;

#[test]
fn parameter_counts_match_the_published_models() {
    for (name, params) in [
        ("Llama-3.2-1B", 1_235_814_400u64),
        ("Llama-3.1-8B", 8_030_261_248),
        ("Qwen2.5-0.5B", 494_032_768),
        ("Gemma-2-2B", 2_614_341_888),
    ] {
        assert_eq!(Model::built_in(name).unwrap().params(), params, "{name}");
    }
    // within 0.1% where the published count is rounded
    for (name, params) in [("Qwen2.5-1.5B", 1.544e9), ("Qwen2.5-7B", 7.616e9), ("Gemma-2-9B", 9.242e9)] {
        let p = Model::built_in(name).unwrap().params() as f64;
        assert!((p - params).abs() / params < 1e-3, "{name}: {p}");
    }
    assert!(Model::built_in("llama-3.2-1b").is_ok(), "case-insensitive");
    assert!(matches!(Model::built_in("GPT-5"), Err(PlanError::UnknownModel { .. })));
}

#[test]
fn a_config_json_gives_the_same_model() {
    let path = std::env::temp_dir().join(format!("flce-memory-test-{}.json", std::process::id()));
    let mut f = std::fs::File::create(&path).unwrap();
    write!(
        f,
        r#"{{"model_type": "gemma2", "hidden_size": 2304, "num_hidden_layers": 26, "num_attention_heads": 8,
            "num_key_value_heads": 4, "head_dim": 256, "intermediate_size": 9216, "vocab_size": 256000,
            "tie_word_embeddings": true, "final_logit_softcapping": 30.0, "sliding_window": 4096}}"#
    )
    .unwrap();
    let m = Model::from_config_json(&path).unwrap();
    let builtin = Model::built_in("Gemma-2-2B").unwrap();
    assert_eq!(Model { name: builtin.name.clone(), ..m }, builtin);
    std::fs::write(&path, "{\"hidden_size\": 1}").unwrap();
    let err = Model::from_config_json(&path).unwrap_err().to_string();
    assert!(err.contains("num_attention_heads"), "{err}");
    std::fs::remove_file(&path).unwrap();
}

fn setup(loss: Loss, activations: Activations, seq_len: u64) -> Setup {
    Setup {
        seq_len,
        batch: 1,
        optimizer: Optimizer::AdamW,
        lora_rank: Some(16),
        loss,
        activations,
        mlp_tiles: 1,
        norm_tiles: 1,
        stream_weights: false,
        final_norm_checkpointed: true,
        attention: Attention::Sdpa,
    }
}

#[test]
fn each_saving_saves_what_it_should() {
    let m = Model::built_in("Gemma-2-2B").unwrap();
    let at = |loss, act| estimate(&m, &setup(loss, act, 16_384));
    let kept = at(Loss::Flce, Activations::Kept);
    let ckpt = at(Loss::Flce, Activations::Checkpointed);
    let off = at(Loss::Flce, Activations::Offloaded);
    assert!(
        ckpt.activations * 10 < kept.activations,
        "checkpointing keeps 2h of ~{} per token and layer",
        layer_activation_bytes_per_token(&m)
    );
    assert!(off.activations < ckpt.activations && off.peak < ckpt.peak && ckpt.peak < kept.peak);
    let plain = at(Loss::Plain, Activations::Checkpointed);
    let compile = at(Loss::Compile, Activations::Checkpointed);
    assert!(plain.loss > compile.loss && compile.loss > ckpt.loss);
    // the plain loss at Gemma 2 and 8192 tokens: ~23 GB, as measured (24 GB with the gradients)
    let plain_8k = estimate(&m, &setup(Loss::Plain, Activations::Kept, 8192)).loss as f64;
    assert!((plain_8k / 1e9 - 23.1).abs() < 1.0, "{plain_8k}");
    // LoRA trains a sliver of the parameters; a full fine-tune's AdamW states are 8 bytes each
    let full = estimate(&m, &Setup { lora_rank: None, ..setup(Loss::Flce, Activations::Checkpointed, 4096) });
    assert_eq!(full.optimizer, 8 * m.params());
    assert!(ckpt.optimizer * 100 < full.optimizer);
}

#[test]
fn the_longest_context_fits_and_one_step_more_does_not() {
    let m = Model::built_in("Llama-3.2-1B").unwrap();
    let gpu = 10u64 << 30;
    for loss in Loss::ALL {
        for act in Activations::ALL {
            let s = setup(loss, act, 0);
            let t = longest_context(&m, &s, gpu, 256, 1 << 20).expect("some context fits on 10 GiB with LoRA");
            assert!(estimate(&m, &Setup { seq_len: t, ..s.clone() }).peak <= gpu);
            if t < 1 << 20 {
                assert!(estimate(&m, &Setup { seq_len: t + 256, ..s.clone() }).peak > gpu, "{loss:?} {act:?}");
            }
        }
    }
    let req = Request::new(10.0, 8192, 1, "adamw", 16).unwrap();
    let rows = plan(&m, &req);
    let longest = |l, a| rows.iter().find(|r| r.loss == l && r.activations == a).unwrap().longest.unwrap();
    assert!(longest(Loss::Flce, Activations::Offloaded) > longest(Loss::Flce, Activations::Checkpointed));
    assert!(longest(Loss::Flce, Activations::Checkpointed) > longest(Loss::Plain, Activations::Checkpointed));
    let t = table(&m, &req, &rows);
    assert!(t.contains("| flce | checkpointing + offload |") && t.contains("measured on an H200"), "{t}");
    // a 7B full fine-tune with AdamW does not fit on 10 GiB at any length
    let big = Model::built_in("Qwen2.5-7B").unwrap();
    let none = longest_context(
        &big,
        &Setup { lora_rank: None, ..setup(Loss::Flce, Activations::Offloaded, 0) },
        gpu,
        256,
        1 << 20,
    );
    assert_eq!(none, None);
}

#[test]
fn the_chart_has_a_line_per_combination_and_the_card() {
    let m = Model::built_in("Qwen2.5-0.5B").unwrap();
    let req = Request::new(10.0, 4096, 1, "adamw", 0).unwrap();
    let seqs = doubling_seqs(65_536);
    assert_eq!((seqs[0], *seqs.last().unwrap(), seqs.len()), (256, 65_536, 9));
    let c = curves(&m, &req, &seqs);
    assert_eq!(c.len(), 9);
    for curve in &c {
        assert!(curve.peaks.windows(2).all(|w| w[0] <= w[1]), "peak grows with the sequence");
    }
    let s = svg(&m, &req, &seqs, &c);
    assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>"));
    assert_eq!(s.matches("<polyline").count(), 9);
    assert!(s.contains("GPU 10 GiB") && s.contains("flce, checkpointing + offload"));
}

#[test]
fn the_chart_is_a_png_where_the_path_says_so() {
    use resvg::tiny_skia::Pixmap;
    let m = Model::built_in("Gemma-2-2B").unwrap();
    let req = Request::new(10.0, 4096, 1, "adamw", 16).unwrap();
    let dir = std::env::temp_dir().join(format!("flce-chart-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (png, svg_path) = (dir.join("plan.PNG"), dir.join("plan.svg"));
    write_chart(&m, &req, &png).unwrap();
    write_chart(&m, &req, &svg_path).unwrap();
    assert!(std::fs::read_to_string(&svg_path).unwrap().starts_with("<svg"));
    let image = Pixmap::decode_png(&std::fs::read(&png).unwrap()).unwrap();
    assert_eq!((image.width(), image.height()), (960, 560));
    // drawn: the title's text (the embedded font) in the top band, the lines below it, on white
    let dark = |y0: u32, y1: u32| {
        (y0..y1)
            .flat_map(|y| (0..960).map(move |x| (x, y)))
            .filter(|&(x, y)| {
                let p = image.pixel(x, y).unwrap();
                p.red() < 128 && p.green() < 128 && p.blue() < 128
            })
            .count()
    };
    assert!(dark(0, 30) > 200, "title text");
    assert!(dark(40, 510) > 2000, "axes, lines and labels");
    assert_eq!(image.pixel(959, 559).unwrap().red(), 255, "a white background");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tiled_mlps_leave_one_tile_of_the_mlp_intermediates() {
    let m = Model::built_in("Gemma-2-2B").unwrap();
    let tokens = 65_536;
    // (flash attention: no window mask, whose T² terms would set the peak at 64k)
    let setup_at =
        |act, tiles| Setup { mlp_tiles: tiles, attention: Attention::Flash, ..setup(Loss::Flce, act, tokens) };
    let at = |act, tiles| estimate(&m, &setup_at(act, tiles));
    let full_ft = |act, tiles| estimate(&m, &Setup { lora_rank: None, ..setup_at(act, tiles) });
    let mlp = mlp_activation_bytes_per_token(&m) * tokens;
    // Gemma-2-2B's MLP at 64k tokens: 4 × 9216 bf16 values a token, 4.5 GiB
    assert_eq!(mlp, 2 * 4 * 9216 * tokens);
    // the MLP's gradient buffers in a layer's backward: 3 of its 4 intermediates' size, per tile
    let grads = mlp / 4 * 3;
    // LoRA (attention adapters): the frozen MLP keeps 3 of its 4 intermediates, and untiled not
    // its input either (a tiled MLP's checkpoint keeps it)
    let (lora_mlp, mlp_input) = (mlp / 4 * 3, 2 * m.hidden * tokens);
    // a trainable down projection's input, act(gate)·up, freed before the gradient buffers are made
    let product = mlp / 4;
    for act in [Activations::Checkpointed, Activations::Offloaded] {
        let (plain, tiled) = (full_ft(act, 1), full_ft(act, 8));
        assert_eq!(plain.recompute - tiled.recompute, (mlp - mlp / 8) + (grads - grads / 8) - (product - product / 8));
        assert_eq!(plain.activations, tiled.activations);
        let (plain, tiled) = (at(act, 1), at(act, 8));
        assert_eq!(plain.recompute - tiled.recompute, (lora_mlp - lora_mlp / 8) - mlp_input + (grads - grads / 8));
        assert_eq!(plain.activations, tiled.activations);
    }
    // without checkpointing no layer keeps its MLP's intermediates; one tile's live in its backward
    let (plain, tiled) = (full_ft(Activations::Kept, 1), full_ft(Activations::Kept, 4));
    assert_eq!(plain.activations - tiled.activations, m.layers * mlp);
    assert_eq!(tiled.recompute, mlp / 4 + grads / 4);
    let (plain, tiled) = (at(Activations::Kept, 1), at(Activations::Kept, 4));
    assert_eq!(plain.activations - tiled.activations, m.layers * (lora_mlp - mlp_input));
    assert_eq!(tiled.recompute, lora_mlp / 4 + grads / 4);
    // on the 10 GiB card, tiles lengthen the longest context of checkpointing + offload
    let req = Request::new(10.0, 8192, 1, "adamw", 16).unwrap();
    let longest = |r: &Request| {
        plan(&m, r).iter().find(|p| p.loss == Loss::Flce && p.activations == Activations::Offloaded).unwrap().longest
    };
    let tiled_req = req.clone().with_mlp_tiles(8).unwrap();
    assert!(longest(&tiled_req) > longest(&req), "{:?} vs {:?}", longest(&tiled_req), longest(&req));
    assert!(table(&m, &tiled_req, &plan(&m, &tiled_req)).contains("MLPs in 8 token tiles"));
    assert!(req.with_mlp_tiles(0).is_err());
}

/// Peaks measured on the H200 (`benchmarks/activation_memory.py`, torch 2.11, bf16,
/// batch 1; `benchmarks/results/2026-12-01-h200-planner-calibration/llama1b-untied/`): torch.cuda.max_memory_allocated over a
/// training step, against the plan's peak less the CUDA context and the allocator's slack.
#[test]
fn the_plan_matches_the_h200_measurements() {
    let ckpt = Activations::Checkpointed;
    let off = Activations::Offloaded;
    let (sdpa, flash) = (Attention::Sdpa, Attention::Flash);
    #[rustfmt::skip]
    let runs = [
        // (model, LoRA rank, optimizer, tokens, activations, MLP tiles, attention, measured MB)
        // results/2026-12-01-h200-planner-calibration/llama1b-untied: Llama-3.2-1B as benchmarks/activation_memory.py built it then, with
        // LlamaConfig's default untied embeddings ("Llama-3.2-1B-untied" below)
        ("Llama-3.2-1B-untied", None, Optimizer::AdamWBf16, 16_384, ckpt, 1, sdpa, 14_364.0),
        ("Llama-3.2-1B-untied", None, Optimizer::AdamWBf16, 16_384, off, 1, sdpa, 14_364.0),
        ("Llama-3.2-1B-untied", None, Optimizer::AdamWBf16, 16_384, off, 4, sdpa, 14_365.0),
        ("Llama-3.2-1B-untied", None, Optimizer::AdamWBf16, 32_768, ckpt, 1, sdpa, 15_909.0),
        ("Llama-3.2-1B-untied", None, Optimizer::AdamWBf16, 32_768, off, 1, sdpa, 15_741.0),
        ("Llama-3.2-1B-untied", None, Optimizer::AdamWBf16, 32_768, off, 4, sdpa, 14_370.0),
        ("Gemma-2-2B", Some(16), Optimizer::AdamW, 8_192, ckpt, 1, sdpa, 7_788.0),
        // results/2026-12-01-h200-planner-calibration/gemma2-lora-sdpa-8k and gemma2-lora-sdpa-16k
        // (16k, a process per run): the window mask's T² terms
        ("Gemma-2-2B", Some(16), Optimizer::AdamW, 8_192, off, 1, sdpa, 6_982.0),
        ("Gemma-2-2B", Some(16), Optimizer::AdamW, 8_192, off, 4, sdpa, 6_586.0),
        ("Gemma-2-2B", Some(16), Optimizer::AdamW, 16_384, ckpt, 1, sdpa, 10_834.0),
        ("Gemma-2-2B", Some(16), Optimizer::AdamW, 16_384, off, 1, sdpa, 9_199.0),
        ("Gemma-2-2B", Some(16), Optimizer::AdamW, 16_384, off, 4, sdpa, 8_408.0),
        // results/2026-12-01-h200-planner-calibration/gemma2-lora-flex-16k: flex attention (no T² terms), capped at 10 GB; the
        // MLP phase sets the peak, with LoRA's frozen MLP weights
        ("Gemma-2-2B", Some(16), Optimizer::AdamW, 16_384, off, 1, flash, 8_369.0),
        ("Gemma-2-2B", Some(16), Optimizer::AdamW, 16_384, off, 4, flash, 7_577.0),
        // results/2026-12-01-h200-planner-calibration/gemma2-lora-10gib-longest: the planner's longest context for this setup on 10 GiB
        // (23,296 tokens, 9,734 MB reserved under the cap; 1.25× it, 29,184, ran out of memory)
        ("Gemma-2-2B", Some(16), Optimizer::AdamW, 23_296, off, 4, flash, 8_602.0),
        // results/2026-12-01-h200-planner-calibration/qwen15-full: full fine-tune, tied embeddings; the
        // optimizer step sets the peak but at 32k without the tiled MLP
        ("Qwen2.5-1.5B", None, Optimizer::AdamWBf16, 16_384, ckpt, 1, sdpa, 14_802.0),
        ("Qwen2.5-1.5B", None, Optimizer::AdamWBf16, 16_384, off, 1, sdpa, 14_801.0),
        ("Qwen2.5-1.5B", None, Optimizer::AdamWBf16, 16_384, off, 4, sdpa, 14_801.0),
        ("Qwen2.5-1.5B", None, Optimizer::AdamWBf16, 32_768, ckpt, 1, sdpa, 16_624.0),
        ("Qwen2.5-1.5B", None, Optimizer::AdamWBf16, 32_768, off, 1, sdpa, 16_451.0),
        ("Qwen2.5-1.5B", None, Optimizer::AdamWBf16, 32_768, off, 4, sdpa, 14_810.0),
    ];
    // Runs since flce.patch checkpoints the final norm (Setup::final_norm_checkpointed):
    // results/2026-12-01-h200-planner-calibration/final-norm — Llama-3.2-1B (tied) with fused AdamW on bf16
    // parameters at 16k / 32k / 64k, and Gemma-2-2B LoRA at the planner's longest on 10 GiB
    #[rustfmt::skip]
    let runs_final_norm = [
        ("Llama-3.2-1B", None, Optimizer::AdamWBf16Fused, 16_384, ckpt, 1, sdpa, 11_819.0),
        ("Llama-3.2-1B", None, Optimizer::AdamWBf16Fused, 16_384, off, 1, sdpa, 11_819.0),
        ("Llama-3.2-1B", None, Optimizer::AdamWBf16Fused, 16_384, off, 4, sdpa, 10_859.0),
        ("Llama-3.2-1B", None, Optimizer::AdamWBf16Fused, 32_768, ckpt, 1, sdpa, 14_404.0),
        ("Llama-3.2-1B", None, Optimizer::AdamWBf16Fused, 32_768, off, 1, sdpa, 14_237.0),
        ("Llama-3.2-1B", None, Optimizer::AdamWBf16Fused, 32_768, off, 4, sdpa, 12_252.0),
        ("Llama-3.2-1B", None, Optimizer::AdamWBf16Fused, 65_536, ckpt, 1, sdpa, 21_137.0),
        ("Llama-3.2-1B", None, Optimizer::AdamWBf16Fused, 65_536, off, 1, sdpa, 19_178.0),
        ("Llama-3.2-1B", None, Optimizer::AdamWBf16Fused, 65_536, off, 4, sdpa, 15_146.0),
        ("Gemma-2-2B", Some(16), Optimizer::AdamW, 25_856, off, 4, flash, 8_991.0),
    ];
    // results/2026-12-01-h200-planner-calibration/norm-tiles: the same Gemma-2-2B LoRA setup with the layers' norms in 4
    // token tiles, at 25,856 tokens, 29,120 (1.25× the longest without norm tiles, which ran out
    // of memory without them) and 31,232 (the planner's longest with them)
    #[rustfmt::skip]
    let runs_norm_tiles = [
        ("Gemma-2-2B", Some(16), Optimizer::AdamW, 25_856, off, 4, flash, 8_104.0),
        ("Gemma-2-2B", Some(16), Optimizer::AdamW, 29_120, off, 4, flash, 8_476.0),
        ("Gemma-2-2B", Some(16), Optimizer::AdamW, 31_232, off, 4, flash, 8_720.0),
    ];
    // results/2026-12-01-h200-planner-calibration/streamed-weights: the same setup with the layers' frozen
    // weights streamed (flce.weights), at 25,856 tokens (4 MLP and norm tiles) and at the
    // planner's longest with 8 of each, 73,728 (92,160 ran out of memory)
    #[rustfmt::skip]
    let runs_streamed = [
        ("Gemma-2-2B", Some(16), Optimizer::AdamW, 25_856, off, 4, flash, 4_540.0),
        ("Gemma-2-2B", Some(16), Optimizer::AdamW, 73_728, off, 8, flash, 8_999.0),
    ];
    let runs = runs
        .iter()
        .map(|r| (r, false, 1, false))
        .chain(runs_final_norm.iter().map(|r| (r, true, 1, false)))
        .chain(runs_norm_tiles.iter().map(|r| (r, true, 4, false)))
        .chain(runs_streamed.iter().map(|r| (r, true, r.5, true)));
    let mut report = String::new();
    for (
        &(name, lora_rank, optimizer, seq_len, activations, mlp_tiles, attention, measured),
        final_norm_checkpointed,
        norm_tiles,
        stream_weights,
    ) in runs
    {
        let m = match name.strip_suffix("-untied") {
            Some(base) => Model { tied_embeddings: false, ..Model::built_in(base).unwrap() },
            None => Model::built_in(name).unwrap(),
        };
        let s = Setup {
            seq_len,
            batch: 1,
            optimizer,
            lora_rank,
            loss: Loss::Flce,
            activations,
            mlp_tiles,
            norm_tiles,
            stream_weights,
            attention,
            final_norm_checkpointed,
        };
        let b = estimate(&m, &s);
        let planned = (b.peak - b.cuda_context - b.allocator_slack) as f64 / (1u64 << 20) as f64;
        let err = planned / measured - 1.0;
        report += &format!("{name} {seq_len} {activations:?} tiles {mlp_tiles}/{norm_tiles} {attention:?}: planned {planned:.0} MB, measured {measured:.0} ({:+.1}%)\n", 100.0 * err);
        // within ±5% (the plan's allocator slack, 15% more, is not counted here), but +7% where a
        // full fine-tune's backward sets the peak from 32k on without a tiled MLP: the layer's
        // recompute there is still over-predicted by about one MLP intermediate a token
        // (Llama-3.2-1B +4.1% at 32k, +6.1% at 64k; Qwen2.5-1.5B +2.4%; which of its buffers is
        // freed earlier than modeled is not traced) — on the safe side, and within 10%
        let full_ft_backward = lora_rank.is_none() && seq_len >= 32_768 && mlp_tiles == 1;
        let tolerance = if full_ft_backward { 0.07 } else { 0.05 };
        // Under by 8% where the layers' weights are streamed: Gemma-2-2B LoRA with flex attention
        // is under-predicted by a steady ~11 KB a token in every run (-255 MB at 23,296 tokens,
        // -304 at 25,856 with weights resident or streamed, -347 at 31,232; about one f32
        // [T, hidden] tensor, likely Gemma2RMSNorm's f32 upcast, not traced), and streaming takes
        // 3.6 GB of weights off the total, so the same bytes are a larger fraction (-6.7%, -7.1%).
        // The planner's longest with streaming still ran (the_longest_context_on_ten_gib...).
        let floor = if stream_weights { -0.08 } else { -0.05 };
        assert!((floor..=tolerance).contains(&err), "{report}");
    }
    println!("{report}");
}

#[test]
fn sdpa_window_masks_cost_t_squared_past_the_window() {
    let gemma = Model::built_in("Gemma-2-2B").unwrap();
    let at = |m: &Model, attention, seq| {
        estimate(m, &Setup { attention, mlp_tiles: 4, ..setup(Loss::Flce, Activations::Offloaded, seq) })
    };
    // past the 4096-token window: the mask's byte per token pair held, 4 more in the attention phase
    let (sdpa, flash) = (at(&gemma, Attention::Sdpa, 16_384), at(&gemma, Attention::Flash, 16_384));
    assert_eq!(sdpa.activations - flash.activations, 16_384 * 16_384);
    assert!(sdpa.recompute > flash.recompute && sdpa.peak > flash.peak);
    // within the window, and for models without one, sdpa costs nothing more
    assert_eq!(at(&gemma, Attention::Sdpa, 4096), at(&gemma, Attention::Flash, 4096));
    let llama = Model::built_in("Llama-3.2-1B").unwrap();
    assert_eq!(at(&llama, Attention::Sdpa, 65_536), at(&llama, Attention::Flash, 65_536));
    // so on a 10 GiB card Gemma 2 reaches further with flash attention
    let req = Request::new(10.0, 16_384, 1, "adamw", 16).unwrap().with_mlp_tiles(4).unwrap();
    let longest = |r: &Request| {
        plan(&gemma, r)
            .iter()
            .find(|p| p.loss == Loss::Flce && p.activations == Activations::Offloaded)
            .unwrap()
            .longest
    };
    // (flash / flex by default)
    assert_eq!(req.attention, Attention::Flash);
    let sdpa = req.clone().with_attention("sdpa").unwrap();
    let (s, f) = (longest(&sdpa), longest(&req));
    assert!(s < f, "{s:?} vs {f:?}");
    assert_eq!(req.clone().with_attention("flex_attention").unwrap(), req);
    assert!(table(&gemma, &sdpa, &plan(&gemma, &sdpa)).contains("dense mask past the 4096-token window"));
    assert!(req.with_attention("eager").is_err());
}

#[test]
fn the_longest_context_on_ten_gib_is_one_that_ran() {
    // H200 under a 10 GiB cap (benchmarks/results/2026-12-01-h200-planner-calibration/gemma2-lora-10gib-longest/): Gemma-2-2B, LoRA r 16,
    // AdamW, flex attention, checkpointing + offload + 4 MLP tiles: 23,296 tokens ran (9,734 MB
    // reserved), 29,184 ran out of memory — the planner's answer must lie in between
    // (those runs were made before flce.patch checkpointed the final norm: the setup without it)
    let m = Model::built_in("Gemma-2-2B").unwrap();
    let req = Request::new(10.0, 8192, 1, "adamw", 16).unwrap().with_mlp_tiles(4).unwrap();
    let measured = Setup { final_norm_checkpointed: false, ..req.setup(Loss::Flce, Activations::Offloaded, 0) };
    let longest = longest_context(&m, &measured, req.gpu_bytes, 256, 1 << 20).unwrap();
    assert!((23_296..29_184).contains(&longest), "{longest}");
    // with the final norm checkpointed, as flce.patch does now (results/2026-12-01-h200-planner-calibration/final-norm):
    // 25,856 tokens ran (8,991 MB allocated, 10,224 MB reserved of the 10,240); the layers'
    // backward sets this peak, which the norm's checkpoint does not lower, so the answer is the
    // same and still one that ran
    let now = plan(&m, &req)
        .iter()
        .find(|p| p.loss == Loss::Flce && p.activations == Activations::Offloaded)
        .unwrap()
        .longest
        .unwrap();
    assert!((23_296..=25_856).contains(&now), "{now}");
    assert_eq!(now, longest);
    // with the layers' norms in 4 token tiles too (results/2026-12-01-h200-planner-calibration/norm-tiles): 29,120 tokens
    // ran (9,712 MB reserved) where without norm tiles they ran out of memory, and so did the
    // planner's longest, 31,232 (10,204 MB reserved of the 10,240)
    let norms = req.clone().with_norm_tiles(4).unwrap();
    let with_norm_tiles = plan(&m, &norms)
        .iter()
        .find(|p| p.loss == Loss::Flce && p.activations == Activations::Offloaded)
        .unwrap()
        .longest
        .unwrap();
    assert!((29_120..=31_232).contains(&with_norm_tiles), "{with_norm_tiles}");
    assert!(req.clone().with_norm_tiles(0).is_err());
    // with 8 MLP and norm tiles and the frozen weights streamed (results/2026-12-01-h200-planner-calibration/streamed-weights):
    // 73,728 tokens ran (8,999 MB allocated, 10,228 MB reserved of the 10,240) and 92,160 ran out
    // of memory — 64k on a 10 GiB card
    let streamed = req.with_mlp_tiles(8).unwrap().with_norm_tiles(8).unwrap().with_stream_weights(true);
    let with_streaming = plan(&m, &streamed)
        .iter()
        .find(|p| p.loss == Loss::Flce && p.activations == Activations::Offloaded)
        .unwrap()
        .longest
        .unwrap();
    assert!((65_536..92_160).contains(&with_streaming) && with_streaming <= 73_728, "{with_streaming}");
}

#[test]
fn a_checkpointed_final_norm_keeps_its_input_only() {
    // the final norm's saved tensors (6h a token) and the loss's input (2h): with the norm
    // checkpointed, its input (2h) instead, and none of it with offload but while the loss's
    // backward runs (prefetched then)
    let m = Model::built_in("Llama-3.2-1B").unwrap();
    let t = 16_384u64;
    let at = |act, ckpt| estimate(&m, &Setup { final_norm_checkpointed: ckpt, ..setup(Loss::Flce, act, t) });
    let h = m.hidden * t;
    assert_eq!(
        at(Activations::Checkpointed, false).activations - at(Activations::Checkpointed, true).activations,
        4 * h
    );
    assert_eq!(at(Activations::Offloaded, false).activations - at(Activations::Offloaded, true).activations, 6 * h);
    // without checkpointing the flag changes nothing
    assert_eq!(at(Activations::Kept, false), at(Activations::Kept, true));
}

#[test]
fn a_fused_adamw_step_makes_no_temporaries() {
    // torch.optim.AdamW(fused=True) updates each parameter in one kernel: the same states as the
    // foreach step, none of its moment-sized temporary list
    let m = Model::built_in("Llama-3.2-1B").unwrap();
    let at = |optimizer: &str, seq| {
        let o = optimizer.parse::<Optimizer>().unwrap();
        estimate(&m, &Setup { optimizer: o, lora_rank: None, ..setup(Loss::Flce, Activations::Offloaded, seq) })
    };
    let (foreach, fused) = (at("adamw-bf16", 1024), at("adamw-bf16-fused", 1024));
    assert_eq!((foreach.optimizer, fused.optimizer), (4 * m.params(), 4 * m.params()));
    assert_eq!((foreach.optimizer_step, fused.optimizer_step), (2 * m.params(), 0));
    assert!(fused.peak < foreach.peak, "at 1024 tokens the step sets the peak");
    assert!(at("adamw-bf16-fused", 65_536).peak <= at("adamw-bf16", 65_536).peak);
    assert_eq!(at("adamw-fused", 1024).optimizer, 8 * m.params());
    assert!("adamw-fusd".parse::<Optimizer>().is_err());
}

#[test]
fn streamed_frozen_weights_leave_two_layers_on_the_gpu() {
    // flce.weights: every layer's frozen (LoRA base) weights but two leave the GPU; the adapters,
    // embeddings and final norm stay, and a full fine-tune (nothing frozen) streams nothing
    let m = Model::built_in("Gemma-2-2B").unwrap();
    let at = |stream_weights, lora_rank| {
        estimate(
            &m,
            &Setup {
                stream_weights,
                lora_rank,
                mlp_tiles: 8,
                norm_tiles: 8,
                ..setup(Loss::Flce, Activations::Offloaded, 65_536)
            },
        )
    };
    let (resident, streamed) = (at(false, Some(16)), at(true, Some(16)));
    assert_eq!(resident.weights - streamed.weights, 2 * (m.layers - 2) * m.layer_params());
    assert_eq!(resident.recompute, streamed.recompute);
    assert_eq!(at(false, None), at(true, None));
    // what it is for: Gemma-2-2B LoRA at 64k tokens on a 10 GiB card, which
    // resident weights cannot reach (the planner's longest with streaming, 73,728, ran: see
    // the_longest_context_on_ten_gib_is_one_that_ran)
    let req =
        Request::new(10.0, 65_536, 1, "adamw", 16).unwrap().with_mlp_tiles(8).unwrap().with_norm_tiles(8).unwrap();
    let longest = |r: &Request| {
        plan(&m, r).iter().find(|p| p.loss == Loss::Flce && p.activations == Activations::Offloaded).unwrap().longest
    };
    assert!(longest(&req).unwrap() < 65_536);
    let streaming = req.with_stream_weights(true);
    assert!(longest(&streaming).unwrap() >= 65_536);
    assert!(table(&m, &streaming, &plan(&m, &streaming)).contains("frozen layer weights streamed"));
}
