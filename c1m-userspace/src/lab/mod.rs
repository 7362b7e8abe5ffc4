//! `c1m run`, `c1m doctor`, `c1m top`: the lab that starts server, client and observer,
//! drives the phases and writes the run folder through [`crate::report`]. What it shows
//! and writes lives below it ([`crate::view`], [`crate::report`], [`crate::compare`],
//! all reading [`crate::figures`]). One home per concern:
//!
//! | module    | concern                                                                 |
//! |-----------|-------------------------------------------------------------------------|
//! | `run`     | one run: flags, plan, phases, children, journal, port owners, folder     |
//! | `servers` | `--servers`: the reference servers, their order, the sequence            |
//! | `live`    | driving the live outputs each tick (TUI, plain, JSON, Prometheus)        |
//! | `summary` | the end-of-run summary printed to the terminal                            |
//! | `check`   | one doctor row: limit, value found, value needed, fix                    |
//! | `doctor`  | preflight, leftovers and `--restore`                                     |
//! | `tuning`  | `--tune`: sysctls set for a run, counted over tuners, restored in place  |
//! | `top`     | the live view for a server already running                              |

pub(crate) mod check;
pub(crate) mod doctor;
pub(crate) mod gate;
pub(crate) mod live;
pub mod run;
pub(crate) mod servers;
pub(crate) mod summary;
pub(crate) mod top;
pub(crate) mod tuning;
