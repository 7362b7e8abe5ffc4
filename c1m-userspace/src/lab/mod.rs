//! `c1m run`, `c1m doctor`, `c1m top`, the live view and the run exports.

pub mod child_args;
pub mod doctor;
pub mod export;
pub mod figures;
pub mod journal;
pub mod live;
pub mod model;
mod ports;
pub mod run;
pub mod summary;
pub mod top;
mod verdict;
pub mod view;
