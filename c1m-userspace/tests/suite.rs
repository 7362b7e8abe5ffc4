//! Every integration test, in one binary: 32 binaries each linked the library and
//! compiled `lab_util`/`workload_util` again (225 s of the suite's build on 2 cores;
//! issue 31). Each file stays a module of its own, named as the binary was.
//!
//! The modules were written to run one after another, each with the harness's own
//! threads: two lab runs at once share the kernel's tunables, ports and eBPF hooks.
//! `cargo xtask test` runs this binary once per module (see xtask/src/test.rs); a
//! filter keeps to one module by hand:
//! `cargo test --profile suite --test suite -- lab_run::`.

mod lab_util;
mod workload_util;

mod build_guard;
mod control_endpoint;
mod deploy_kubernetes;
mod deploy_podman;
mod docs_readme;
mod hostile_inputs;
mod hostile_signals;
mod hostile_state;
mod lab_compare;
mod lab_foreign;
mod lab_lifecycle;
mod lab_phases;
mod lab_plan;
mod lab_push_rule;
mod lab_run;
mod lab_servers;
mod lab_summary;
mod lab_tls_figures;
mod lab_truth;
mod layers;
mod live_view_final;
mod live_view_metrics;
mod live_view_tmux;
mod live_view_tui;
mod metrics_dashboard;
mod metrics_linger;
mod multihost_hostile;
mod multihost_hosts;
mod multihost_loss;
mod multihost_netns;
mod observer_kernel;
mod reference_servers;
mod report_browser;
mod report_scales;
mod workload_churn;
mod workload_faults;
mod workload_heartbeat;
mod workload_interop;
mod workload_latency;
mod workload_message_rate;
mod workload_message_rate_processes;
mod workload_scale;
mod workload_server_message_order;
mod workload_server_messages;
mod workload_server_messages_wss;
mod workload_source;
mod workload_tlp;
mod workload_tls;
mod workload_tokio_client;
mod workload_tokio_server;
mod workload_ws_fuzz;
