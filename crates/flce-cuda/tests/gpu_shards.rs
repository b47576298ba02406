//! `gpu-tests --shard=I/N`'s cost-balanced assignment (tests/gpu/shards.rs), on the CPU: every
//! case in exactly one shard, the same assignment in every process, and with the committed
//! times (case_ms.txt) a slowest shard within the greedy bound and well below an interleaving's;
//! and its name filters (tests/gpu/select.rs).

#[path = "gpu/select.rs"]
mod select;
#[path = "gpu/shards.rs"]
mod shards;

use std::collections::HashMap;

fn table_names(costs: &HashMap<&'static str, u64>) -> Vec<&'static str> {
    let mut names: Vec<&str> = costs.keys().copied().collect();
    names.sort_unstable();
    names
}

#[test]
fn the_committed_times_parse_one_line_a_case() {
    let table = include_str!("gpu/case_ms.txt");
    let costs = shards::case_costs();
    assert_eq!(costs.len(), table.lines().count(), "a malformed or repeated line in case_ms.txt");
    assert!(costs.len() > 150, "{} cases", costs.len());
    assert!(costs.contains_key("bf16 llama3 sampled") && costs.contains_key("bf16 plain (255,507,123)"));
}

#[test]
fn every_case_goes_to_exactly_one_shard_the_same_in_every_process() {
    let costs = shards::case_costs();
    let mut names = table_names(&costs);
    names.push("a case the table does not list");
    for n in 1..=6 {
        let owner = shards::assign(&names, &costs, n);
        assert_eq!(owner.len(), names.len());
        assert!(owner.iter().all(|&s| s < n), "shards {n}");
        assert_eq!(owner, shards::assign(&names, &costs, n), "deterministic");
        if names.len() >= n {
            assert!((0..n).all(|s| owner.contains(&s)), "every one of {n} shards gets cases");
        }
    }
    // one shard takes everything; no cases, no shards used
    assert!(shards::assign(&names, &costs, 1).iter().all(|&s| s == 0));
    assert!(shards::assign(&[], &costs, 4).is_empty());
}

#[test]
fn balanced_shards_end_near_the_mean_where_interleaved_ones_did_not() {
    let costs = shards::case_costs();
    let names = table_names(&costs);
    let total: u64 = names.iter().map(|n| costs[n]).sum();
    let largest = names.iter().map(|n| costs[n]).max().unwrap();
    for n in [3, 4, 5] {
        let owner = shards::assign(&names, &costs, n);
        let loads = shards::loads(&names, &costs, &owner, n);
        assert_eq!(loads.iter().sum::<u64>(), total);
        let slowest = *loads.iter().max().unwrap();
        // greedy list scheduling never ends later than the mean plus the largest case
        assert!(slowest <= total / n as u64 + largest, "{n} shards: {loads:?}");
        let interleaved: Vec<usize> = (0..names.len()).map(|k| k % n).collect();
        let before = *shards::loads(&names, &costs, &interleaved, n).iter().max().unwrap();
        eprintln!("{n} shards: slowest {slowest} ms balanced, {before} ms interleaved (mean {})", total / n as u64);
        assert!(slowest < before, "{n} shards: {slowest} against {before}");
    }
}

#[test]
fn a_filter_is_a_part_of_the_name_or_with_a_leading_equals_sign_the_whole_name() {
    let none: [&str; 0] = [];
    assert!(select::selected_by(&none, "bf16 gemma2 sampled"), "no filter selects every case");
    let part = ["gemma2 sampled"];
    assert!(select::selected_by(&part, "bf16 gemma2 sampled"));
    assert!(select::selected_by(&part, "bf16 gemma2 sampled fused"));
    let exact = ["=bf16 gemma2 sampled"];
    assert!(select::selected_by(&exact, "bf16 gemma2 sampled"));
    assert!(!select::selected_by(&exact, "bf16 gemma2 sampled fused"), "an exact name is not a prefix");
    assert!(!select::selected_by(&["=gemma2 sampled"], "bf16 gemma2 sampled"), "nor a part");
    // several filters: any of them
    let both = ["=bad-target".to_string(), "softcap".to_string()];
    assert!(select::selected_by(&both, "bad-target") && select::selected_by(&both, "bf16 softcap (1,64,1000)"));
    assert!(!select::selected_by(&both, "bf16 all (1,64,1000)"));
}
