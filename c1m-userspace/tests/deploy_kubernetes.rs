//! The Kubernetes manifests (deploy/kubernetes/) against what the run depends on: an
//! Indexed Job whose completions equal its parallelism and C1M_SHARDS, every client's
//! shard resolved from its index, the privileges the observer needs, the Service the
//! clients name, and every c1m command line in them parsed by the binary's own clap
//! parser, so a renamed flag breaks this test, not a user's cluster run.

use std::{collections::BTreeMap, path::PathBuf};

use c1m::{
    args::parse_ports,
    cli::{Cli, Command},
    lab::run::flags::Clients,
    workload::host_share::{self as share, ShardOf},
};
use clap::Parser as _;
use serde_yaml::Value;

pub(crate) fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/kubernetes")
}

pub(crate) fn load(name: &str) -> Value {
    let path = dir().join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn at<'a>(v: &'a Value, path: &[&str]) -> &'a Value {
    path.iter().fold(v, |v, k| &v[*k])
}

pub(crate) fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    at(v, path)
        .as_str()
        .unwrap_or_else(|| panic!("{path:?} is not a string"))
}

/// The pod spec of a Pod or of a Job's template.
fn pod_spec(v: &Value) -> &Value {
    match str_at(v, &["kind"]) {
        "Pod" => at(v, &["spec"]),
        _ => at(v, &["spec", "template", "spec"]),
    }
}

fn container(v: &Value) -> &Value {
    &pod_spec(v)["containers"][0]
}

/// The container's env values (fieldRef ones as `<fieldPath>`).
fn env(c: &Value) -> BTreeMap<String, String> {
    c["env"]
        .as_sequence()
        .into_iter()
        .flatten()
        .map(|e| {
            let name = str_at(e, &["name"]).to_owned();
            let value = e["value"].as_str().map(str::to_owned).unwrap_or_else(|| {
                format!("<{}>", str_at(e, &["valueFrom", "fieldRef", "fieldPath"]))
            });
            (name, value)
        })
        .collect()
}

/// Every `c1m …` line of the container's shell script, `$VAR`s replaced from `vars`,
/// parsed by the binary's parser.
fn c1m_lines(c: &Value, vars: &BTreeMap<String, String>) -> Vec<Command> {
    let script: String = c["args"]
        .as_sequence()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = Vec::new();
    for line in script
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("c1m "))
    {
        let argv: Vec<String> = line
            .split_whitespace()
            .map(|w| {
                vars.iter()
                    .fold(w.to_owned(), |w, (k, v)| w.replace(&format!("${k}"), v))
            })
            .collect();
        assert!(
            argv.iter().all(|w| !w.contains('$')),
            "unresolved variable in {argv:?}"
        );
        match Cli::try_parse_from(&argv) {
            Ok(cli) => out.push(cli.command),
            Err(e) => panic!("the manifest's `{line}` does not parse:\n{e}"),
        }
    }
    assert!(!out.is_empty(), "no c1m command in {script}");
    out
}

fn caps(c: &Value) -> Vec<String> {
    at(c, &["securityContext", "capabilities", "add"])
        .as_sequence()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

/// The `securityContext.sysctls` of a Pod's or a Job template's pod spec.
pub(crate) fn sysctls(v: &Value) -> BTreeMap<String, String> {
    at(pod_spec(v), &["securityContext", "sysctls"])
        .as_sequence()
        .into_iter()
        .flatten()
        .map(|s| {
            (
                str_at(s, &["name"]).to_owned(),
                str_at(s, &["value"]).to_owned(),
            )
        })
        .collect()
}

#[test]
fn kustomization_lists_every_manifest_and_each_parses() {
    let k = load("kustomization.yaml");
    let resources: Vec<&str> = k["resources"]
        .as_sequence()
        .expect("resources")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for r in &resources {
        assert!(load(r)["kind"].is_string(), "{r}");
    }
    for want in [
        "server-pod.yaml",
        "server-service.yaml",
        "clients-job.yaml",
        "runs-pvc.yaml",
    ] {
        assert!(resources.contains(&want), "{want} not in kustomization");
    }
    // The merge runs after the clients completed: applied by hand, not with the rest.
    assert!(!resources.contains(&"merge-job.yaml"));
    assert!(dir().join("Containerfile").exists());
}

#[test]
fn the_cluster_run_is_what_c1m_expects() {
    let service = load("server-service.yaml");
    let server = load("server-pod.yaml");
    let clients = load("clients-job.yaml");
    let merge = load("merge-job.yaml");
    let service_name = str_at(&service, &["metadata", "name"]);
    let service_ports: Vec<u16> = service["spec"]["ports"]
        .as_sequence()
        .expect("ports")
        .iter()
        .map(|p| p["port"].as_u64().expect("port") as u16)
        .collect();
    // The Service selects the server pod.
    let selector = &service["spec"]["selector"];
    for (k, v) in selector.as_mapping().expect("selector") {
        assert_eq!(&server["metadata"]["labels"][k.as_str().expect("key")], v);
    }

    // The server: external clients, the observer's privileges, its sysctls.
    let sc = container(&server);
    let Command::Run(run) = c1m_lines(sc, &env(sc)).remove(0) else {
        panic!("the server pod does not run `c1m run`");
    };
    assert_eq!(run.clients, Clients::External);
    let expect = run.expect.expect("--expect");
    let control_port: u16 = run
        .control_addr
        .as_deref()
        .and_then(|a| a.rsplit_once(':'))
        .and_then(|(_, p)| p.parse().ok())
        .expect("--control HOST:PORT");
    assert!(service_ports.contains(&control_port));
    for p in run.ports.0.iter() {
        assert!(
            service_ports.contains(p),
            "server port {p} not in the Service"
        );
    }
    let have = caps(sc);
    for cap in ["BPF", "PERFMON", "NET_ADMIN"] {
        assert!(
            have.iter().any(|c| c == cap),
            "server lacks CAP_{cap}: {have:?}"
        );
    }
    let s = sysctls(&server);
    for name in [
        "net.core.somaxconn",
        "net.ipv4.tcp_max_syn_backlog",
        "net.ipv4.tcp_max_tw_buckets",
    ] {
        assert!(s.contains_key(name), "server pod sets no {name}");
    }

    // The clients: an Indexed Job, one pod per host, each on its own node.
    let spec = &clients["spec"];
    assert_eq!(str_at(spec, &["completionMode"]), "Indexed");
    let completions = spec["completions"].as_u64().expect("completions");
    assert_eq!(spec["parallelism"].as_u64(), Some(completions));
    let anti = &pod_spec(&clients)["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        [0];
    assert_eq!(str_at(anti, &["topologyKey"]), "kubernetes.io/hostname");
    let kept_apart: Vec<&str> = anti["labelSelector"]["matchExpressions"][0]["values"]
        .as_sequence()
        .expect("values")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let client_label = str_at(&clients, &["spec", "template", "metadata", "labels", "app"]);
    assert!(kept_apart.contains(&client_label), "{kept_apart:?}");
    assert!(sysctls(&clients).contains_key("net.ipv4.ip_local_port_range"));
    let cc = container(&clients);
    let vars = env(cc);
    assert_eq!(
        vars.get(share::COUNT_ENV).map(String::as_str),
        Some(completions.to_string().as_str()),
        "{} must equal the Job's completions",
        share::COUNT_ENV
    );
    let mut run_dirs = Vec::new();
    let mut total = 0;
    for index in 0..completions {
        let mut v = vars.clone();
        v.insert(share::INDEX_ENV.to_owned(), index.to_string());
        let Command::Client(c) = c1m_lines(cc, &v).remove(0) else {
            panic!("the client Job does not run `c1m client`");
        };
        let shard = share::resolve(c.hosts_run.shard, |k| v.get(k).cloned()).expect("shard");
        assert_eq!(
            shard,
            Some(ShardOf {
                index,
                count: completions
            })
        );
        assert_eq!(c.connections, expect, "-n is the total the server expects");
        total += shard
            .map(|s| s.connections(c.connections).expect("share").get())
            .unwrap_or(0);
        assert_eq!(c.hosts, [service_name]);
        assert_eq!(
            c.hosts_run.clock_from,
            Some(format!("{service_name}:{control_port}"))
        );
        for p in parse_ports(&c.ports).expect("client ports") {
            assert!(run.ports.0.contains(&p), "client port {p} not served");
        }
        run_dirs.push(c.hosts_run.run_dir.expect("--run-dir"));
    }
    assert_eq!(total, expect.get(), "the shares sum to --expect");
    run_dirs.dedup();
    assert_eq!(
        run_dirs.len() as u64,
        completions,
        "one run folder per host"
    );

    // The merge reads the server's folder and every client's from the same volume.
    let mc = container(&merge);
    let Command::Merge(m) = c1m_lines(mc, &env(mc)).remove(0) else {
        panic!("the merge Job does not run `c1m merge`");
    };
    assert!(m.server_dir.starts_with(run.out.to_str().expect("utf-8")));
    for d in &run_dirs {
        let parent = d.parent().expect("run dir parent");
        assert!(
            m.client_dirs.iter().any(|c| c.starts_with(parent)),
            "{} is not merged",
            d.display()
        );
    }
}

/// The literals of a `keep` relabelling's regex on `source` (a plain alternation).
fn kept(job: &Value, source: &str) -> Vec<String> {
    let rule = job["relabel_configs"]
        .as_sequence()
        .expect("relabel_configs")
        .iter()
        .find(|r| {
            r["action"].as_str() == Some("keep") && r["source_labels"][0].as_str() == Some(source)
        })
        .unwrap_or_else(|| panic!("no keep rule on {source}"));
    let regex = str_at(rule, &["regex"]);
    assert!(
        regex
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_|".contains(c)),
        "{regex}: read here as literals joined by |"
    );
    regex.split('|').map(str::to_owned).collect()
}

#[test]
fn prometheus_scrapes_each_pods_metrics_port() {
    let scrape = load("prometheus-scrape.yaml");
    let job = scrape["scrape_configs"]
        .as_sequence()
        .expect("scrape_configs")
        .iter()
        .find(|j| j["job_name"].as_str() == Some("c1m"))
        .expect("a c1m job");
    assert_eq!(str_at(job, &["metrics_path"]), c1m::view::prometheus::PATH);
    assert_eq!(str_at(&job["kubernetes_sd_configs"][0], &["role"]), "pod");
    let apps = kept(job, "__meta_kubernetes_pod_label_app");
    let port_names = kept(job, "__meta_kubernetes_pod_container_port_name");
    let server = load("server-pod.yaml");
    let clients = load("clients-job.yaml");
    for (manifest, app) in [
        (&server, &["metadata", "labels", "app"][..]),
        (
            &clients,
            &["spec", "template", "metadata", "labels", "app"][..],
        ),
    ] {
        let app = str_at(manifest, app);
        assert!(apps.iter().any(|a| a == app), "{app} is not scraped");
        let c = container(manifest);
        let mut vars = env(c);
        vars.insert(share::INDEX_ENV.to_owned(), "0".to_owned());
        let addr = match c1m_lines(c, &vars).remove(0) {
            Command::Run(r) => r.metrics_addr,
            Command::Client(c) => c.hosts_run.metrics_addr,
            _ => None,
        }
        .unwrap_or_else(|| panic!("{app}: no --metrics-addr"));
        assert!(
            addr.ip().is_unspecified(),
            "{app}: --metrics-addr {addr} is not reachable from Prometheus"
        );
        let declared = c["ports"].as_sequence().into_iter().flatten().any(|p| {
            p["containerPort"].as_u64() == Some(u64::from(addr.port()))
                && p["name"]
                    .as_str()
                    .is_some_and(|n| port_names.iter().any(|k| k == n))
        });
        assert!(
            declared,
            "{app}: no container port {} named one of {port_names:?}",
            addr.port()
        );
    }
    // A Prometheus file, not a Kubernetes object: `kubectl apply -k` would refuse it.
    let k = load("kustomization.yaml");
    assert!(
        !k["resources"]
            .as_sequence()
            .expect("resources")
            .iter()
            .any(|r| r.as_str() == Some("prometheus-scrape.yaml"))
    );
}
