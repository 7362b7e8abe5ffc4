//! Round trips: the echo request a connection sends and the reply checked byte for byte
//! against it (raw TCP here; WebSocket replies are checked in `ws_input`).

use super::{ConnProto, EchoStep, Proto, State};
use crate::workload::{
    config::Mode,
    stats,
    sys::{self, splitmix64},
    ws::{Opcode, frame::encode_frame},
};

impl Proto {
    /// The next echo request of an open `conn`, if more are wanted (its send time is now).
    pub(crate) fn echo_request(&mut self, conn: &mut ConnProto) -> Option<&[u8]> {
        let wanted = self.echo_limit.is_none_or(|lim| u64::from(conn.seq) < lim);
        if !wanted || conn.state != State::Open {
            return None;
        }
        fill_payload(conn.g, conn.seq, &mut self.payload);
        conn.t_ns = sys::monotonic_ns();
        conn.got = 0;
        if self.cfg.mode == Mode::Ws {
            let key = self.mask_key();
            self.out.clear();
            encode_frame(&mut self.out, Opcode::Binary, &self.payload, Some(key));
            Some(&self.out)
        } else {
            Some(&self.payload)
        }
    }

    /// Raw TCP echo: checks the reply against the payload it must equal, piece by piece.
    pub(crate) fn echo_input(&mut self, conn: &mut ConnProto, data: &[u8]) -> EchoStep {
        let expecting = self.echo_limit.is_none_or(|lim| u64::from(conn.seq) < lim);
        let at = conn.got as usize;
        let n = data.len();
        let ok = expecting && at + n <= self.payload.len() && {
            fill_payload(conn.g, conn.seq, &mut self.payload);
            self.payload[at..at + n] == *data
        };
        if !ok {
            return EchoStep::Mismatch;
        }
        conn.got += n as u32;
        if conn.got as usize != self.payload.len() {
            return EchoStep::Partial;
        }
        self.hists.record(
            stats::histograms::ECHO_RTT,
            sys::monotonic_ns().saturating_sub(conn.t_ns) / 1000,
        );
        conn.seq += 1;
        self.c.echo_round_trips += 1;
        EchoStep::RoundTrip
    }
}

/// The echo payload of round trip `seq` on connection `g`: derived, so the reply is checked
/// byte for byte without keeping a copy per connection.
pub(super) fn fill_payload(g: u64, seq: u32, out: &mut [u8]) {
    let base = splitmix64(g.rotate_left(32) ^ u64::from(seq));
    for (i, chunk) in out.chunks_mut(8).enumerate() {
        let w = splitmix64(base ^ i as u64).to_le_bytes();
        chunk.copy_from_slice(&w[..chunk.len()]);
    }
}
