//! `c1m observe`.

use anyhow::Result;
use clap::Args;

#[derive(Args, Debug)]
pub struct ObserveArgs {}

pub fn run(_args: ObserveArgs) -> Result<()> {
    anyhow::bail!("not yet")
}
