//! `cargo xtask bench`: runs `c1m bench`, which prints every figure.

use anyhow::Result;

use crate::util::exec_c1m;

pub fn run(args: &[String]) -> Result<()> {
    let mut all = vec!["bench".to_owned()];
    all.extend_from_slice(args);
    exec_c1m(&all)
}
