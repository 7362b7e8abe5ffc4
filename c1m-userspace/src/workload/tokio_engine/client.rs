//! The tokio client shard. (Being written: see issue 11.)

use std::sync::{Arc, atomic::AtomicU64};

use anyhow::Result;

use super::ShardIo;
use crate::workload::config::ClientShardConfig;

pub fn run(cfg: ClientShardConfig, io: ShardIo, open_in_process: Arc<AtomicU64>) -> Result<()> {
    let _ = (cfg, io, open_in_process);
    anyhow::bail!("--engine tokio: the client is not written yet")
}
