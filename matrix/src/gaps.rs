//! The protections a kernel configuration is expected to leave unenforced, from
//! `ci/kernel-matrix.d/expectations.json`. Shared as source: the kernel matrix's guest binary
//! uses it, and the escape harness on the host includes this file (`#[path]`), so both read the
//! expectations the same way.

use std::collections::BTreeSet;

use serde_json::Value;

/// The strings of a JSON array (empty for anything else).
pub fn strings(v: &Value) -> BTreeSet<String> {
    v.as_array().map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect()).unwrap_or_default()
}

/// Protections expected not to be enforced for `user` at `level` in configuration `cfg`:
/// what the level lacks everywhere, what the user lacks there, what this kernel lacks there.
/// A usable pids cgroup (reported by `status`) bounds the process count and the kill tree, except
/// at the levels where the command can write cgroupfs (`cgroup_in_reach_levels`).
pub fn expected_gaps(exp: &Value, cfg: &Value, user: &str, level: &str, cgroup: bool, memory_cgroup: bool) -> BTreeSet<String> {
    let mut s = strings(&exp["level_gaps"][level]);
    s.extend(strings(&exp["user_gaps"][user][level]));
    s.extend(strings(&cfg["kernel_gaps"][level]));
    let in_reach = strings(&exp["cgroup_in_reach_levels"]).contains(level);
    for (has, key) in [(cgroup, "cgroup_covers"), (memory_cgroup, "memory_cgroup_covers")] {
        if has && !in_reach {
            for c in strings(&exp[key]) {
                s.remove(&c);
            }
        }
    }
    s
}
