//! Config and machine facts that differ between the compared setups (the first run of
//! each name): a comparison of runs made on different boxes or with different flags says
//! so before any figure.
//!
//! Besides the flags and the machine: the server and its versions, the push rule and
//! trigger (fan-out is timed from the trigger, so a signal and a control socket are not
//! the same clock), the server's processes and threads, the sysctls `--tune` manages as
//! the run had them (not whether that run set them: in a `--tune` sequence a later run
//! finds them set already), and the box's MemAvailable at the start when it differs
//! enough to matter ([`MEM_MATTERS`]). A fact an older record lacks reads "not recorded".

use super::input::LoadedRun;
use crate::fmt::bytes;
use crate::model::RunRecord;
use crate::report::html::tables::flatten;

/// Facts that vary with every run and say nothing about its setup, or that are said
/// below in words of their own.
const IGNORED: [&str; 7] = [
    // Said as `protocol`.
    "config.mode",
    "machine.mem_available_bytes",
    "config.command_line",
    // Says how much memory was free at the start.
    "config.connections_reason",
    // Unused by a foreign server; c1m's own names its engine in `server`.
    "config.server_engine",
    // Said as `tuned sysctl NAME` and `push trigger`.
    "config.tuned",
    "config.push_trigger",
];

/// What an older record lacks.
pub(crate) const NOT_RECORDED: &str = "not recorded";

/// Start MemAvailable is a setup difference when the lowest is under this share of the
/// highest: a box with 10% less free memory holds the same connections (15,000 of them
/// take ~120 MiB), one with much less may swap or meet the OOM killer first.
pub(crate) const MEM_MATTERS: f64 = 0.9;

fn facts(r: &RunRecord) -> Vec<(String, String)> {
    let mut rows = vec![
        ("c1m_version".to_owned(), r.c1m_version.clone()),
        ("server".to_owned(), r.server_label()),
        (
            "server processes, threads".to_owned(),
            r.server_info
                .as_ref()
                .and_then(|i| i.shape)
                .map_or_else(|| NOT_RECORDED.to_owned(), |s| s.describe()),
        ),
        // "wss" against "ws" in one word; the TLS details (resumption, key) follow
        // from `config.tls`.
        ("protocol".to_owned(), r.config.protocol()),
        (
            "push trigger".to_owned(),
            r.config
                .push_trigger
                .map_or(NOT_RECORDED, |t| t.name())
                .to_owned(),
        ),
    ];
    match &r.config.tuned {
        Some(values) => rows.extend(crate::sysctl::TUNABLE.iter().map(|n| {
            (
                format!("tuned sysctl {n}"),
                values.get(*n).cloned().unwrap_or_else(|| "–".into()),
            )
        })),
        None => rows.push(("tuned sysctls".to_owned(), NOT_RECORDED.to_owned())),
    }
    for (prefix, v) in [
        ("config", serde_json::to_value(&r.config)),
        ("machine", serde_json::to_value(&r.machine)),
    ] {
        if let Ok(v) = v {
            flatten(prefix, &v, &mut rows);
        }
    }
    rows.retain(|(k, _)| {
        !IGNORED
            .iter()
            .any(|i| k == i || k.starts_with(&format!("{i}.")))
    });
    rows
}

/// "start MemAvailable" per name when the lowest is under [`MEM_MATTERS`] of the
/// highest (a name whose record lacks it: "not recorded", and no call).
fn start_memory(first: &[&LoadedRun]) -> Option<(String, Vec<String>)> {
    let mem: Vec<Option<u64>> = first
        .iter()
        .map(|r| {
            r.run
                .start
                .as_ref()
                .map(|s| s.mem_available_bytes)
                .filter(|m| *m > 0)
        })
        .collect();
    let known: Vec<u64> = mem.iter().flatten().copied().collect();
    let (lo, hi) = (known.iter().min()?, known.iter().max()?);
    ((*lo as f64) < MEM_MATTERS * *hi as f64).then(|| {
        let values = mem
            .iter()
            .map(|m| m.map_or_else(|| NOT_RECORDED.to_owned(), |b| bytes(b as f64)))
            .collect();
        ("start MemAvailable".to_owned(), values)
    })
}

/// (key, value per name) for every key whose value is not the same for all names.
pub(crate) fn differences(runs: &[LoadedRun], names: &[String]) -> Vec<(String, Vec<String>)> {
    let first: Vec<&LoadedRun> = names
        .iter()
        .filter_map(|n| runs.iter().find(|r| r.spec.name == *n))
        .collect();
    let per_name: Vec<Vec<(String, String)>> = first.iter().map(|r| facts(&r.run)).collect();
    let mut keys: Vec<&String> = Vec::new();
    for (k, _) in per_name.iter().flatten() {
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let mut out: Vec<(String, Vec<String>)> = keys
        .into_iter()
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
        .collect();
    out.extend(start_memory(&first));
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::TriggerKind;

    fn loaded(name: &str, run: RunRecord) -> LoadedRun {
        LoadedRun::named(name, run)
    }

    fn keys(d: &[(String, Vec<String>)]) -> Vec<&str> {
        d.iter().map(|(k, _)| k.as_str()).collect()
    }

    /// Issue 32, point 3: two runs whose sysctls were equal are not listed as differing,
    /// whoever set them (the old flag was true for the run that set them and false for
    /// the next one of the sequence); the trigger, the server's shape and a start with
    /// far less free memory are; an old record's lack says "not recorded".
    #[test]
    fn setup_differences_are_the_values_not_who_set_them() {
        let a = crate::report::sample_run();
        let mut b = a.clone();
        let names = ["a".to_owned(), "b".to_owned()];
        let d = differences(&[loaded("a", a.clone()), loaded("b", b.clone())], &names);
        assert!(d.is_empty(), "{d:?}");
        // An old record's `tuned: false` beside the values: not recorded, said so.
        let old: RunRecord = {
            let mut v = serde_json::to_value(&a).unwrap();
            v["config"]["tuned"] = serde_json::json!(false);
            v["config"].as_object_mut().unwrap().remove("push_trigger");
            serde_json::from_value(v).unwrap()
        };
        assert_eq!(old.config.tuned, None);
        let d = differences(&[loaded("a", a.clone()), loaded("b", old)], &names);
        let tuned = d.iter().find(|(k, _)| k == "tuned sysctls").unwrap();
        assert_eq!(tuned.1[1], NOT_RECORDED);
        let trigger = d.iter().find(|(k, _)| k == "push trigger").unwrap();
        assert_eq!(trigger.1, ["control socket", NOT_RECORDED]);
        // A sysctl that differs, a signal, another shape, half the memory.
        b.config
            .tuned
            .as_mut()
            .unwrap()
            .insert("net.core.somaxconn".into(), "4096".into());
        b.config.push_trigger = Some(TriggerKind::Signal);
        b.server_info.as_mut().unwrap().shape = Some(crate::model::ServerShape {
            processes: 4,
            threads: 4,
        });
        let mut start = b.start.clone().unwrap_or_default();
        let full = a.start.as_ref().map_or(8 << 30, |s| s.mem_available_bytes);
        start.mem_available_bytes = full / 2;
        b.start = Some(start.clone());
        let d = differences(&[loaded("a", a.clone()), loaded("b", b.clone())], &names);
        assert_eq!(
            keys(&d),
            [
                "server processes, threads",
                "push trigger",
                "tuned sysctl net.core.somaxconn",
                "start MemAvailable"
            ],
            "{d:?}"
        );
        assert_eq!(d[0].1, ["1 process, 3 threads", "4 processes, 4 threads"]);
        assert_eq!(d[2].1, ["65535", "4096"]);
        // 5% less free memory is no difference.
        start.mem_available_bytes = full - full / 20;
        b.start = Some(start);
        let d = differences(&[loaded("a", a), loaded("b", b)], &names);
        assert!(!keys(&d).contains(&"start MemAvailable"), "{d:?}");
    }
}
