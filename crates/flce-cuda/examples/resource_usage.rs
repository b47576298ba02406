//! Print ptxas's resource report (registers, shared memory, spills) for every kernel, as NVRTC
//! compiles them, and optionally write the cubins (for cuobjdump -sass). No GPU needed:
//!   cargo run -p flce-cuda --example resource_usage [sm_90a] [bf16] [cubin-dir]
use flce_core::DType;
use flce_cuda::compile::{compile_with_log, expanded_source, options, Arch, KernelFile};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arch = Arch(args.first().cloned().unwrap_or_else(|| "sm_90a".into()));
    let dtype: DType = args.get(1).map(|s| s.parse().unwrap()).unwrap_or(DType::BF16);
    let cubin_dir = args.get(2).map(std::path::PathBuf::from);
    for file in KernelFile::ALL.into_iter().filter(|f| f.builds_for(&arch, dtype)) {
        let mut opts = options(&arch);
        opts.push("--ptxas-options=-v".into());
        match compile_with_log(&expanded_source(file, dtype), file.name(), &opts) {
            Ok((cubin, log)) => {
                println!("== {} ({}, {dtype})\n{log}", file.name(), arch.0);
                if let Some(dir) = &cubin_dir {
                    std::fs::create_dir_all(dir).expect("cubin dir");
                    let name = format!("{}.{}.{dtype}.cubin", file.name().replace('/', "_"), arch.0);
                    std::fs::write(dir.join(name), cubin).expect("writing the cubin");
                }
            }
            Err(e) => println!("== {}: {e}", file.name()),
        }
    }
}
