//! A client remembers the chains it verified for a second, as Chromium's
//! `CachingCertVerifier` does (for up to 30 minutes there): a lab's client meets the same
//! server certificate thousands of times a second, and verifying its chain again costs
//! one ECDSA P-256 verify per handshake (~70 µs with ring here, a third of the client's
//! public-key work). The handshake's own signature (CertificateVerify: the server holds
//! the key of that certificate) is checked every time; only the chain's answer is kept.
//!
//! A chain is taken from memory only when the end-entity certificate, the intermediates
//! and the name asked for are the same bytes, and only for [`FRESH`] after the
//! verification that accepted it: a certificate that expires in between is accepted at
//! most that much past its end. A chain that failed is never remembered.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use rustls::{
    DigitallySignedStruct, SignatureScheme,
    client::{
        WebPkiServerVerifier,
        danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
    },
    pki_types::{CertificateDer, ServerName, UnixTime},
};

/// How long a verified chain is taken on trust again.
pub(crate) const FRESH: Duration = Duration::from_secs(1);

/// Chains remembered at once: a run talks to one server certificate, a `--servers`
/// comparison to one at a time.
const KEPT: usize = 4;

#[derive(Debug)]
struct Verified {
    end_entity: Vec<u8>,
    intermediates: Vec<Vec<u8>>,
    name: String,
    ocsp: Vec<u8>,
    at: Instant,
}

impl Verified {
    fn is(
        &self,
        end_entity: &[u8],
        intermediates: &[CertificateDer<'_>],
        name: &str,
        ocsp: &[u8],
    ) -> bool {
        self.end_entity == end_entity
            && self.name == name
            && self.ocsp == ocsp
            && self.intermediates.len() == intermediates.len()
            && self
                .intermediates
                .iter()
                .zip(intermediates)
                .all(|(a, b)| a.as_slice() == b.as_ref())
    }
}

/// webpki's verifier with the last [`KEPT`] chains it accepted.
#[derive(Debug)]
pub(crate) struct ChainCache {
    webpki: Arc<WebPkiServerVerifier>,
    verified: Mutex<Vec<Verified>>,
}

impl ChainCache {
    pub(crate) fn new(webpki: Arc<WebPkiServerVerifier>) -> Self {
        Self {
            webpki,
            verified: Mutex::new(Vec::with_capacity(KEPT)),
        }
    }

    fn remembered(
        &self,
        end_entity: &[u8],
        intermediates: &[CertificateDer<'_>],
        name: &str,
        ocsp: &[u8],
    ) -> bool {
        let Ok(verified) = self.verified.lock() else {
            return false;
        };
        verified
            .iter()
            .any(|v| v.at.elapsed() < FRESH && v.is(end_entity, intermediates, name, ocsp))
    }

    fn remember(&self, v: Verified) {
        let Ok(mut verified) = self.verified.lock() else {
            return;
        };
        verified.retain(|old| {
            old.at.elapsed() < FRESH
                && (old.end_entity != v.end_entity
                    || old.intermediates != v.intermediates
                    || old.name != v.name
                    || old.ocsp != v.ocsp)
        });
        if verified.len() >= KEPT {
            verified.remove(0);
        }
        verified.push(v);
    }
}

impl ServerCertVerifier for ChainCache {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let name = server_name.to_str();
        if self.remembered(end_entity, intermediates, &name, ocsp) {
            return Ok(ServerCertVerified::assertion());
        }
        let at = Instant::now();
        let ok =
            self.webpki
                .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)?;
        self.remember(Verified {
            end_entity: end_entity.to_vec(),
            intermediates: intermediates.iter().map(|c| c.to_vec()).collect(),
            name: name.into_owned(),
            ocsp: ocsp.to_vec(),
            at,
        });
        Ok(ok)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }

    fn root_hint_subjects(&self) -> Option<&[rustls::DistinguishedName]> {
        self.webpki.root_hint_subjects()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use rustls::RootCertStore;

    use super::*;
    use crate::workload::tls::config::{certs, provider, self_signed};

    fn cache_for(ca_pem: &str) -> ChainCache {
        let mut roots = RootCertStore::empty();
        for c in certs(ca_pem, crate::workload::tls::config::TlsConfigError::NoCa).unwrap() {
            roots.add(c).unwrap();
        }
        ChainCache::new(
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider())
                .build()
                .unwrap(),
        )
    }

    #[test]
    fn a_verified_chain_is_remembered_a_failed_one_never() {
        let (cert, _) = self_signed(&["127.0.0.1".into()]).unwrap();
        let (other, _) = self_signed(&["127.0.0.1".into()]).unwrap();
        let cache = cache_for(&cert);
        let ee = certs(&cert, crate::workload::tls::config::TlsConfigError::NoCa)
            .unwrap()
            .remove(0);
        let stranger = certs(&other, crate::workload::tls::config::TlsConfigError::NoCa)
            .unwrap()
            .remove(0);
        let ip = ServerName::try_from("127.0.0.1").unwrap();
        let dns = ServerName::try_from("example.com").unwrap();
        let now = UnixTime::now();
        for _ in 0..3 {
            assert!(cache.verify_server_cert(&ee, &[], &ip, &[], now).is_ok());
            assert!(
                cache
                    .verify_server_cert(&stranger, &[], &ip, &[], now)
                    .is_err()
            );
            // The same certificate for a name it does not carry: webpki is asked again.
            assert!(cache.verify_server_cert(&ee, &[], &dns, &[], now).is_err());
        }
        assert_eq!(cache.verified.lock().unwrap().len(), 1);
        assert!(cache.remembered(&ee, &[], "127.0.0.1", &[]));
        assert!(!cache.remembered(&ee, std::slice::from_ref(&ee), "127.0.0.1", &[]));
        cache.verified.lock().unwrap()[0].at -= FRESH;
        assert!(!cache.remembered(&ee, &[], "127.0.0.1", &[]));
    }
}
