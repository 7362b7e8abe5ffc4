//! What a shard needs to speak TLS, as it travels to a worker (PEM text in the shard's
//! JSON line, so a worker reads no file of its own), and the rustls configurations built
//! from it once per shard.

use std::sync::Arc;

use rustls::{
    ClientConfig, RootCertStore, ServerConfig, SignatureScheme,
    client::{
        Resumption, VerifierBuilderError, WebPkiServerVerifier,
        danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
    },
    crypto::{CryptoProvider, ring},
    pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime, pem::PemObject},
    server::NoServerSessionStorage,
};
use serde::{Deserialize, Serialize};

use super::{chain_cache::ChainCache, ticket_pool::TicketPool};

/// A PEM file c1m reads is at most this big: a chain of a few certificates and a key.
pub(crate) const MAX_PEM_BYTES: u64 = 1 << 20;

/// The server side: its certificate chain and key (PEM), and whether it hands out
/// session tickets.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct ServerTls {
    pub(crate) cert_pem: String,
    pub(crate) key_pem: String,
    /// Send one TLS 1.3 ticket per connection (stateless tickets: no memory per
    /// session on the server) and resume TLS 1.2 sessions from them.
    pub(crate) resumption: bool,
    /// The key every shard and worker seals and opens tickets with (`tickets`), made
    /// where the flags are read. None: a key of this configuration's own.
    #[serde(default)]
    pub(crate) ticket_key: Option<[u8; super::tickets::KEY_LEN]>,
}

/// The client side: what it trusts, the name it asks for, whether it resumes.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct ClientTls {
    /// The CAs (or self-signed certificates) trusted, PEM. None: only with
    /// `insecure_skip_verify`.
    pub(crate) ca_pem: Option<String>,
    /// `--tls-insecure-skip-verify`: accept any certificate (signatures are still
    /// checked, so the handshake costs what a verified one does, minus the chain).
    pub(crate) insecure_skip_verify: bool,
    /// SNI and the name the certificate must carry (an IP address or a DNS name).
    pub(crate) server_name: String,
    /// Keep the server's tickets and resume with them (one per connection).
    pub(crate) resumption: bool,
}

/// A configuration that cannot be built, in words that name the flag to fix.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TlsConfigError {
    #[error("--tls-cert: no PEM certificate in it ({0})")]
    NoCert(String),
    #[error("--tls-key: no PEM private key in it (PKCS#8, SEC1 or RSA) ({0})")]
    NoKey(String),
    #[error("--tls-cert/--tls-key do not go together: {0}")]
    Pair(rustls::Error),
    #[error("--tls-ca: no PEM certificate in it ({0})")]
    NoCa(String),
    #[error("--tls-ca: {0}")]
    Ca(rustls::Error),
    #[error("the TLS server name {0:?} is neither an IP address nor a DNS name")]
    Name(String),
    #[error(
        "a client with --tls trusts nothing: give --tls-ca FILE (or --tls-insecure-skip-verify)"
    )]
    NoTrust,
    #[error("--tls-ca: {0}")]
    Verifier(#[from] VerifierBuilderError),
    #[error("TLS setup: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("making a self-signed certificate: {0}")]
    SelfSigned(#[from] rcgen::Error),
}

/// ring's primitives (X25519 first, then P-256 and P-384; AES-GCM and ChaCha20), with
/// TLS 1.3's record keys kept compact (`compact_aead`: 976 B less per idle session) and
/// the SHA-256 suites first.
pub(crate) fn provider() -> Arc<CryptoProvider> {
    let mut p = ring::default_provider();
    prefer_sha256(&mut p.cipher_suites);
    super::compact_aead::compact_tls13(&mut p.cipher_suites);
    Arc::new(p)
}

/// ring lists AES-256-GCM-SHA384 first (as OpenSSL does); Go and BoringSSL put
/// AES-128-GCM-SHA256 first, and so does c1m: a handshake's transcript and key schedule
/// hash with SHA-384 there, which runs in software (no CPU has SHA-512 instructions
/// here; SHA-256 has SHA-NI): 19% of the server's and 11% of the client's CPU per full
/// handshake (perf, 6,000 handshakes, 2026-12-03). A stable sort: otherwise ring's order.
fn prefer_sha256(suites: &mut [rustls::SupportedCipherSuite]) {
    use rustls::CipherSuite as S;
    suites.sort_by_key(|s| match s.suite() {
        S::TLS13_AES_128_GCM_SHA256
        | S::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
        | S::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 => 0,
        S::TLS13_CHACHA20_POLY1305_SHA256
        | S::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
        | S::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256 => 1,
        _ => 2,
    });
}

pub(crate) fn certs(
    pem: &str,
    what: fn(String) -> TlsConfigError,
) -> Result<Vec<CertificateDer<'static>>, TlsConfigError> {
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| what(e.to_string()))?;
    if certs.is_empty() {
        return Err(what("none found".into()));
    }
    Ok(certs)
}

impl ServerTls {
    /// Checks the pair now, so a bad file fails before any worker starts.
    pub(crate) fn config(&self) -> Result<Arc<ServerConfig>, TlsConfigError> {
        let chain = certs(&self.cert_pem, TlsConfigError::NoCert)?;
        let key = PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes())
            .map_err(|e| TlsConfigError::NoKey(e.to_string()))?;
        let mut c = ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(rustls::ALL_VERSIONS)?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(TlsConfigError::Pair)?;
        if self.resumption {
            let key = match self.ticket_key {
                Some(k) => k,
                None => super::tickets::new_key()?,
            };
            c.ticketer = Arc::new(super::tickets::SharedTickets::new(&key)?);
            c.send_tls13_tickets = 1;
        } else {
            // rustls's defaults would cache 256 sessions and send 2 tickets per
            // connection: bytes and CPU a run without resumption must not pay.
            c.session_storage = Arc::new(NoServerSessionStorage {});
            c.send_tls13_tickets = 0;
        }
        // rustls hands each session over to `record_layer` after its handshake.
        c.enable_secret_extraction = true;
        Ok(Arc::new(c))
    }
}

impl ClientTls {
    pub(crate) fn config(&self) -> Result<Arc<ClientConfig>, TlsConfigError> {
        let builder = ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(rustls::ALL_VERSIONS)?;
        let mut c = match (&self.ca_pem, self.insecure_skip_verify) {
            (_, true) => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider())))
                .with_no_client_auth(),
            (Some(pem), false) => {
                let mut roots = RootCertStore::empty();
                for cert in certs(pem, TlsConfigError::NoCa)? {
                    roots.add(cert).map_err(TlsConfigError::Ca)?;
                }
                let webpki =
                    WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider())
                        .build()?;
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(ChainCache::new(webpki)))
                    .with_no_client_auth()
            }
            (None, false) => return Err(TlsConfigError::NoTrust),
        };
        c.resumption = if self.resumption {
            // One ticket per connection, each used once: a ramp resumes from the
            // tickets the connections before it got (as many as it keeps in flight).
            Resumption::store(Arc::new(TicketPool::default()))
        } else {
            Resumption::disabled()
        };
        // Without resumption rustls hands each session over to `record_layer` after its
        // handshake; with it rustls stays, to read the tickets whenever they come (a
        // TLS 1.3 server sends them after the handshake, a foreign one any time).
        c.enable_secret_extraction = !self.resumption;
        Ok(Arc::new(c))
    }

    pub(crate) fn name(&self) -> Result<ServerName<'static>, TlsConfigError> {
        ServerName::try_from(self.server_name.clone())
            .map_err(|_| TlsConfigError::Name(self.server_name.clone()))
    }
}

/// A certificate made at start for `names` (ECDSA P-256): (certificate PEM, private
/// key PEM). Its subject is its own ("c1m self-signed" and the instant it was made): two
/// runs' certificates never share a name, so a client that trusts one and meets the
/// other says unknown issuer (alert unknown_ca), not a bad signature (decrypt_error).
pub(crate) fn self_signed(names: &[String]) -> Result<(String, String), TlsConfigError> {
    let key = rcgen::KeyPair::generate()?;
    let mut params = rcgen::CertificateParams::new(names.to_vec())?;
    let made = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    params.distinguished_name.push(
        rcgen::DnType::CommonName,
        format!(
            "c1m self-signed {}.{:09}",
            made.as_secs(),
            made.subsec_nanos()
        ),
    );
    let cert = params.self_signed(&key)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// `--tls-insecure-skip-verify`: any chain for any name is accepted; the handshake's
/// signatures are still verified, so its CPU is a verified handshake's minus the chain.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    #[test]
    fn a_self_signed_pair_builds_both_sides_and_bad_pem_names_the_flag() {
        let (cert, key) = self_signed(&["127.0.0.1".into(), "localhost".into()]).unwrap();
        let s = ServerTls {
            cert_pem: cert.clone(),
            key_pem: key,
            resumption: false,
            ticket_key: None,
        };
        s.config().unwrap();
        let c = ClientTls {
            ca_pem: Some(cert.clone()),
            insecure_skip_verify: false,
            server_name: "127.0.0.1".into(),
            resumption: true,
        };
        c.config().unwrap();
        c.name().unwrap();
        let bad = ServerTls {
            cert_pem: "nonsense".into(),
            key_pem: "x".into(),
            resumption: false,
            ticket_key: None,
        };
        assert!(
            bad.config()
                .unwrap_err()
                .to_string()
                .starts_with("--tls-cert: no PEM certificate")
        );
        let nokey = ServerTls {
            cert_pem: cert,
            key_pem: "x".into(),
            resumption: false,
            ticket_key: None,
        };
        assert!(
            nokey
                .config()
                .unwrap_err()
                .to_string()
                .starts_with("--tls-key:")
        );
        let untrusting = ClientTls {
            ca_pem: None,
            ..c.clone()
        };
        assert!(
            untrusting
                .config()
                .unwrap_err()
                .to_string()
                .contains("--tls-ca FILE")
        );
        let badname = ClientTls {
            server_name: "not a name!".into(),
            ..c
        };
        assert!(badname.name().is_err());
    }
}
