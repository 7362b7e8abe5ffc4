//! Hands one scrape's families to the official client's encoder (`prometheus-client`),
//! which writes the Prometheus text format (version 0.0.4): escaping, float spelling, `le`
//! labels, the `+Inf` bucket and the `_total`/`_info` suffixes are its job. This file
//! collects what a scrape exports, leaves out families without a sample and values that
//! are not finite (no `NaN` is ever exported), and writes the rest.

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, NoLabelSet, prometheus_text},
    metrics::MetricType,
    registry::Registry,
};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Kind {
    Gauge,
    Counter,
    Histogram,
    /// Labels that describe the run, value always 1.
    Info,
}

impl Kind {
    fn metric_type(self) -> MetricType {
        match self {
            Kind::Gauge => MetricType::Gauge,
            Kind::Counter => MetricType::Counter,
            Kind::Histogram => MetricType::Histogram,
            Kind::Info => MetricType::Info,
        }
    }

    /// The suffix the encoder appends to the name it is given.
    fn suffix(self) -> &'static str {
        match self {
            Kind::Counter => "_total",
            Kind::Info => "_info",
            Kind::Gauge | Kind::Histogram => "",
        }
    }
}

/// A histogram's buckets as the encoder takes them: (upper bound, observations in this
/// bucket alone), finite bounds ascending; observations above the last bound are
/// `count` minus their sum (the encoder writes the `+Inf` bucket from `count`).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Buckets {
    pub bounds: Vec<(f64, u64)>,
    pub sum: f64,
    pub count: u64,
}

/// A sample's value: integers print exactly.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Value {
    Int(u64),
    Signed(i64),
    Float(f64),
    Histogram(Buckets),
}

macro_rules! from_int {
    ($($t:ty),*) => {$(impl From<$t> for Value {
        fn from(v: $t) -> Value { Value::Int(v as u64) }
    })*};
}
from_int!(u32, u64, usize);

impl From<i64> for Value {
    fn from(v: i64) -> Value {
        Value::Signed(v)
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Value {
        Value::Float(v)
    }
}

#[derive(Clone, Debug)]
pub(super) struct Sample {
    pub(super) labels: Vec<(&'static str, String)>,
    value: Value,
}

#[derive(Clone, Debug)]
pub(super) struct Family {
    /// The name as exported (a counter's ends in `_total`, an info's in `_info`).
    pub(super) name: &'static str,
    kind: Kind,
    help: &'static str,
    pub(super) samples: Vec<Sample>,
}

impl Family {
    /// One series. A float that is not finite is left out: a scraper reads no sample as
    /// "no data", which is what it is; `NaN` would be plotted and summed.
    pub(super) fn sample(&mut self, labels: &[(&'static str, &str)], v: impl Into<Value>) {
        let value = v.into();
        if matches!(value, Value::Float(f) if !f.is_finite()) {
            return;
        }
        self.samples.push(Sample {
            labels: labels.iter().map(|(k, v)| (*k, (*v).to_owned())).collect(),
            value,
        });
    }
}

/// Families in the order they were declared; one with no sample is left out.
#[derive(Clone, Debug, Default)]
pub(super) struct Exposition {
    pub(super) families: Vec<Family>,
}

impl Exposition {
    pub(super) fn family(
        &mut self,
        name: &'static str,
        kind: Kind,
        help: &'static str,
    ) -> &mut Family {
        self.families.push(Family {
            name,
            kind,
            help,
            samples: Vec::new(),
        });
        let last = self.families.len() - 1;
        &mut self.families[last]
    }

    /// The text of the whole exposition.
    pub(super) fn finish(self) -> Result<String, std::fmt::Error> {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(self));
        let mut out = String::with_capacity(32 * 1024);
        prometheus_text::encode(&mut out, &registry)?;
        Ok(out)
    }
}

impl Collector for Exposition {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for f in self.families.iter().filter(|f| !f.samples.is_empty()) {
            // The encoder appends the kind's suffix itself.
            let base = f.name.strip_suffix(f.kind.suffix()).unwrap_or(f.name);
            let mut family = encoder.encode_descriptor(base, f.help, None, f.kind.metric_type())?;
            for s in &f.samples {
                if f.kind == Kind::Info {
                    family.encode_info(&s.labels)?;
                    continue;
                }
                let mut series = family.encode_family(&s.labels)?;
                match (&s.value, f.kind) {
                    (Value::Histogram(h), _) => {
                        series.encode_histogram::<NoLabelSet>(h.sum, h.count, &h.bounds, None)?
                    }
                    (Value::Int(v), Kind::Counter) => {
                        series.encode_counter::<NoLabelSet, _, u64>(v, None)?
                    }
                    (Value::Float(v), Kind::Counter) => {
                        series.encode_counter::<NoLabelSet, _, u64>(v, None)?
                    }
                    // A counter never goes below 0.
                    (Value::Signed(v), Kind::Counter) => series
                        .encode_counter::<NoLabelSet, _, u64>(
                            &u64::try_from(*v).unwrap_or(0),
                            None,
                        )?,
                    (Value::Int(v), _) => series.encode_gauge(v)?,
                    (Value::Signed(v), _) => series.encode_gauge(v)?,
                    (Value::Float(v), _) => series.encode_gauge(v)?,
                }
            }
        }
        Ok(())
    }
}
