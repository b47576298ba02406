//! Cost-balanced shards for `gpu-tests --shard=I/N`: every process of a sharded run
//! (scripts/gpu/tests-sharded.sh) assigns the same selected cases to the same N shards, the
//! longest first, each to the shard with the least measured time so far (LPT scheduling), so that
//! the run ends with its slowest shard near the mean instead of wherever an interleaving put the
//! long cases. The times are case_ms.txt's (`bash scripts/tools/case-costs.sh LOGS...` from a full run);
//! a case it does not list counts as the table's median. A full run of 4 interleaved processes
//! ended its shards after 206 / 450 / 404 / 262 s of cases: the call waited for the 450; balanced
//! by these times the four take ~269 s each.

use std::collections::HashMap;

/// The measured milliseconds of each case (case_ms.txt: one "ms<TAB>name" line a case).
pub(crate) fn case_costs() -> HashMap<&'static str, u64> {
    parse_costs(include_str!("case_ms.txt"))
}

/// "ms<TAB>name" lines to a map; malformed lines are skipped.
pub(crate) fn parse_costs(table: &str) -> HashMap<&str, u64> {
    table
        .lines()
        .filter_map(|l| {
            let (ms, name) = l.split_once('\t')?;
            Some((name, ms.trim().parse().ok()?))
        })
        .collect()
}

/// A case's cost: its measured time, or the table's median for a case it does not list.
fn cost_of<'a>(costs: &'a HashMap<&str, u64>) -> impl Fn(&str) -> u64 + 'a {
    let mut known: Vec<u64> = costs.values().copied().collect();
    known.sort_unstable();
    let median = known.get(known.len() / 2).copied().unwrap_or(1);
    move |name| costs.get(name).copied().unwrap_or(median)
}

/// The shard (0-based, below `shards`) of each of `names`, in order: the longest case first
/// (ties by position), each to the least-loaded shard (ties to the lowest); a name without a cost
/// counts as the median cost. Depends only on its arguments: every process computes the same.
pub(crate) fn assign(names: &[&str], costs: &HashMap<&str, u64>, shards: usize) -> Vec<usize> {
    let shards = shards.max(1);
    let cost = cost_of(costs);
    let mut order: Vec<usize> = (0..names.len()).collect();
    order.sort_by_key(|&k| (std::cmp::Reverse(cost(names[k])), k));
    let mut load = vec![0u64; shards];
    let mut owner = vec![0; names.len()];
    for k in order {
        let s = (0..shards).min_by_key(|&s| (load[s], s)).expect("at least one shard");
        load[s] += cost(names[k]);
        owner[k] = s;
    }
    owner
}

/// Each shard's total cost under `owner` (the run's log says its shard's; tests).
pub(crate) fn loads(names: &[&str], costs: &HashMap<&str, u64>, owner: &[usize], shards: usize) -> Vec<u64> {
    let cost = cost_of(costs);
    let mut load = vec![0u64; shards];
    for (name, &s) in names.iter().zip(owner) {
        load[s] += cost(name);
    }
    load
}
