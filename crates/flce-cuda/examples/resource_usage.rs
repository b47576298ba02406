//! Print ptxas's resource report (registers, shared memory, spills) for every kernel, as NVRTC
//! compiles them. No GPU needed:  cargo run -p flce-cuda --example resource_usage [sm_90a] [bf16]
use flce_core::DType;
use flce_cuda::compile::{compile_with_log, expanded_source, options, Arch, KernelFile};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arch = Arch(args.first().cloned().unwrap_or_else(|| "sm_90a".into()));
    let dtype: DType = args.get(1).map(|s| s.parse().unwrap()).unwrap_or(DType::BF16);
    for file in KernelFile::ALL {
        let mut opts = options(&arch);
        opts.push("--ptxas-options=-v".into());
        match compile_with_log(&expanded_source(file, dtype), file.name(), &opts) {
            Ok((_, log)) => println!("== {} ({}, {dtype})\n{log}", file.name(), arch.0),
            Err(e) => println!("== {}: {e}", file.name()),
        }
    }
}
