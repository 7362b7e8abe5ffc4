//! What a run's record says of its TLS: on or off, resumption, the certificate's key.

use rustls::pki_types::{PrivateKeyDer, pem::PemObject};
use serde::{Deserialize, Serialize};

/// The kind of key a server's certificate carries: it decides what each full handshake
/// signs with, so two runs with different keys are different setups.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CertKey {
    /// ECDSA (the lab's self-signed certificate: P-256).
    Ecdsa,
    /// RSA.
    Rsa,
    /// Ed25519.
    Ed25519,
    /// A key rustls reads but names otherwise.
    Other,
}

impl CertKey {
    /// The key in a private key's PEM (None: no key rustls can sign with).
    pub(crate) fn of_pem(key_pem: &str) -> Option<CertKey> {
        let der = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).ok()?;
        let key = super::config::provider()
            .key_provider
            .load_private_key(der)
            .ok()?;
        Some(match key.algorithm() {
            rustls::SignatureAlgorithm::ECDSA => CertKey::Ecdsa,
            rustls::SignatureAlgorithm::RSA => CertKey::Rsa,
            rustls::SignatureAlgorithm::ED25519 => CertKey::Ed25519,
            _ => CertKey::Other,
        })
    }

    /// The key's name as people write it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            CertKey::Ecdsa => "ECDSA",
            CertKey::Rsa => "RSA",
            CertKey::Ed25519 => "Ed25519",
            CertKey::Other => "other",
        }
    }
}

/// A run's TLS as its record keeps it (`config.tls`; absent: plain TCP).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TlsRecord {
    /// Session tickets handed out and used (`--tls-resumption`).
    pub resumption: bool,
    /// The server certificate's key (None: its key file could not be read back).
    pub key: Option<CertKey>,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    #[test]
    fn a_self_signed_key_is_ecdsa_and_no_key_is_none() {
        let (_, key) = super::super::config::self_signed(&["localhost".into()]).unwrap();
        assert_eq!(CertKey::of_pem(&key), Some(CertKey::Ecdsa));
        assert_eq!(CertKey::of_pem("not a key"), None);
    }
}
