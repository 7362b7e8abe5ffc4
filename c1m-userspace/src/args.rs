//! Parsers of the values every command takes (connection counts, rates, addresses,
//! ports): the bottom layer, used by the workload, the lab and the multi-host parts
//! alike, importing none of them.

use std::{
    net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs},
    num::NonZeroU64,
};

use anyhow::{Context, Result, bail};

/// Largest address range one argument may expand to: a /16 is already far more source
/// addresses than one box can use.
pub(crate) const MAX_RANGE: u64 = 65_536;

/// A connection count from the command line: `-n` of `c1m run`, `c1m client` and
/// `c1m doctor`, `--expect`, `--max-conns`, the benchmarks' counts. At least 1 (a run of
/// 0 connections has nothing to hold or measure), parsed by one parser for every flag
/// and carried as this type from the flag to where it is split or counted against.
/// Its `Display` is the plain number, which the same parser reads back (a child's argv).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Connections(NonZeroU64);

impl Connections {
    /// `None` for 0.
    pub(crate) const fn new(n: u64) -> Option<Connections> {
        match NonZeroU64::new(n) {
            Some(n) => Some(Connections(n)),
            None => None,
        }
    }

    /// A count written in the source (a default): 0 fails to compile when used in a const.
    pub const fn of(n: u64) -> Connections {
        match Connections::new(n) {
            Some(c) => c,
            None => panic!("a connection count is at least 1"),
        }
    }

    /// The count, to add up and compare with counted connections.
    pub const fn get(self) -> u64 {
        self.0.get()
    }
}

/// A packet-loss probability from `--loss`: `1%`, `0.5%` or a fraction (`0.01`), more
/// than 0 and at most 50% (past that TCP barely completes a handshake, and the injector's
/// threshold is a 32-bit fraction). Its `Display` is the percentage, which the same
/// parser reads back (a client host's argv).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LossRate(f64);

impl LossRate {
    /// The largest probability `--loss` takes.
    pub const MAX: f64 = 0.5;

    /// The probability, 0 < p ≤ 0.5.
    pub fn fraction(self) -> f64 {
        self.0
    }

    /// The injector's drop threshold: a packet is dropped when a uniform random u32 is
    /// below it (`c1m_common::loss::THRESHOLD`).
    pub fn threshold(self) -> u32 {
        (self.0 * 4_294_967_296.0)
            .round()
            .clamp(1.0, f64::from(u32::MAX)) as u32
    }
}

impl std::fmt::Display for LossRate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}%", self.0 * 100.0)
    }
}

impl std::str::FromStr for LossRate {
    type Err = String;

    fn from_str(s: &str) -> Result<LossRate, String> {
        let t = s.trim();
        let (number, scale) = match t.strip_suffix('%') {
            Some(n) => (n.trim(), 100.0),
            None => (t, 1.0),
        };
        let p = number
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .map(|v| v / scale)
            .ok_or_else(|| format!("not a loss rate: {s:?} (e.g. 1% or 0.01)"))?;
        if p <= 0.0 || p > LossRate::MAX {
            return Err(format!(
                "--loss {s} is outside (0, 50%]: give a probability above 0 and at most 50%, e.g. 1% or 0.01"
            ));
        }
        Ok(LossRate(p))
    }
}

impl std::fmt::Display for Connections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl std::str::FromStr for Connections {
    type Err = String;

    /// `1000000`, `1_000_000`, `1,000,000`, `10k`, `1M` or `1.5m` (k: thousand, m: million, either
    /// case; a fraction only when the count comes out whole).
    fn from_str(s: &str) -> Result<Connections, String> {
        let hint = || format!("not a count: {s:?} (e.g. 100000, 10k or 1M)");
        let t = without_separators(s);
        let (digits, scale): (&str, u128) = match t.char_indices().last() {
            Some((i, 'k' | 'K')) => (&t[..i], 1_000),
            Some((i, 'm' | 'M')) => (&t[..i], 1_000_000),
            _ => (&t[..], 1),
        };
        let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
        let all_digits = |x: &str| x.bytes().all(|b| b.is_ascii_digit());
        if whole.is_empty() || !all_digits(whole) || !all_digits(fraction) {
            return Err(hint());
        }
        let has_point = digits.contains('.');
        if has_point && (fraction.is_empty() || scale == 1) {
            return Err(hint());
        }
        let too_many = || {
            format!(
                "{s:?} is more connections than a count holds ({})",
                u64::MAX
            )
        };
        // Both parts over a common denominator, in u128 so no step overflows before the
        // check (a fraction longer than the suffix's zeros cannot come out whole anyway).
        let places = u32::try_from(fraction.len()).map_err(|_| hint())?;
        let denominator = 10u128.checked_pow(places).ok_or_else(hint)?;
        let whole: u128 = whole.parse().map_err(|_| too_many())?;
        let fraction: u128 = if fraction.is_empty() {
            0
        } else {
            fraction.parse().map_err(|_| hint())?
        };
        let scaled = whole
            .checked_mul(denominator)
            .and_then(|w| w.checked_add(fraction))
            .and_then(|x| x.checked_mul(scale))
            .ok_or_else(too_many)?;
        if scaled % denominator != 0 {
            return Err(format!("not a whole number of connections: {s:?}"));
        }
        let n = u64::try_from(scaled / denominator).map_err(|_| too_many())?;
        Connections::new(n).ok_or_else(|| "at least 1 connection is needed".to_owned())
    }
}

/// The fastest `--rate` taken: far beyond any box (the pace schedules each connect at
/// `k / rate` s; NaN, infinities and rates near f64's end made it schedule none, and the
/// client hung).
pub(crate) const MAX_RATE: f64 = 100_000_000.0;

/// A number as people write it: `25000`, `25_000` or `25,000` (the help prints defaults
/// with the separator every other number of c1m's output has, so it must read them back).
fn without_separators(s: &str) -> String {
    s.trim().chars().filter(|&c| c != '_' && c != ',').collect()
}

/// A plain count flag (`--in-flight`, `--backlog`, sizes in bytes): digits with
/// optional thousands separators.
pub(crate) fn parse_number<T: std::str::FromStr>(s: &str) -> Result<T, String> {
    without_separators(s)
        .parse()
        .map_err(|_| format!("not a number: {s:?} (e.g. 2048 or 2,048)"))
}

/// `--rate`: connections per second, 0 (unpaced) up to [`MAX_RATE`].
pub(crate) fn parse_rate(s: &str) -> Result<f64, String> {
    match without_separators(s).parse::<f64>() {
        Ok(r) if (0.0..=MAX_RATE).contains(&r) => Ok(r),
        Ok(_) => Err(format!(
            "a rate is 0 (as fast as --in-flight allows) up to {} connections per second",
            crate::fmt::count(MAX_RATE as u64)
        )),
        Err(_) => Err(format!("not a rate: {s:?} (e.g. 25000)")),
    }
}

/// `--metrics-addr`: `HOST:PORT` with an IP host, or `:PORT` for every IPv4 address.
pub(crate) fn parse_metrics_addr(s: &str) -> Result<SocketAddr, String> {
    let full;
    let text = if let Some(port) = s.strip_prefix(':') {
        full = format!("0.0.0.0:{port}");
        full.as_str()
    } else {
        s
    };
    text.parse().map_err(|_| {
        format!("--metrics-addr {s}: not an IP address and port (e.g. 127.0.0.1:9100 or :9100)")
    })
}

/// An endpoint on another host, `HOST:PORT` (`[v6]:PORT` for IPv6): a host name is kept
/// unresolved (a Kubernetes service may not resolve before its pod is up). The error
/// names the form, for the caller to prefix with its flag.
pub(crate) fn parse_host_port(s: &str) -> Result<String, String> {
    let form =
        || format!("{s:?}: not HOST:PORT (the server host's control endpoint, e.g. 10.0.0.1:7999)");
    let (host, port) = s.rsplit_once(':').ok_or_else(form)?;
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let bracketed = host.starts_with('[') && host.ends_with(']');
    let host_ok = !bare.is_empty()
        && match bare.parse::<IpAddr>() {
            Ok(IpAddr::V6(_)) => bracketed,
            Ok(IpAddr::V4(_)) => !bracketed,
            // A name: letters, digits, dots and dashes only.
            Err(_) => {
                !bracketed
                    && bare
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
            }
        };
    match port.parse::<u16>() {
        Ok(p) if p > 0 && host_ok => Ok(s.to_owned()),
        _ => Err(form()),
    }
}

/// Expands `a,b,c-d` items (IPv4 ranges inclusive) into addresses.
pub(crate) fn parse_addrs(items: &[String]) -> Result<Vec<IpAddr>> {
    let mut out = Vec::new();
    for item in items
        .iter()
        .flat_map(|i| i.split(','))
        .map(str::trim)
        .filter(|i| !i.is_empty())
    {
        // A range starts with an IPv4 address: `c1m-server` (a Kubernetes Service) is a
        // name with a dash, not a range (its pods failed "bad address range start").
        let range = item
            .split_once('-')
            .filter(|(a, _)| a.trim().parse::<Ipv4Addr>().is_ok());
        if let Some((a, b)) = range {
            let a: Ipv4Addr = a
                .trim()
                .parse()
                .with_context(|| format!("bad address range start in {item:?}"))?;
            let b: Ipv4Addr = b
                .trim()
                .parse()
                .with_context(|| format!("bad address range end in {item:?}"))?;
            let (a, b) = (u32::from(a), u32::from(b));
            if b < a || u64::from(b - a) >= MAX_RANGE {
                bail!(
                    "address range {item:?} is empty or larger than {}",
                    crate::fmt::count(MAX_RANGE)
                );
            }
            out.extend((a..=b).map(|v| IpAddr::V4(Ipv4Addr::from(v))));
        } else if let Ok(a) = item.parse() {
            out.push(a);
        } else {
            // A name (a Kubernetes Service): every address it resolves to, in order.
            let found: Vec<IpAddr> = (item, 0)
                .to_socket_addrs()
                .map(|it| it.map(|sa| sa.ip()).collect())
                .unwrap_or_default();
            if found.is_empty() {
                bail!("bad address {item:?}: neither an address nor a name that resolves");
            }
            for a in found {
                if !out.contains(&a) {
                    out.push(a);
                }
            }
        }
    }
    Ok(out)
}

/// Parses `8000-8099`, `8000,8001` or `8000`.
pub fn parse_ports(s: &str) -> Result<Vec<u16>> {
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        if let Some((a, b)) = item.split_once('-') {
            let a: u16 = a
                .trim()
                .parse()
                .with_context(|| format!("bad port in {item:?}"))?;
            let b: u16 = b
                .trim()
                .parse()
                .with_context(|| format!("bad port in {item:?}"))?;
            if b < a {
                bail!("empty port range {item:?}");
            }
            out.extend(a..=b);
        } else {
            out.push(item.parse().with_context(|| format!("bad port {item:?}"))?);
        }
    }
    if out.is_empty() || out.contains(&0) {
        bail!("no usable ports in {s:?}");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn a_name_with_a_dash_is_a_name_not_a_range() {
        // `.invalid` never resolves (RFC 6761): the error is the name's, not a range's.
        let e = parse_addrs(&["c1m-server.invalid".into()]).unwrap_err();
        assert!(
            e.to_string().contains("neither an address nor a name"),
            "{e}"
        );
        let e = parse_addrs(&["10.0.0.1-c1m".into()]).unwrap_err();
        assert!(e.to_string().contains("bad address range end"), "{e}");
    }

    #[test]
    fn loss_rates_parse_as_percent_or_fraction_and_round_trip() {
        let p = |s: &str| s.parse::<LossRate>();
        assert_eq!(p("1%").unwrap().fraction(), 0.01);
        assert_eq!(p("0.01").unwrap().fraction(), 0.01);
        assert_eq!(p(" 2.5 %").unwrap().fraction(), 0.025);
        assert_eq!(p("50%").unwrap().fraction(), 0.5);
        assert_eq!(p("0.5").unwrap().fraction(), 0.5);
        let one = p("1%").unwrap();
        assert_eq!(one.to_string(), "1%");
        assert_eq!(p(&one.to_string()).unwrap(), one);
        assert_eq!(p("0.5").unwrap().threshold(), 1 << 31);
        assert_eq!(p("1%").unwrap().threshold(), 42_949_673);
        // The smallest rate still drops something.
        assert_eq!(p("1e-12").unwrap().threshold(), 1);
    }

    #[test]
    fn bad_loss_rates_are_refused_in_one_line() {
        for bad in [
            "0", "0%", "-1%", "51%", "0.6", "1", "abc", "%", "", "NaN", "inf",
        ] {
            let e = bad.parse::<LossRate>().unwrap_err();
            assert!(!e.contains('\n'), "{e}");
            assert!(e.contains("1%"), "{bad}: {e}");
        }
        assert_eq!(
            "51%".parse::<LossRate>().unwrap_err(),
            "--loss 51% is outside (0, 50%]: give a probability above 0 and at most 50%, e.g. 1% or 0.01"
        );
    }

    #[test]
    fn a_clock_endpoint_is_host_colon_port() {
        for ok in [
            "10.77.0.1:7999",
            "c1m-server.ns.svc:7999",
            "[::1]:7999",
            "localhost:1",
        ] {
            assert_eq!(parse_host_port(ok).as_deref(), Ok(ok));
        }
        for bad in [
            "nonsense",
            "10.0.0.1",
            "10.0.0.1:",
            ":7999",
            "h:0",
            "h:65536",
            "::1:7999",
            "a b:1",
            "h:x",
        ] {
            let e = parse_host_port(bad).expect_err(bad);
            assert!(e.contains("not HOST:PORT") && e.contains(bad), "{e}");
        }
    }

    fn n(s: &str) -> Result<u64, String> {
        s.parse::<Connections>().map(Connections::get)
    }

    #[test]
    fn counts_plain_and_with_suffixes() {
        assert_eq!(n("1000000"), Ok(1_000_000));
        assert_eq!(n(" 25000 "), Ok(25_000));
        assert_eq!(n("1_000_000"), Ok(1_000_000));
        assert_eq!(n("10k"), Ok(10_000));
        assert_eq!(n("10K"), Ok(10_000));
        assert_eq!(n("1M"), Ok(1_000_000));
        assert_eq!(n("1m"), Ok(1_000_000));
        assert_eq!(n("1.5M"), Ok(1_500_000));
        assert_eq!(n("1.76m"), Ok(1_760_000));
        assert_eq!(n("2.5k"), Ok(2_500));
        assert_eq!(n("1"), Ok(1));
        assert_eq!(n("1,000,000"), Ok(1_000_000));
    }

    /// The help prints defaults as `25,000`; every such flag reads that back.
    #[test]
    fn numbers_read_back_as_the_help_prints_them() {
        assert_eq!(parse_number::<u64>("25,000"), Ok(25_000));
        assert_eq!(parse_number::<u64>("1_048_576"), Ok(1 << 20));
        assert_eq!(parse_number::<i32>("65,535"), Ok(65_535));
        assert_eq!(parse_rate("25,000"), Ok(25_000.0));
        assert!(parse_number::<u64>("-1").is_err());
        assert!(parse_number::<u64>("2k").is_err());
    }

    #[test]
    fn zero_is_refused_in_every_spelling() {
        for s in ["0", "0k", "0M", "0.0m", "000"] {
            assert_eq!(
                n(s),
                Err("at least 1 connection is needed".to_owned()),
                "{s}"
            );
        }
    }

    #[test]
    fn junk_fractions_and_overflow_are_refused() {
        for s in [
            "", "k", "M", "-1", "+5", "1.5", "1e6", "10 k", "1kk", "one", "1.k", ".5k",
        ] {
            assert!(n(s).unwrap_err().starts_with("not a count"), "{s}");
        }
        assert!(n("1.0001k").unwrap_err().contains("not a whole number"));
        assert_eq!(n("18446744073709551615"), Ok(u64::MAX));
        for s in [
            "18446744073709551616",
            "18446744073709552k",
            "99999999999999999999999999999999999999999M",
        ] {
            assert!(n(s).unwrap_err().contains("more connections than"), "{s}");
        }
        // A fraction too long to scale is junk, never a panic.
        assert!(n(&format!("1.{}m", "1".repeat(60))).is_err());
    }

    #[test]
    fn display_reads_back() {
        for c in [Connections::of(1), Connections::of(1_760_000)] {
            assert_eq!(c.to_string().parse::<Connections>(), Ok(c));
        }
        assert_eq!(Connections::new(0), None);
    }
}
