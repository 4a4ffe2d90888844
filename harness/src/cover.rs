//! A subset of the corpus that covers every protection: for each protection id, one vector that
//! names it and can run here. The kernel matrix runs this subset in every guest (a TCG guest
//! pays 10–30× for each process, so the whole corpus at every level and user does not fit in
//! CI's time), with the same engine and verdicts as the full corpus on the host.
//!
//! The choice is deterministic: protections in the sandbox's order
//! ([`localgpt_corpus::protection_ids`]); a protection an already chosen vector names is covered;
//! otherwise the candidate that names the fewest protections (the most specific), then the
//! shortest timeout, then corpus order. A vector is a candidate only when its preconditions are
//! met and every tool its probe declares (`tools`) is installed: a bare run that cannot start
//! proves nothing. A protection no vector can cover here is listed with the reasons, never
//! silently dropped.

use localgpt_corpus::Vector;

/// The chosen vectors (corpus order) and the protections left uncovered, each with the reason.
#[derive(Debug, Default)]
pub struct Cover {
    /// One or more vectors per covered protection, in corpus order.
    pub vectors: Vec<Vector>,
    /// `(protection id, why no vector covers it here)`.
    pub uncovered: Vec<(String, String)>,
}

/// Chooses the subset. `unmet(v)` is why `v` cannot run here, if it cannot: an unmet
/// precondition or a declared tool that is not installed (`Facts::unmet_for`).
#[must_use]
pub fn cover(vectors: &[Vector], unmet: &dyn Fn(&Vector) -> Option<String>) -> Cover {
    let mut chosen: Vec<usize> = Vec::new();
    let mut uncovered = Vec::new();
    for id in localgpt_corpus::protection_ids() {
        if chosen.iter().any(|&i| vectors[i].protections.iter().any(|p| p == id)) {
            continue;
        }
        let naming: Vec<usize> = (0..vectors.len()).filter(|&i| vectors[i].protections.iter().any(|p| p == id)).collect();
        if naming.is_empty() {
            uncovered.push((id.to_string(), "no vector of the corpus names it".to_string()));
            continue;
        }
        let mut reasons = Vec::new();
        let mut best: Option<usize> = None;
        for &i in &naming {
            let v = &vectors[i];
            if let Some(why) = unmet(v) {
                reasons.push(format!("{}: {why}", v.name));
                continue;
            }
            let key = |j: usize| (vectors[j].protections.len(), vectors[j].timeout.unwrap_or(0), j);
            if best.is_none_or(|b| key(i) < key(b)) {
                best = Some(i);
            }
        }
        match best {
            Some(i) => chosen.push(i),
            None => uncovered.push((id.to_string(), reasons.join("; "))),
        }
    }
    chosen.sort_unstable();
    chosen.dedup();
    Cover { vectors: chosen.into_iter().map(|i| vectors[i].clone()).collect(), uncovered }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus() -> Vec<Vector> {
        let yaml = r#"
family: filesystem
title: t
vectors:
  - name: broad
    attempts: write a file outside the workspace
    source: "a unit test"
    protections: [fs-write-outside, fs-read-credentials, network]
    probe: {builtin: write-file, args: ["{canary}", "x"]}
    expect: blocked
    check: [{file_unchanged: "{canary}"}]
  - name: write-specific
    attempts: write a file outside the workspace
    source: "a unit test"
    protections: [fs-write-outside]
    probe: {shell: "echo x > {canary}"}
    expect: blocked
    check: [{file_unchanged: "{canary}"}]
  - name: net-python
    attempts: write a file outside the workspace
    source: "a unit test"
    protections: [network]
    tools: [python3]
    probe: {shell: "python3 -c 'import socket'"}
    expect: blocked
    check: [tcp_silent]
  - name: net-root
    attempts: write a file outside the workspace
    source: "a unit test"
    protections: [network]
    requires: [root]
    probe: {builtin: tcp-connect, args: ["{tcp_port}", "x"]}
    expect: blocked
    check: [tcp_silent]
"#;
        localgpt_corpus::Corpus::from_sources([("t.yaml", yaml)]).unwrap().vectors
    }

    #[test]
    fn the_most_specific_runnable_vector_covers_each_protection() {
        let vs = corpus();
        let c = cover(&vs, &|_| None);
        let names: Vec<&str> = c.vectors.iter().map(|v| v.name.as_str()).collect();
        // fs-write-outside → write-specific; fs-read-credentials → broad (which also covers network).
        assert_eq!(names, ["broad", "write-specific"]);
        assert!(c.uncovered.iter().any(|(id, why)| id == "ptrace" && why.contains("no vector")));
    }

    #[test]
    fn unmet_preconditions_and_missing_tools_are_reasons_not_silence() {
        let vs: Vec<Vector> = corpus().into_iter().filter(|v| v.name.starts_with("net")).collect();
        let here = |py: bool| {
            move |v: &Vector| {
                if !v.requires.is_empty() {
                    Some("needs root".to_string())
                } else if !py && v.tools.iter().any(|t| t == "python3") {
                    Some("python3 is not installed".to_string())
                } else {
                    None
                }
            }
        };
        let c = cover(&vs, &here(false));
        assert!(c.vectors.is_empty());
        let (_, why) = c.uncovered.iter().find(|(id, _)| id == "network").unwrap();
        assert!(why.contains("net-python: python3 is not installed") && why.contains("net-root: needs root"), "{why}");
        // With python3 installed, the python vector covers it.
        let c = cover(&vs, &here(true));
        assert_eq!(c.vectors.len(), 1);
        assert_eq!(c.vectors[0].name, "net-python");
    }


    /// The kernel matrix's expectations name protections by id: every id there is one of the
    /// sandbox's (`ProtectionId`), so a renamed or dropped protection cannot leave a pin behind
    /// that excuses nothing, or one that excuses the wrong row.
    #[test]
    fn every_pinned_id_in_the_expectations_is_a_protection() {
        let exp: serde_json::Value = serde_json::from_str(include_str!("../../ci/kernel-matrix.d/expectations.json")).unwrap();
        let known = localgpt_corpus::protection_ids();
        let mut ids: Vec<(String, String)> = Vec::new();
        let mut collect = |at: String, v: &serde_json::Value| {
            for x in v.as_array().into_iter().flatten() {
                ids.push((at.clone(), x.as_str().unwrap_or("<not a string>").to_string()));
            }
        };
        for key in ["cgroup_covers", "memory_cgroup_covers"] {
            collect(key.into(), &exp[key]);
        }
        for key in ["level_gaps", "world_gaps", "group_secret_gaps"] {
            for (level, v) in exp[key].as_object().into_iter().flatten() {
                collect(format!("{key}.{level}"), v);
            }
        }
        for (user, levels) in exp["user_gaps"].as_object().into_iter().flatten() {
            for (level, v) in levels.as_object().into_iter().flatten() {
                collect(format!("user_gaps.{user}.{level}"), v);
            }
        }
        for c in exp["configurations"].as_array().into_iter().flatten() {
            for (level, v) in c["kernel_gaps"].as_object().into_iter().flatten() {
                collect(format!("{}.kernel_gaps.{level}", c["name"]), v);
            }
        }
        assert!(ids.len() > 20, "the expectations name only {} protections", ids.len());
        let unknown: Vec<String> = ids.iter().filter(|(_, id)| !known.contains(&id.as_str())).map(|(at, id)| format!("{at}: {id}")).collect();
        assert!(unknown.is_empty(), "unknown protection ids in expectations.json: {unknown:?}");
    }
}
