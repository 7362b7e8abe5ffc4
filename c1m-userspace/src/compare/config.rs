//! Config and machine facts that differ between the compared setups (the first run of
//! each name): a comparison of runs made on different boxes or with different flags says
//! so before any figure.

use super::input::LoadedRun;
use crate::model::RunRecord;
use crate::report::html::tables::flatten;

/// Facts that vary with every run and say nothing about its setup.
const IGNORED: [&str; 4] = [
    "machine.mem_available_bytes",
    "config.command_line",
    // Says how much memory was free at the start.
    "config.connections_reason",
    // Unused by a foreign server; c1m's own names its engine in `server`.
    "config.server_engine",
];

fn facts(r: &RunRecord) -> Vec<(String, String)> {
    let mut rows = vec![
        ("c1m_version".to_owned(), r.c1m_version.clone()),
        ("server".to_owned(), r.server_label()),
    ];
    for (prefix, v) in [
        ("config", serde_json::to_value(&r.config)),
        ("machine", serde_json::to_value(&r.machine)),
    ] {
        if let Ok(v) = v {
            flatten(prefix, &v, &mut rows);
        }
    }
    rows.retain(|(k, _)| !IGNORED.contains(&k.as_str()));
    rows
}

/// (key, value per name) for every key whose value is not the same for all names.
pub(crate) fn differences(runs: &[LoadedRun], names: &[String]) -> Vec<(String, Vec<String>)> {
    let per_name: Vec<Vec<(String, String)>> = names
        .iter()
        .filter_map(|n| runs.iter().find(|r| r.spec.name == *n))
        .map(|r| facts(&r.run))
        .collect();
    let mut keys: Vec<&String> = Vec::new();
    for (k, _) in per_name.iter().flatten() {
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    keys.into_iter()
        .filter_map(|k| {
            let values: Vec<String> = per_name
                .iter()
                .map(|f| {
                    f.iter()
                        .find(|(x, _)| x == k)
                        .map(|(_, v)| v.clone())
                        .unwrap_or_else(|| "–".into())
                })
                .collect();
            values
                .iter()
                .any(|v| *v != values[0])
                .then(|| (k.clone(), values))
        })
        .collect()
}
