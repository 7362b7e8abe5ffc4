//! The TLS flags, word for word on every command that takes them (`--tls`, `--tls-cert`,
//! `--tls-key`, `--tls-ca`), and what they resolve to.

use std::{
    io::Read,
    net::SocketAddr,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result, bail};
use clap::Args;

use super::{
    config::{ClientTls, MAX_PEM_BYTES, ServerTls, self_signed},
    record::{CertKey, TlsRecord},
};

/// `c1m server`'s TLS.
#[derive(Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerTlsArgs {
    /// Speak TLS on every connection (wss in ws mode). Alone: a self-signed ECDSA P-256
    /// certificate made at start, for the listen addresses and localhost.
    #[arg(long)]
    pub tls: bool,
    /// The certificate chain to present (PEM); with --tls-key. Implies --tls.
    #[arg(value_name = "FILE", long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM: PKCS#8, SEC1 or RSA); with --tls-cert.
    #[arg(value_name = "FILE", long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Hand out session tickets so clients can resume (one per connection).
    #[arg(long)]
    pub tls_resumption: bool,
    /// With --tls alone: write the self-signed certificate here (PEM) for clients to
    /// trust with --tls-ca. The file must not exist yet.
    #[arg(value_name = "FILE", long)]
    pub tls_cert_out: Option<PathBuf>,
}

/// `c1m client`'s TLS.
#[derive(Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientTlsArgs {
    /// Speak TLS on every connection (wss in ws mode); needs --tls-ca (or
    /// --tls-insecure-skip-verify).
    #[arg(long)]
    pub tls: bool,
    /// Trust the CA certificates (or self-signed certificate) in FILE (PEM). Implies --tls.
    #[arg(value_name = "FILE", long)]
    pub tls_ca: Option<PathBuf>,
    /// Accept any server certificate without checking who signed it or its name
    /// (signatures are still checked). For servers whose certificate you do not have.
    #[arg(long)]
    pub tls_insecure_skip_verify: bool,
    /// The name asked for (SNI) and checked in the certificate (default: the first
    /// --addr).
    #[arg(value_name = "NAME", long)]
    pub tls_server_name: Option<String>,
    /// Keep the server's session tickets and resume with them.
    #[arg(long)]
    pub tls_resumption: bool,
}

/// Reads a PEM file (a chain and a key are a few KiB; a cap keeps a wrong path from
/// reading a disk image).
pub(crate) fn read_pem(path: &Path, flag: &str) -> Result<String> {
    let f = std::fs::File::open(path)
        .with_context(|| format!("{flag} {}: cannot open", path.display()))?;
    let mut bytes = Vec::new();
    f.take(MAX_PEM_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("{flag} {}: cannot read", path.display()))?;
    if bytes.len() as u64 > MAX_PEM_BYTES {
        bail!(
            "{flag} {}: over {} bytes, not a PEM certificate or key",
            path.display(),
            MAX_PEM_BYTES
        );
    }
    String::from_utf8(bytes)
        .with_context(|| format!("{flag} {}: not text (PEM expected)", path.display()))
}

/// Writes a new file only (never over another's, never through a link).
pub(crate) fn write_new(path: &Path, text: &str, mode: u32) -> Result<()> {
    use std::{io::Write, os::unix::fs::OpenOptionsExt};
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .with_context(|| format!("{}: cannot create (it must not exist yet)", path.display()))?;
    f.write_all(text.as_bytes())
        .with_context(|| format!("{}: cannot write", path.display()))
}

/// The names a self-signed certificate carries: the listen addresses and localhost.
pub(crate) fn names_for(listen: &[SocketAddr]) -> Vec<String> {
    let mut names: Vec<String> = listen.iter().map(|a| a.ip().to_string()).collect();
    names.push("localhost".into());
    names.sort();
    names.dedup();
    names
}

impl ServerTlsArgs {
    pub(crate) fn wanted(&self) -> bool {
        self.tls || self.tls_cert.is_some()
    }

    /// What the shards get; the configuration is built once here so a bad file fails
    /// before anything listens.
    pub(crate) fn resolve(&self, listen: &[SocketAddr]) -> Result<Option<ServerTls>> {
        if !self.wanted() {
            if self.tls_resumption || self.tls_cert_out.is_some() {
                bail!("--tls-resumption and --tls-cert-out need --tls");
            }
            return Ok(None);
        }
        // One ticket key for every shard and worker, so any of them resumes any ticket.
        let ticket_key = match self.tls_resumption {
            true => Some(super::tickets::new_key()?),
            false => None,
        };
        let t = match (&self.tls_cert, &self.tls_key) {
            (Some(c), Some(k)) => {
                if self.tls_cert_out.is_some() {
                    bail!("--tls-cert-out writes a self-signed certificate: not with --tls-cert");
                }
                ServerTls {
                    cert_pem: read_pem(c, "--tls-cert")?,
                    key_pem: read_pem(k, "--tls-key")?,
                    resumption: self.tls_resumption,
                    ticket_key,
                }
            }
            _ => {
                let (cert_pem, key_pem) = self_signed(&names_for(listen))?;
                if let Some(out) = &self.tls_cert_out {
                    write_new(out, &cert_pem, 0o644)?;
                }
                ServerTls {
                    cert_pem,
                    key_pem,
                    resumption: self.tls_resumption,
                    ticket_key,
                }
            }
        };
        t.config()?;
        Ok(Some(t))
    }
}

impl ClientTlsArgs {
    pub(crate) fn wanted(&self) -> bool {
        self.tls || self.tls_ca.is_some() || self.tls_insecure_skip_verify
    }

    pub(crate) fn resolve(&self, first_addr: &str) -> Result<Option<ClientTls>> {
        if !self.wanted() {
            if self.tls_resumption || self.tls_server_name.is_some() {
                bail!("--tls-resumption and --tls-server-name need --tls");
            }
            return Ok(None);
        }
        let t = ClientTls {
            ca_pem: self
                .tls_ca
                .as_deref()
                .map(|p| read_pem(p, "--tls-ca"))
                .transpose()?,
            insecure_skip_verify: self.tls_insecure_skip_verify,
            server_name: self
                .tls_server_name
                .clone()
                .unwrap_or_else(|| first_addr.to_owned()),
            resumption: self.tls_resumption,
        };
        t.config()?;
        t.name()?;
        Ok(Some(t))
    }
}

/// `c1m run`'s TLS: the lab's own server and client, or a server of yours.
#[derive(Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct RunTlsArgs {
    /// Every connection speaks TLS (wss in ws mode). Alone: the lab makes a self-signed
    /// ECDSA P-256 certificate (tls-cert.pem in the run folder), its server presents it
    /// and its client trusts it. A server of yours (--server-cmd, --servers) gets the
    /// pair's paths as $C1M_TLS_CERT and $C1M_TLS_KEY.
    #[arg(long)]
    pub tls: bool,
    /// The server's certificate chain (PEM) instead of a self-signed one; with
    /// --tls-key. Implies --tls.
    #[arg(value_name = "FILE", long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM); with --tls-cert.
    #[arg(value_name = "FILE", long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// What the client trusts (PEM; default: the server's own certificate). Implies --tls.
    #[arg(value_name = "FILE", long)]
    pub tls_ca: Option<PathBuf>,
    /// The client accepts any certificate (signatures still checked).
    #[arg(long)]
    pub tls_insecure_skip_verify: bool,
    /// Session tickets handed out and used: connections after the first resume.
    #[arg(long)]
    pub tls_resumption: bool,
}

impl RunTlsArgs {
    /// Any TLS flag given.
    pub fn wanted(&self) -> bool {
        self.tls
            || self.tls_cert.is_some()
            || self.tls_ca.is_some()
            || self.tls_insecure_skip_verify
    }

    /// The self-signed pair of a run into `dir` (none when --tls-cert is given).
    fn self_signed_paths(&self, dir: &Path) -> Option<(PathBuf, PathBuf)> {
        (self.wanted() && self.tls_cert.is_none())
            .then(|| (dir.join("tls-cert.pem"), dir.join("tls-key.pem")))
    }

    /// Makes the self-signed pair [`RunTlsArgs::split`] named, once the run folder
    /// exists: certificate 0644, key 0600, neither over an existing file.
    pub(crate) fn write_self_signed(&self, dir: &Path, names: &[String]) -> Result<()> {
        if let Some((c, k)) = self.self_signed_paths(dir) {
            let (cert_pem, key_pem) = self_signed(names)?;
            write_new(&c, &cert_pem, 0o644)?;
            write_new(&k, &key_pem, 0o600)?;
        }
        Ok(())
    }

    /// What the run's record says of its TLS (None: plain TCP), once the server's pair
    /// exists: `server` is what [`RunTlsArgs::split`] handed the server.
    pub(crate) fn record(&self, server: &ServerTlsArgs) -> Option<TlsRecord> {
        self.wanted().then(|| TlsRecord {
            resumption: self.tls_resumption,
            key: server
                .tls_key
                .as_deref()
                .and_then(|k| read_pem(k, "--tls-key").ok())
                .and_then(|pem| CertKey::of_pem(&pem)),
        })
    }

    /// The server's and the client's TLS flags for a run into `dir` (a self-signed
    /// pair there when none is given: [`RunTlsArgs::write_self_signed`] makes it).
    pub(crate) fn split(&self, dir: &Path) -> Result<(ServerTlsArgs, ClientTlsArgs)> {
        if !self.wanted() {
            if self.tls_resumption {
                bail!("--tls-resumption needs --tls");
            }
            return Ok(Default::default());
        }
        let (cert, key) = match (&self.tls_cert, &self.tls_key, self.self_signed_paths(dir)) {
            (Some(c), Some(k), _) => (c.clone(), k.clone()),
            (_, _, Some(pair)) => pair,
            _ => bail!("--tls-cert needs --tls-key"),
        };
        let server = ServerTlsArgs {
            tls: true,
            tls_cert: Some(cert.clone()),
            tls_key: Some(key),
            tls_resumption: self.tls_resumption,
            tls_cert_out: None,
        };
        let client = ClientTlsArgs {
            tls: true,
            tls_ca: if self.tls_insecure_skip_verify {
                self.tls_ca.clone()
            } else {
                Some(self.tls_ca.clone().unwrap_or(cert))
            },
            tls_insecure_skip_verify: self.tls_insecure_skip_verify,
            tls_server_name: None,
            tls_resumption: self.tls_resumption,
        };
        Ok((server, client))
    }
}
