//! `c1m run`, `c1m doctor`, `c1m top`, the live view and the run exports.

pub mod doctor;
pub mod export;
pub mod figures;
pub mod live;
pub mod model;
pub mod run;
pub mod summary;
pub mod top;
pub mod view;
