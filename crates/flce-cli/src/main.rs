//! The `flce` command. `flce demo` runs the fused loss and gradients on a realistic problem and
//! sets it beside the naive materialised computation.

mod alloc;
mod bench;
mod demo;
mod gpu_call;
mod plan;

use clap::{Parser, Subcommand};

#[global_allocator]
static GLOBAL: alloc::Counting = alloc::Counting;

#[derive(Parser)]
#[command(
    name = "flce",
    version,
    about = "Fused linear cross-entropy: loss and exact gradients without the N×V logits"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the fused loss + gradients on a Llama-sized problem, beside the naive materialised one.
    Demo(demo::DemoArgs),
    /// Time the CUDA backend against cuBLAS at LLM shapes (needs a GPU).
    Bench(bench::BenchArgs),
    /// What a training step needs on a GPU, and the longest context that fits (no GPU needed).
    Plan(plan::PlanArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(args) => demo::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Plan(args) => plan::run(&args),
    };
    if let Err(e) = result {
        eprintln!("flce: {e}");
        std::process::exit(1);
    }
}
