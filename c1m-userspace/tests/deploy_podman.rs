//! The Kubernetes manifests (deploy/kubernetes/) played by a real container runtime:
//! podman 4.3's `kube play` runs the server Pod (observer on), two pods made from the
//! client Job's own pod template (indexes 0 and 1, injected as the Job controller does),
//! then the merge Job's pod, which reads every run folder from the claimed volume.
//!
//! No cluster runs here, so the test does what a cluster would have done and podman does
//! not: the Job controller's pods and index (`job_pod`), the scheduler's node name, the
//! headless Service's DNS answer as a hostAliases entry (`as_cluster_would`), and the
//! pods' namespaced sysctls, which podman 4.3 ignores in `securityContext.sysctls`, as
//! the runtime's `default_sysctls` (`Podman::play`). Everything else is the YAML as it
//! is (deploy/kubernetes/README.md has the whole list).
//!
//! Nothing of the host is used or changed: podman runs with its own configuration and
//! storage under a temp folder, and inside a network namespace this test makes, where
//! the CNI bridge and every pod's namespace hang; pods, volume and images are removed
//! by name at the end (a guard on a failure), and the host's links, namespaces, IP
//! forwarding and firewall tables are compared before and after. ~25 s, most of it the
//! server's 10 s idle.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::{Command, Output},
    time::Duration,
};

use c1m::report;
use serde_yaml::{Mapping, Value};

use crate::{
    deploy_kubernetes::{load, str_at, sysctls},
    lab_util::{self, TempDir, bounded, fresh_dir, root_or_skip},
};

/// A few thousand: enough for the observer's counts to mean something, small enough for
/// the hard RLIMIT_NOFILE of a box whose bounding set lacks CAP_SYS_RESOURCE (20,000 here).
const CONNECTIONS: u64 = 3000;
/// The pods' subnet, on a bridge inside the test's own network namespace.
const SUBNET: &str = "10.231.0.0/24";
/// The server pod's address: what the headless Service's name resolves to.
const SERVER_IP: &str = "10.231.0.10";
/// The client Job's completions played here (the manifest says 2, C1M_SHARDS too).
const CLIENTS: u64 = 2;
/// The annotation the Job controller puts on an Indexed Job's pods; it also sets
/// JOB_COMPLETION_INDEX from it (Kubernetes' `batch/v1` JobCompletionIndexAnnotation).
const INDEX_ANNOTATION: &str = "batch.kubernetes.io/job-completion-index";
/// Every podman command, and every wait for a pod, ends within this.
const LIMIT: Duration = Duration::from_secs(120);

/// What the test could change on the host, read before and compared after. Of links
/// and namespaces, only names podman, CNI or this test give (other tests on the box
/// make their own meanwhile).
#[derive(Debug, PartialEq)]
struct HostState {
    links: Vec<String>,
    netns: Vec<String>,
    ip_forward: String,
    /// `iptables-save` (the NAT a default podman network adds), empty without iptables.
    firewall: String,
    /// Of FIXED_PATHS, the ones that exist.
    fixed_paths: Vec<PathBuf>,
}

/// Paths podman 4.3 and CNI make as root whatever their configuration says: the image
/// library's blob-info cache (/var/lib/containers/cache), libcni's result cache, and
/// runc's default state folder (left empty: `--runtime-flag root=` moves the state).
const FIXED_PATHS: [&str; 3] = ["/var/lib/containers", "/var/lib/cni", "/run/runc"];

/// Name prefixes of what podman 4.3 with CNI makes (a pod's namespace `netns-<uuid>`,
/// veths, the bridge, `cni-` for podman's own network), and the test's namespace.
const OURS: [&str; 5] = ["netns-", "cni", "veth", "c1m-pods", "c1mpod"];

fn stdout(cmd: &mut Command) -> String {
    cmd.output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

impl HostState {
    fn now() -> Self {
        // `ip -o link` lines: `2: eth0: <…`; `ip netns list` lines: `name (id: 0)`.
        let names = |args: &[&str], field: usize| -> Vec<String> {
            let mut v: Vec<String> = stdout(Command::new("ip").args(args))
                .lines()
                .filter_map(|l| l.split_whitespace().nth(field))
                .map(|n| n.trim_end_matches(':').to_owned())
                .filter(|n| OURS.iter().any(|p| n.starts_with(p)))
                .collect();
            v.sort();
            v
        };
        HostState {
            links: names(&["-o", "link", "show"], 1),
            netns: names(&["netns", "list"], 0),
            ip_forward: lab_util::sysctl("net/ipv4/ip_forward"),
            // Its comment lines carry the time of the dump.
            firewall: stdout(&mut Command::new("iptables-save"))
                .lines()
                .filter(|l| !l.starts_with('#'))
                .collect::<Vec<_>>()
                .join("\n"),
            fixed_paths: FIXED_PATHS
                .iter()
                .map(PathBuf::from)
                .filter(|p| p.exists())
                .collect(),
        }
    }
}

/// podman with a configuration and storage of its own, run inside the network
/// namespace `wire` (the CNI bridge and the pods' namespaces hang there, none in the
/// host's). Dropping it removes what it made, by name.
struct Podman {
    dir: TempDir,
    wire: String,
    /// Of FIXED_PATHS, those that existed before: the others are removed at the end.
    fixed_before: Vec<PathBuf>,
    pods: Vec<String>,
}

impl Podman {
    fn new(host_before: &HostState) -> Podman {
        let dir = fresh_dir("deploy-podman");
        let wire = format!("c1mpod{}", std::process::id());
        let run = |args: &[&str]| {
            let out = Command::new("ip").args(args).output().expect("ip");
            assert!(out.status.success(), "ip {args:?}: {}", text(&out));
        };
        run(&["netns", "add", &wire]);
        let p = Podman {
            dir,
            wire,
            fixed_before: host_before.fixed_paths.clone(),
            pods: Vec::new(),
        };
        let d = p.dir.path();
        for sub in ["storage", "run", "tmp", "cni", "ipam"] {
            std::fs::create_dir_all(d.join(sub)).expect("podman dirs");
        }
        let at = |sub: &str| d.join(sub).display().to_string();
        p.write_conf("containers.conf", &BTreeMap::new());
        write(
            &d.join("storage.conf"),
            &format!(
                "[storage]\ndriver = \"overlay\"\ngraphroot = \"{}\"\nrunroot = \"{}\"\n",
                at("storage"),
                at("run")
            ),
        );
        // No registry: the image is built here, a short name resolves to it locally.
        write(
            &d.join("registries.conf"),
            "unqualified-search-registries = []\n",
        );
        // The pods' network: a bridge with no address and no masquerading, so nothing
        // routes, forwards or NATs; only the pods on it reach each other.
        write(
            &d.join("cni/c1m-pods.conflist"),
            &serde_json::json!({
                "cniVersion": "0.4.0",
                "name": "c1m-pods",
                "plugins": [{
                    "type": "bridge",
                    "bridge": "c1m-pods",
                    "isGateway": false,
                    "ipMasq": false,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{ "subnet": SUBNET }]],
                        "dataDir": at("ipam"),
                    },
                }],
            })
            .to_string(),
        );
        p
    }

    /// A containers.conf: runc with cgroupfs (no systemd here), ulimits within the
    /// host's hard limits (a `--ulimit` above them fails), every path under our folder,
    /// CNI from our own directory, and the given default sysctls.
    fn write_conf(&self, name: &str, sysctls: &BTreeMap<String, String>) -> PathBuf {
        let d = self.dir.path();
        let hard = |resource| {
            let mut l = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: getrlimit writes the struct we pass.
            unsafe { libc::getrlimit(resource, &mut l) };
            l.rlim_max
        };
        let pid_max: u64 = lab_util::sysctl("kernel/pid_max").parse().unwrap_or(32768);
        let sysctls: Vec<String> = sysctls
            .iter()
            .map(|(k, v)| format!("\"{k}={v}\""))
            .collect();
        let conf = format!(
            "[containers]\n\
             default_ulimits = [\"nofile={nofile}:{nofile}\", \"nproc={nproc}:{nproc}\"]\n\
             default_sysctls = [{sysctls}]\n\
             [engine]\n\
             runtime = \"runc\"\n\
             cgroup_manager = \"cgroupfs\"\n\
             events_logger = \"file\"\n\
             events_logfile_path = \"{events}\"\n\
             tmp_dir = \"{tmp}\"\n\
             [network]\n\
             network_backend = \"cni\"\n\
             network_config_dir = \"{cni}\"\n",
            nofile = hard(libc::RLIMIT_NOFILE).min(1 << 20),
            // runc refused 32,769 processes where kernel.pid_max is 32,768 (measured).
            nproc = hard(libc::RLIMIT_NPROC).min(pid_max),
            sysctls = sysctls.join(", "),
            events = d.join("events.log").display(),
            tmp = d.join("tmp").display(),
            cni = d.join("cni").display(),
        );
        let path = d.join(name);
        write(&path, &conf);
        path
    }

    /// `podman ARGS` in the wire namespace, with our configuration.
    fn cmd(&self, conf: &Path, args: &[&str]) -> Command {
        let d = self.dir.path();
        let mut cmd = Command::new("nsenter");
        cmd.arg(format!("--net=/run/netns/{}", self.wire))
            .arg("podman")
            // runc's state, /run/runc by default.
            .arg(format!("--runtime-flag=root={}", d.join("runc").display()))
            .args(args)
            .env("CONTAINERS_CONF", conf)
            .env("CONTAINERS_STORAGE_CONF", d.join("storage.conf"))
            .env("CONTAINERS_REGISTRIES_CONF", d.join("registries.conf"));
        cmd
    }

    /// `podman ARGS`, which must succeed: its stdout.
    fn run(&self, args: &[&str]) -> String {
        let out = bounded(self.cmd(&self.dir.join("containers.conf"), args), LIMIT);
        assert!(
            out.status.success(),
            "podman {args:?}: {}\n{}",
            text(&out),
            self.logs()
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The image `c1m:latest` from exactly the binary under test, offline: the same
    /// rootfs.sh and Containerfile as `cargo xtask image`.
    fn build_image(&self) {
        let kube = crate::deploy_kubernetes::dir();
        let rootfs = self.dir.join("rootfs");
        let out = Command::new(kube.join("rootfs.sh"))
            .arg(env!("CARGO_BIN_EXE_c1m"))
            .arg(&rootfs)
            .output()
            .expect("rootfs.sh");
        assert!(out.status.success(), "rootfs.sh: {}", text(&out));
        let file = kube.join("Containerfile");
        self.run(&[
            "build",
            "--quiet",
            "--file",
            &file.display().to_string(),
            "--tag",
            "localhost/c1m:latest",
            &rootfs.display().to_string(),
        ]);
    }

    /// `podman kube play` of one pod, its sysctls as the runtime's defaults, on `network`.
    fn play(&mut self, pod: &Value, network: &[&str]) {
        let name = str_at(pod, &["metadata", "name"]).to_owned();
        let file = self.dir.join(format!("{name}.yaml"));
        write(&file, &serde_yaml::to_string(pod).expect("yaml"));
        let conf = self.write_conf(&format!("{name}.conf"), &sysctls(pod));
        self.pods.push(name);
        let mut args = vec!["kube", "play"];
        args.extend_from_slice(network);
        let file = file.display().to_string();
        args.push(&file);
        let out = bounded(self.cmd(&conf, &args), LIMIT);
        assert!(out.status.success(), "kube play {file}: {}", text(&out));
    }

    /// Waits for the pod's container `c1m` to exit: its exit code.
    fn wait(&self, pod: &str) -> i32 {
        let out = self.run(&["wait", &format!("{pod}-c1m")]);
        out.trim()
            .parse()
            .expect("podman wait prints the exit code")
    }

    /// Every container's log, for a failure's message.
    fn logs(&self) -> String {
        let mut all = String::new();
        for pod in &self.pods {
            let out = self
                .cmd(
                    &self.dir.join("containers.conf"),
                    &["logs", &format!("{pod}-c1m")],
                )
                .output();
            if let Ok(o) = out {
                all += &format!("--- {pod}:\n{}", text(&o));
            }
        }
        all
    }

    /// The host path of the claimed volume.
    fn volume(&self, name: &str) -> PathBuf {
        PathBuf::from(
            self.run(&["volume", "inspect", name, "--format", "{{.Mountpoint}}"])
                .trim(),
        )
    }

    /// A sysctl of the network namespace of the pod's running container.
    fn pod_sysctl(&self, pod: &str, name: &str) -> String {
        let pid = self.run(&[
            "inspect",
            &format!("{pod}-c1m"),
            "--format",
            "{{.State.Pid}}",
        ]);
        let out = Command::new("nsenter")
            .arg(format!("--net=/proc/{}/ns/net", pid.trim()))
            .arg("cat")
            .arg(format!("/proc/sys/{}", name.replace('.', "/")))
            .output()
            .expect("nsenter cat");
        assert!(out.status.success(), "{name}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    }
}

impl Drop for Podman {
    fn drop(&mut self) {
        let conf = self.dir.join("containers.conf");
        let quiet = |args: &[&str]| {
            let _ = bounded(self.cmd(&conf, args), LIMIT);
        };
        let mut rm = vec!["pod", "rm", "--force", "--time", "0", "--ignore"];
        rm.extend(self.pods.iter().map(String::as_str));
        quiet(&rm);
        quiet(&["volume", "rm", "--force", "c1m-runs"]);
        // The pause image podman built for the pods' infra containers, and ours.
        let images =
            stdout(&mut self.cmd(&conf, &["images", "--format", "{{.Repository}}:{{.Tag}}"]));
        for image in images
            .lines()
            .filter(|i| i.starts_with("localhost/podman-pause:") || *i == "localhost/c1m:latest")
        {
            quiet(&["rmi", "--force", image]);
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.wire])
            .status();
        for path in FIXED_PATHS.map(PathBuf::from) {
            if !self.fixed_before.contains(&path) {
                // Caches of ours alone, but runc's folder only if empty.
                let _ = if path.starts_with("/run") {
                    std::fs::remove_dir(&path)
                } else {
                    std::fs::remove_dir_all(&path)
                };
            }
        }
        // The temp folder (storage, configuration, run folders) goes with `dir`.
    }
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn key(k: &str) -> Value {
    Value::String(k.to_owned())
}

/// The pod a Job's controller makes from its template; for an Indexed Job's completion
/// `index`, with the annotation and the env variable the controller adds.
fn job_pod(job: &Value, name: &str, index: Option<u64>) -> Value {
    let template = &job["spec"]["template"];
    let mut pod = Mapping::new();
    pod.insert(key("apiVersion"), key("v1"));
    pod.insert(key("kind"), key("Pod"));
    let mut metadata = template["metadata"]
        .as_mapping()
        .cloned()
        .unwrap_or_default();
    metadata.insert(key("name"), key(name));
    let mut spec = template["spec"].clone();
    if let Some(i) = index {
        let mut annotations = Mapping::new();
        annotations.insert(key(INDEX_ANNOTATION), key(&i.to_string()));
        metadata.insert(key("annotations"), Value::Mapping(annotations));
        let from_annotation: Value = serde_yaml::from_str(&format!(
            "{{name: {}, valueFrom: {{fieldRef: {{fieldPath: \"metadata.annotations['{INDEX_ANNOTATION}']\"}}}}}}",
            c1m::workload::host_share::INDEX_ENV
        ))
        .expect("env entry");
        for c in containers(&mut spec) {
            env_of(c).push(from_annotation.clone());
        }
    }
    pod.insert(key("metadata"), Value::Mapping(metadata));
    pod.insert(key("spec"), spec);
    Value::Mapping(pod)
}

fn containers(spec: &mut Value) -> impl Iterator<Item = &mut Value> {
    spec["containers"]
        .as_sequence_mut()
        .expect("containers")
        .iter_mut()
}

fn env_of(c: &mut Value) -> &mut Vec<Value> {
    if c["env"].is_null() {
        c.as_mapping_mut()
            .expect("container")
            .insert(key("env"), Value::Sequence(Vec::new()));
    }
    c["env"].as_sequence_mut().expect("env")
}

/// What a cluster would have done to the pod and podman 4.3 does not, and the values
/// the test picks (`values`: env variables by name):
/// - the scheduler's `spec.nodeName` (podman has no such fieldRef): `node`;
/// - the headless Service's DNS answer for its name: a hostAliases entry;
/// - no `ports`: podman 4.3 publishes every containerPort as a host port (Kubernetes
///   does not without hostPort), and two client pods would collide on 9464;
/// - on a cgroup v1 host (as this box), the cgroup v2 hierarchy the observer attaches
///   sock_ops to, mounted from the host: a cgroup v2 node gives a container its own.
fn as_cluster_would(pod: &mut Value, node: &str, service: &str, values: &BTreeMap<&str, String>) {
    let spec = &mut pod["spec"];
    let alias: Value = serde_yaml::from_str(&format!(
        "[{{ip: \"{SERVER_IP}\", hostnames: [{service}]}}]"
    ))
    .expect("hostAliases");
    spec.as_mapping_mut()
        .expect("spec")
        .insert(key("hostAliases"), alias);
    let cgroup2 = cgroup2_root().filter(|p| p != Path::new("/sys/fs/cgroup"));
    let observer = pod_runs(spec, "c1m run");
    for c in containers(spec) {
        let m = c.as_mapping_mut().expect("container");
        m.remove("ports");
        for e in env_of(c) {
            let name = str_at(e, &["name"]).to_owned();
            let node_ref =
                e["valueFrom"]["fieldRef"]["fieldPath"].as_str() == Some("spec.nodeName");
            let value = match values.get(name.as_str()) {
                Some(v) => v.clone(),
                None if node_ref => node.to_owned(),
                None => continue,
            };
            *e = serde_yaml::from_str(&format!("{{name: {name}, value: \"{value}\"}}"))
                .expect("env entry");
        }
        if let (Some(root), true) = (&cgroup2, observer) {
            let mount: Value = serde_yaml::from_str(&format!(
                "{{name: cgroup2, mountPath: \"{}\", readOnly: true}}",
                root.display()
            ))
            .expect("volumeMount");
            c["volumeMounts"]
                .as_sequence_mut()
                .expect("volumeMounts")
                .push(mount);
        }
    }
    if let (Some(root), true) = (&cgroup2, observer) {
        let volume: Value = serde_yaml::from_str(&format!(
            "{{name: cgroup2, hostPath: {{path: \"{}\"}}}}",
            root.display()
        ))
        .expect("volume");
        spec["volumes"]
            .as_sequence_mut()
            .expect("volumes")
            .push(volume);
    }
}

/// True when a container of the pod spec runs `what` (the server pod's `c1m run`).
fn pod_runs(spec: &Value, what: &str) -> bool {
    spec["containers"]
        .as_sequence()
        .into_iter()
        .flatten()
        .any(|c| serde_yaml::to_string(&c["args"]).is_ok_and(|a| a.contains(what)))
}

/// Where the host mounts the cgroup v2 hierarchy's root.
fn cgroup2_root() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let sep = f.iter().position(|w| *w == "-")?;
        (f.get(sep + 1) == Some(&"cgroup2") && f.get(3) == Some(&"/")).then(|| PathBuf::from(f[4]))
    })
}

fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn the_manifests_run_in_podman_and_merge_exactly() {
    if !root_or_skip("deploy_podman") {
        return;
    }
    let missing: Vec<&str> = ["podman", "runc", "catatonit", "nsenter"]
        .into_iter()
        .filter(|p| !have(p))
        .collect();
    assert!(
        missing.is_empty(),
        "missing {missing:?}: `cargo xtask test` installs them (apt-get install podman runc catatonit)"
    );
    let before = HostState::now();
    let mut podman = Podman::new(&before);
    podman.build_image();

    let service = load("server-service.yaml");
    let service_name = str_at(&service, &["metadata", "name"]).to_owned();
    let server_yaml = load("server-pod.yaml");
    let server_name = str_at(&server_yaml, &["metadata", "name"]).to_owned();
    let values = BTreeMap::from([
        ("C1M_CONNECTIONS", CONNECTIONS.to_string()),
        // No Prometheus scrapes here: the run ends with its folder.
        ("C1M_METRICS_LINGER", "0".to_owned()),
    ]);

    // The claim (podman makes a volume of it), then the server on its fixed address.
    let pvc = crate::deploy_kubernetes::dir().join("runs-pvc.yaml");
    podman.run(&["kube", "play", &pvc.display().to_string()]);
    let mut server = server_yaml.clone();
    as_cluster_would(&mut server, "node-server", &service_name, &values);
    podman.play(&server, &["--network", "c1m-pods", "--ip", SERVER_IP]);
    // The pod's namespace has the manifest's sysctls (c1m waits for its clients now).
    for (name, value) in sysctls(&server) {
        assert_eq!(podman.pod_sysctl(&server_name, &name), value, "{name}");
    }

    // The clients: the Job's own template, once per completion index.
    let job = load("clients-job.yaml");
    let job_name = str_at(&job, &["metadata", "name"]);
    assert_eq!(job["spec"]["completions"].as_u64(), Some(CLIENTS));
    let mut client_pods = Vec::new();
    for i in 0..CLIENTS {
        let name = format!("{job_name}-{i}");
        let mut pod = job_pod(&job, &name, Some(i));
        as_cluster_would(&mut pod, &format!("node-{i}"), &service_name, &values);
        podman.play(&pod, &["--network", "c1m-pods"]);
        client_pods.push(name);
    }
    for pod in &client_pods {
        assert_eq!(podman.wait(pod), 0, "{pod}\n{}", podman.logs());
    }
    assert_eq!(podman.wait(&server_name), 0, "{}", podman.logs());

    // The merge Job's pod reads the same volume; it needs no network.
    let merge_job = load("merge-job.yaml");
    let merge_name = str_at(&merge_job, &["metadata", "name"]).to_owned();
    let mut merge = job_pod(&merge_job, &merge_name, None);
    as_cluster_would(&mut merge, "node-merge", &service_name, &values);
    podman.play(&merge, &["--network", "none"]);
    assert_eq!(podman.wait(&merge_name), 0, "{}", podman.logs());

    let runs = podman.volume("c1m-runs");
    let merged = report::load_run(&runs.join("merged")).expect("the merged run folder");
    let client = merged.client.as_ref().expect("merged client side");
    assert_eq!(client.counters.connected, CONNECTIONS, "{}", podman.logs());
    let mh = merged.multihost.as_ref().expect("per-host breakdown");
    let labels: Vec<&str> = mh.hosts.iter().map(|h| h.label.as_str()).collect();
    assert_eq!(labels, ["node-0", "node-1"]);
    for h in &mh.hosts {
        let share = CONNECTIONS / CLIENTS;
        assert_eq!((h.connected, h.failures), (share, 0), "{}", h.label);
        // The client pods have no eBPF privileges: ESTABLISHED in their /proc/net/tcp.
        assert_eq!(h.kernel_client_established, Some(share as i64), "{h:?}");
        assert!(h.kernel_agrees, "{h:?}");
    }
    let idle = merged
        .phases
        .iter()
        .find(|p| p.name == "idle")
        .expect("idle");
    let open = lab_util::kernel_vs_app(idle, "server open");
    assert_eq!(
        (open.kernel, open.app),
        (Some(CONNECTIONS as i64), Some(CONNECTIONS as i64))
    );

    // The server pod's own folder: the observer ran in the pod, with sock_ops attached,
    // and its audit against the pod's MIB explains every difference.
    let server_dir = lab_util::run_folder(&runs.join("server"));
    let run = report::load_run(&server_dir).expect("server folder");
    let kernel = run.kernel.as_ref().expect("the server pod's kernel view");
    assert_eq!(kernel.server.established_total, CONNECTIONS, "{kernel:?}");
    assert!(
        !kernel.unavailable.iter().any(|u| u.contains("sock_ops")),
        "{:?}",
        kernel.unavailable
    );
    let counters = &run.server.as_ref().expect("server").counters;
    assert_eq!(counters.accepted, CONNECTIONS);
    assert_eq!(
        counters.closed.local_close, CONNECTIONS,
        "{:?}",
        counters.closed
    );
    let audit = run.audit.as_ref().expect("audit");
    assert_eq!(audit.unexplained().count(), 0, "{}", audit.text_table());

    drop(podman);
    assert_eq!(
        HostState::now(),
        before,
        "the host is not as the test found it"
    );
}
