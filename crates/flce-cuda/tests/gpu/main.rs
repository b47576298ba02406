//! GPU tests: the CUDA backend against the f64 oracle (small shapes, every option, all dtypes)
//! and against sampled f64 rows at the Gemma 2 and Llama 3 shapes; outputs poisoned before every
//! run; every case run twice and compared bitwise; bad targets reported without a device assert.
//!
//!     cargo test -p flce-cuda --test gpu                 # all cases (skipped without a GPU)
//!     target/.../gpu --small                             # small cases only (compute-sanitizer)
//!     target/.../gpu softcap                             # cases whose name contains "softcap"
//!     target/.../gpu --list --shard=2/3                  # the names that run would test, in
//!                                  # its order, one a line; nothing run (no GPU needed)
//!     target/.../gpu "=bf16 gemma2 sampled"              # the case of exactly that name (not
//!                                  # "... sampled fused"): a rerun of the cases a cut-short
//!                                  # run did not reach
//!     target/.../gpu --shard=2/3                         # the second of three parts, balanced by
//!                                  # the cases' measured times (shards.rs, case_ms.txt): run
//!                                  # shards 1/3, 2/3, 3/3 as three processes at once (the f64
//!                                  # oracle is the CPU's work; scripts/gpu/tests-sharded.sh)
//!     FLCE_GPU_TEST_MODES=FusedTiles target/.../gpu --small frozen
//!                                  # the oracle and frozen-classifier cases on these backward
//!                                  # families only (CublasLogits, FusedTiles, FusedSm80; comma-
//!                                  # separated): a sanitizer run on flce's own kernels, without
//!                                  # cuBLAS's (whose racecheck reports are its own)
//!
//! A custom harness, so that a machine without a GPU reports every case as skipped instead of
//! passing it; the last line is "gpu: N passed, N failed, N skipped".

mod bad_input;
mod cases;
mod frozen;
mod loss_math;
mod mean_scale;
mod mn_major;
mod nccl;
mod oracle;
mod pointers;
mod probe;
mod require;
mod sampled;
mod select;
mod shards;
mod threads;
mod three_product;
mod vocab_parallel;
mod vocab_slice;

use std::time::Instant;

use flce_core::{bf16, f16, DType, Options, Shape};
use flce_cuda::plan::Sm90Tuning;
use flce_cuda::CudaLoss;

use bad_input::{run_bad_target, run_bad_weights};
pub(crate) use cases::Case;
use cases::{cases, nccl_cases, vocab_parallel_cases};
use frozen::run_frozen;
use loss_math::run_loss_math;
use mean_scale::run_mean_scale;
use mn_major::run_mn_major;
use nccl::run_nccl_two_gpus;
use oracle::run_oracle;
use pointers::run_bad_pointers;
use require::{
    require_band, require_cluster, require_de_head, require_de_pass, require_long_tail, require_rest,
    require_token_chunks,
};
use sampled::{run_context_restored, run_sampled};
use select::selected_by;
use threads::{run_device_one, run_two_threads};
use vocab_parallel::run_vocab_parallel;

/// Whether the oracle and frozen-classifier cases run backward family `mode`: every family
/// unless `FLCE_GPU_TEST_MODES` names some (their `Debug` names, comma-separated; read once). An
/// unknown name, or none, stops the run with the list of known ones.
pub(crate) fn mode_selected(mode: flce_cuda::BackwardMode) -> bool {
    use flce_cuda::BackwardMode::{CublasLogits, FusedSm80, FusedTiles};
    static SELECTED: std::sync::OnceLock<Option<Vec<String>>> = std::sync::OnceLock::new();
    let selected = SELECTED.get_or_init(|| {
        let list = std::env::var("FLCE_GPU_TEST_MODES").ok()?;
        let known = [CublasLogits, FusedTiles, FusedSm80];
        let names: Vec<String> = list.split(',').map(str::trim).filter(|n| !n.is_empty()).map(String::from).collect();
        if names.is_empty() {
            eprintln!("FLCE_GPU_TEST_MODES is set but names no backward family (known: {known:?})");
            std::process::exit(2);
        }
        for name in &names {
            if !known.iter().any(|m| format!("{m:?}") == *name) {
                eprintln!("FLCE_GPU_TEST_MODES: unknown backward family {name:?} (known: {known:?})");
                std::process::exit(2);
            }
        }
        Some(names)
    });
    selected.as_ref().is_none_or(|names| names.iter().any(|n| *n == format!("{mode:?}")))
}

/// `--shard=I/N` (1 ≤ I ≤ N): this process runs the I-th of N parts of the selected cases,
/// balanced by their measured times (shards.rs); (1, 1) without the flag. A malformed flag stops
/// the run.
fn shard_of(args: &[String]) -> (usize, usize) {
    let Some(spec) = args.iter().find_map(|a| a.strip_prefix("--shard=")) else {
        return (1, 1);
    };
    let parsed = spec.split_once('/').and_then(|(i, n)| Some((i.parse::<usize>().ok()?, n.parse::<usize>().ok()?)));
    match parsed {
        Some((i, n)) if 1 <= i && i <= n => (i, n),
        _ => {
            eprintln!("--shard={spec}: expected I/N with 1 <= I <= N, e.g. --shard=2/3");
            std::process::exit(2);
        }
    }
}

/// The items of `list` whose position `offset + k` (k: the index in `list`) `owner` gives to
/// shard `i` (1-based).
fn in_shard<T>(list: Vec<T>, offset: usize, owner: &[usize], i: usize) -> Vec<T> {
    list.into_iter().enumerate().filter(|(k, _)| owner[offset + k] == i - 1).map(|(_, x)| x).collect()
}

/// The tests of bad input, contexts and threads outside the case lists, run as one group in the
/// first shard (in this order: `main`'s runs below).
const INPUT_GROUP: [&str; 6] =
    ["bad-target", "bad-weights", "context-restored", "bad-pointers", "two-threads", "device-1"];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let small_only = args.iter().any(|a| a == "--small");
    let shard = shard_of(&args);
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let selected: Vec<Case> =
        cases().into_iter().filter(|c| !(small_only && c.big)).filter(|c| selected_by(&filters, &c.name)).collect();
    // the tests outside the case lists run in the first shard
    let first_shard = shard.0 == 1;
    let include = |name: &str| first_shard && selected_by(&filters, name);
    // (one group, run whole where any of its names is selected)
    let include_bad_target = INPUT_GROUP.iter().any(|name| include(name));
    let include_mn_major = include("sm90-mn-major");
    let include_loss_math = include("loss-math");
    let include_mean_scale = include("mean-scale");
    let nccl_cases: Vec<(String, DType, Shape, Options)> =
        nccl_cases().into_iter().filter(|(name, ..)| selected_by(&filters, name)).collect();
    let vocab_parallel_cases = vocab_parallel_cases();
    let vocab_parallel_cases: Vec<_> =
        vocab_parallel_cases.into_iter().filter(|(name, ..)| selected_by(&filters, name)).collect();
    // one numbering over the three lists, balanced over the shards by the cases' measured times
    let (n_cases, n_vocab_parallel) = (selected.len(), vocab_parallel_cases.len());
    let names: Vec<&str> = selected
        .iter()
        .map(|c| c.name.as_str())
        .chain(vocab_parallel_cases.iter().map(|c| c.0.as_str()))
        .chain(nccl_cases.iter().map(|c| c.0.as_str()))
        .collect();
    let costs = shards::case_costs();
    let owner = shards::assign(&names, &costs, shard.1);
    let list_only = args.iter().any(|a| a == "--list");
    if shard.1 > 1 && !list_only {
        let loads = shards::loads(&names, &costs, &owner, shard.1);
        println!(
            "shard {}/{}: {:.0} s of cases by their measured times",
            shard.0,
            shard.1,
            loads[shard.0 - 1] as f64 / 1e3
        );
    }
    let selected = in_shard(selected, 0, &owner, shard.0);
    let vocab_parallel_cases = in_shard(vocab_parallel_cases, n_cases, &owner, shard.0);
    let nccl_cases = in_shard(nccl_cases, n_cases + n_vocab_parallel, &owner, shard.0);

    if list_only {
        // the run's order: loss-math and mean-scale first, the cases, the group of bad input,
        // threads and contexts, the MN-major check, the phase cases, the NCCL cases
        let mut names: Vec<&str> = vec![];
        names.extend(include_loss_math.then_some("loss-math"));
        names.extend(include_mean_scale.then_some("mean-scale"));
        names.extend(selected.iter().map(|c| c.name.as_str()));
        if include_bad_target {
            names.extend(INPUT_GROUP);
        }
        names.extend(include_mn_major.then_some("sm90-mn-major"));
        names.extend(vocab_parallel_cases.iter().map(|c| c.0.as_str()));
        names.extend(nccl_cases.iter().map(|c| c.0.as_str()));
        for name in names {
            println!("{name}");
        }
        return;
    }
    let backend = if CudaLoss::device_count() == 0 {
        Err("no CUDA device (or no driver)".to_string())
    } else {
        CudaLoss::new(0).map_err(|e| e.to_string())
    };
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    let mut rows: Vec<(String, String, String)> = vec![];
    match &backend {
        Err(why) => {
            for c in &selected {
                println!("test {} ... skipped ({why})", c.name);
                skipped += 1;
            }
            if include_bad_target {
                for name in INPUT_GROUP {
                    println!("test {name} ... skipped ({why})");
                    skipped += 1;
                }
            }
            if include_mn_major {
                println!("test sm90-mn-major ... skipped ({why})");
                skipped += 1;
            }
            if include_loss_math {
                println!("test loss-math ... skipped ({why})");
                skipped += 1;
            }
            if include_mean_scale {
                println!("test mean-scale ... skipped ({why})");
                skipped += 1;
            }
            for (name, ..) in
                vocab_parallel_cases.iter().map(|c| (&c.0, ())).chain(nccl_cases.iter().map(|c| (&c.0, ())))
            {
                println!("test {name} ... skipped ({why})");
                skipped += 1;
            }
        }
        Ok(be) => {
            println!("device: {} ({}, {} SMs)", be.device_name(), be.arch().0, be.sm_count());
            let t0 = Instant::now();
            for dt in [DType::BF16, DType::F16, DType::F32] {
                if let Err(e) = be.warm_up(dt) {
                    println!("warm-up {dt}: {e}");
                }
            }
            println!("kernels ready in {:.2} s", t0.elapsed().as_secs_f64());
            let mut run = |name: String, f: &dyn Fn() -> Result<String, String>| {
                let t = Instant::now();
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|p| {
                    Err(p
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_else(|| "panic".into()))
                });
                let ms = format!("{:.0} ms", t.elapsed().as_secs_f64() * 1e3);
                match r {
                    Ok(m) => {
                        println!("test {name} ... ok  {m}  [{ms}]");
                        passed += 1;
                        rows.push((name, "ok".into(), m));
                    }
                    Err(m) => {
                        println!("test {name} ... FAILED: {m}  [{ms}]");
                        failed += 1;
                        rows.push((name, "FAILED".into(), m));
                    }
                }
            };
            // the per-element math every epilogue uses first: it takes a fraction of a second, and
            // a time-limited run of the cases below would otherwise never reach it
            if include_loss_math {
                run("loss-math".into(), &|| run_loss_math(be));
            }
            // (a second: before the cases, for the same reason)
            if include_mean_scale {
                run("mean-scale".into(), &|| run_mean_scale(be));
            }
            // backends planning for another SM count (`sms`) or with another cluster size
            // (`cluster`, forwards and G alike), one per combination the selected cases use
            // (`band`: the forward in launches over bands of token tiles; `de_pass`: backwards in two
            // passes, dE in its own)
            let tuning_of = |cluster: Option<usize>, band: Option<usize>| {
                let t = match cluster {
                    Some(k) => Sm90Tuning { cluster: k, grad_cluster: k, ..be.sm90_tuning() },
                    None => be.sm90_tuning(),
                };
                Sm90Tuning { forward_band: band.or(t.forward_band), ..t }
            };
            type Key = (Option<usize>, Option<usize>, Option<usize>, Option<bool>, Option<bool>);
            let mut planning_for: std::collections::HashMap<Key, CudaLoss> = Default::default();
            for c in &selected {
                let key = (c.sms, c.cluster, c.band, c.de_pass, c.token_chunks);
                if key == (None, None, None, None, None) || planning_for.contains_key(&key) {
                    continue;
                }
                match CudaLoss::new(0) {
                    Ok(b) => {
                        let b = b.with_sm90_tuning(tuning_of(c.cluster, c.band)).with_de_pass(c.de_pass);
                        let b = match c.token_chunks {
                            Some(on) => b.with_token_chunks(Some(on)),
                            None => b,
                        };
                        planning_for.insert(key, if let Some(sms) = c.sms { b.planning_for_sms(sms) } else { b });
                    }
                    Err(e) => println!("backend for {key:?}: {e}"),
                }
            }
            for c in &selected {
                let be = match (c.sms, c.cluster, c.band, c.de_pass, c.token_chunks) {
                    (None, None, None, None, None) => be,
                    key => match planning_for.get(&key) {
                        Some(b) => b,
                        None => {
                            run(c.name.clone(), &|| Err(format!("no backend for {key:?}")));
                            continue;
                        }
                    },
                };
                let f = || -> Result<String, String> {
                    if let Some(k) = c.cluster {
                        require_cluster(be, c, k)?;
                    }
                    if let Some(b) = c.band {
                        require_band(be, c, b)?;
                    }
                    if c.name.contains(" rest ") {
                        require_rest(be, c)?;
                    }
                    if c.name.contains("de-pass") {
                        require_de_pass(be, c)?;
                    }
                    if c.name.ends_with("de-head") {
                        require_de_head(be, c)?;
                    }
                    if c.name.ends_with("long-tail") {
                        require_long_tail(be, c)?;
                    }
                    if c.name.ends_with("token-chunks") {
                        require_token_chunks(be, c)?;
                    }
                    match (c.dtype, c.big) {
                        (DType::BF16, false) if c.frozen => run_frozen::<bf16>(be, c),
                        (DType::F16, false) if c.frozen => run_frozen::<f16>(be, c),
                        (DType::F32, false) if c.frozen => run_frozen::<f32>(be, c),
                        (DType::BF16, false) => run_oracle::<bf16>(be, c),
                        (DType::F16, false) => run_oracle::<f16>(be, c),
                        (DType::F32, false) => run_oracle::<f32>(be, c),
                        (DType::BF16, true) => run_sampled::<bf16>(be, c),
                        (DType::F16, true) => run_sampled::<f16>(be, c),
                        (DType::F32, true) => run_sampled::<f32>(be, c),
                    }
                };
                run(c.name.clone(), &f);
            }
            if include_bad_target {
                run("bad-target".into(), &|| run_bad_target(be));
                run("bad-weights".into(), &|| run_bad_weights(be));
                run("context-restored".into(), &|| run_context_restored(be));
                run("bad-pointers".into(), &|| run_bad_pointers(be));
                run("two-threads".into(), &|| run_two_threads(be));
                if CudaLoss::device_count() > 1 {
                    run("device-1".into(), &|| run_device_one(be));
                } else {
                    println!("test device-1 ... skipped (one GPU; runs on the two-GPU machine)");
                    skipped += 1;
                }
            }
            if include_mn_major {
                if be.arch().0 == "sm_90a" {
                    run("sm90-mn-major".into(), &|| run_mn_major(be));
                } else {
                    println!("test sm90-mn-major ... skipped ({} is not Hopper)", be.arch().0);
                    skipped += 1;
                }
            }
            for (name, dtype, shape, opts, bias, weights) in &vocab_parallel_cases {
                let f = || match dtype {
                    DType::BF16 => run_vocab_parallel::<bf16>(be, *shape, opts, *bias, *weights),
                    DType::F16 => run_vocab_parallel::<f16>(be, *shape, opts, *bias, *weights),
                    DType::F32 => run_vocab_parallel::<f32>(be, *shape, opts, *bias, *weights),
                };
                run(name.clone(), &f);
            }
            for (name, dtype, shape, opts) in &nccl_cases {
                if CudaLoss::device_count() < 2 {
                    println!("test {name} ... skipped (one GPU; runs on the two-GPU machine)");
                    skipped += 1;
                    continue;
                }
                let f = || match dtype {
                    DType::BF16 => run_nccl_two_gpus::<bf16>(be, *shape, opts),
                    DType::F16 => run_nccl_two_gpus::<f16>(be, *shape, opts),
                    DType::F32 => run_nccl_two_gpus::<f32>(be, *shape, opts),
                };
                run(name.clone(), &f);
            }
        }
    }
    println!("\n| case | result | errors vs f64 reference |");
    println!("|---|---|---|");
    for (n, r, m) in &rows {
        println!("| {n} | {r} | {m} |");
    }
    println!("\ngpu: {passed} passed, {failed} failed, {skipped} skipped");
    if failed > 0 {
        std::process::exit(1);
    }
}
