//! `c1m run`, `c1m doctor`, `c1m top`, the live view and the run exports. One home per
//! concern:
//!
//! | module    | concern                                                               |
//! |-----------|-----------------------------------------------------------------------|
//! | `run`     | the run's orchestration: phases, children's argv, journal, port owners |
//! | `figures` | the figures of one instant, computed once from kernel and app views    |
//! | `live`    | driving the live outputs each tick (TUI, plain, JSON, Prometheus)      |
//! | `view`    | the live views themselves, each reading `figures`                     |
//! | `export`  | the run folder: summary.json, CSV, histograms, report.html             |
//! | `compare` | any number of runs side by side, repeats with their spread             |
//! | `model`   | what a run records (`RunRecord`, `Sample`, phases, outcome)            |
//! | `doctor`  | preflight, leftovers and `--restore`                                   |
//! | `tuning`  | `--tune`: sysctls set for a run, counted over tuners, restored in place |
//! | `top`     | the live view for a server already running                            |
//! | `servers` | the servers `--servers` compares: start command, push trigger, format  |

pub mod check;
pub mod compare;
pub mod doctor;
pub mod export;
pub mod figures;
pub mod live;
pub mod model;
pub mod run;
pub mod servers;
pub mod summary;
pub mod top;
pub mod tuning;
pub mod view;
