//! Print ptxas's resource report (registers, shared memory, spills) for every kernel, as NVRTC
//! compiles them, and optionally write the cubins (for cuobjdump -sass). No GPU needed:
//!   cargo run -p flce-cuda --example resource_usage \[sm_90a\] \[bf16\] [cubin-dir] [logit-opts]
//! `logit-opts` (bits: 1 bias, 2 softcap, 4 smoothing) compiles the sm90 forward's, G's and the
//! three-product G's modules specialised for those options (what a call with them loads:
//! compile::variant_source) instead of every file's default module; their cubins are named with
//! `-optsN`. `ONLY=sm90/grad.cu` (an environment variable) compiles that kernel file alone.
use flce_core::DType;
use flce_cuda::compile::{compile_with_log, options, variant_source, Arch, KernelFile};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arch = Arch(args.first().cloned().unwrap_or_else(|| "sm_90a".into()));
    let dtype: DType = args.get(1).map(|s| s.parse().unwrap()).unwrap_or(DType::BF16);
    let cubin_dir = args.get(2).map(std::path::PathBuf::from);
    let logit_opts: Option<u8> = args.get(3).map(|s| s.parse().expect("logit-opts: a number 1..=7"));
    let only = std::env::var("ONLY").ok();
    let files = KernelFile::ALL.into_iter().filter(|f| {
        f.builds_for(&arch, dtype)
            && (logit_opts.is_none() || f.has_logit_variants())
            && only.as_deref().is_none_or(|o| o == f.name())
    });
    for file in files {
        let mut opts = options(&arch);
        opts.push("--ptxas-options=-v".into());
        let variant = logit_opts.map_or(String::new(), |m| format!("-opts{m}"));
        match compile_with_log(&variant_source(file, dtype, logit_opts), file.name(), &opts) {
            Ok((cubin, log)) => {
                println!("== {}{variant} ({}, {dtype})\n{log}", file.name(), arch.0);
                if let Some(dir) = &cubin_dir {
                    std::fs::create_dir_all(dir).expect("cubin dir");
                    let name = format!("{}{variant}.{}.{dtype}.cubin", file.name().replace('/', "_"), arch.0);
                    std::fs::write(dir.join(name), cubin).expect("writing the cubin");
                }
            }
            Err(e) => println!("== {}: {e}", file.name()),
        }
    }
}
