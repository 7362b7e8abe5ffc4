//! Parsers of the values every command takes (connection counts, rates, addresses,
//! ports): the bottom layer, used by the workload, the lab and the multi-host parts
//! alike, importing none of them.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};

use anyhow::{Context, Result, bail};

/// Largest address range one argument may expand to: a /16 is already far more source
/// addresses than one box can use.
pub const MAX_RANGE: u64 = 65_536;

/// A connection count: a run of 0 connections has nothing to hold or measure.
pub fn parse_connections(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(0) => Err("at least 1 connection is needed".to_owned()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("not a count: {s:?} (e.g. 100000)")),
    }
}

/// The fastest `--rate` taken: far beyond any box (the pace schedules each connect at
/// `k / rate` s; NaN, infinities and rates near f64's end made it schedule none, and the
/// client hung).
pub const MAX_RATE: f64 = 100_000_000.0;

/// `--rate`: connections per second, 0 (unpaced) up to [`MAX_RATE`].
pub fn parse_rate(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(r) if (0.0..=MAX_RATE).contains(&r) => Ok(r),
        Ok(_) => Err(format!(
            "a rate is 0 (as fast as --in-flight allows) up to {} connections per second",
            crate::fmt::count(MAX_RATE as u64)
        )),
        Err(_) => Err(format!("not a rate: {s:?} (e.g. 25000)")),
    }
}

/// `--metrics-addr`: `HOST:PORT` with an IP host, or `:PORT` for every IPv4 address.
pub fn parse_metrics_addr(s: &str) -> Result<SocketAddr, String> {
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

/// Expands `a,b,c-d` items (IPv4 ranges inclusive) into addresses.
pub fn parse_addrs(items: &[String]) -> Result<Vec<IpAddr>> {
    let mut out = Vec::new();
    for item in items
        .iter()
        .flat_map(|i| i.split(','))
        .map(str::trim)
        .filter(|i| !i.is_empty())
    {
        if let Some((a, b)) = item.split_once('-') {
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
                bail!("address range {item:?} is empty or larger than {MAX_RANGE}");
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
