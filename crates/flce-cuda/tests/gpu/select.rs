//! Which cases a `gpu-tests` run selects from its name filters (a part of the name, or "=" and the
//! whole name); CPU-tested in tests/gpu_shards.rs.

/// Whether a case named `name` is selected: no filters, or a filter that is a part of its name, or
/// one that is "=" and its whole name (a rerun of exactly the cases a cut-short run did not reach:
/// "=bf16 gemma2 sampled" without "bf16 gemma2 sampled fused").
pub fn selected_by<S: AsRef<str>>(filters: &[S], name: &str) -> bool {
    filters.is_empty()
        || filters.iter().any(|f| match f.as_ref().strip_prefix('=') {
            Some(exact) => name == exact,
            None => name.contains(f.as_ref()),
        })
}
