//! A series, once exported, stays until the endpoint closes. A scraper that polls every
//! 15 s sees a family that was there once at every later scrape: a gauge whose source
//! went quiet (the memory per connection once the connections closed, a listener's port
//! once it closed) keeps its last value instead of vanishing, so a dashboard's last
//! point is the run's last value, not a gap. Per endpoint: each scrape's families,
//! with what earlier scrapes exported and this one lacks, become the next scrape's past.

use super::{
    encode::Exposition,
    families::{Detail, families},
};
use crate::view::live_state::LiveState;

/// What this endpoint exported so far, each series with its last value.
#[derive(Debug, Default)]
pub(super) struct Kept {
    last: Exposition,
}

impl Kept {
    /// The text of a scrape of `state`: its families, plus every series an earlier
    /// scrape exported that this one lacks, at its last value.
    pub(super) fn scrape(
        &mut self,
        state: &LiveState,
        detail: Detail,
    ) -> Result<String, std::fmt::Error> {
        let mut now = families(state, detail);
        keep(&self.last, &mut now);
        self.last = now.clone();
        now.finish()
    }
}

/// Adds to `now` the series of `before` it lacks (same family name, same labels).
fn keep(before: &Exposition, now: &mut Exposition) {
    for old in before.families.iter().filter(|f| !f.samples.is_empty()) {
        match now.families.iter_mut().find(|f| f.name == old.name) {
            Some(f) => {
                for s in &old.samples {
                    if !f.samples.iter().any(|n| n.labels == s.labels) {
                        f.samples.push(s.clone());
                    }
                }
            }
            None => now.families.push(old.clone()),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;
    use crate::view::{
        demo,
        prometheus::check::{self, value},
    };

    #[test]
    fn a_series_once_scraped_stays_at_its_last_value() {
        let mut kept = Kept::default();
        let mut s = demo::state();
        let first = check::parse(&kept.scrape(&s, Detail::default()).unwrap()).unwrap();
        let names = |series: &[check::Series]| -> std::collections::BTreeSet<String> {
            series.iter().map(|(n, ..)| n.clone()).collect()
        };
        // The client went away, the kernel view too, and the server's count moved.
        let client_open = value(
            &first,
            "c1m_connections_open",
            &[("side", "client"), ("source", "app")],
        );
        assert!(client_open.is_some());
        s.client = None;
        s.kernel = None;
        if let Some(server) = s.server.as_mut() {
            server.counters.open = 7;
        }
        let then = check::parse(&kept.scrape(&s, Detail::default()).unwrap()).unwrap();
        assert!(names(&first).is_subset(&names(&then)));
        assert_eq!(first.len(), then.len());
        assert_eq!(
            value(
                &then,
                "c1m_connections_open",
                &[("side", "client"), ("source", "app")]
            ),
            client_open
        );
        assert_eq!(
            value(
                &then,
                "c1m_connections_open",
                &[("side", "server"), ("source", "app")]
            ),
            Some(7.0)
        );
        // What the state says now wins over what was kept.
        assert_eq!(value(&then, "c1m_kernel_view_available", &[]), Some(0.0));
        // Kept series stay kept at the next scrape too.
        let again = check::parse(&kept.scrape(&s, Detail::default()).unwrap()).unwrap();
        assert_eq!(again, then);
    }
}
