//! TLS 1.3 record protection that keeps a direction's key as its bytes and expands it
//! per record, instead of keeping ring's expanded key for the connection's life.
//!
//! Why: an idle wss session kept two of rustls's ring encrypters, 560 B each (ring's
//! `LessSafeKey` is an enum as big as its largest variant, AES-GCM's round keys and
//! GHASH table, so ChaCha20 costs the same), against 64 B each here (the key, the IV,
//! the algorithm). Measured with the footprint probe (2,000 idle pairs, TLS 1.3): a
//! server session 3,264 → 2,256 B, a client's 3,977 → 2,969 B. The price is a key
//! expansion per record, measured sealing 100-byte records (one core, loaded box):
//! AES-128-GCM 519 → 747 ns, AES-256-GCM 524 → 885 ns, ChaCha20 584 → 661 ns; a
//! 16 KiB record amortizes it.
//!
//! Only the AEAD step is ours (rustls's public `Tls13AeadAlgorithm`); the record layer,
//! sequence numbers, key schedule and key updates stay rustls's, the primitives ring's.
//! TLS 1.2 suites keep ring's own encrypters (c1m's peers negotiate 1.3). Since the
//! handover (`record_layer`) this serves only while rustls holds a session: through
//! the handshake, and for a client that resumes.

use std::sync::LazyLock;

use ring::aead;
use rustls::{
    CipherSuiteCommon, ConnectionTrafficSecrets, ContentType, Error, ProtocolVersion,
    SupportedCipherSuite, Tls13CipherSuite,
    crypto::cipher::{
        AeadKey, InboundOpaqueMessage, InboundPlainMessage, Iv, MessageDecrypter, MessageEncrypter,
        Nonce, OutboundOpaqueMessage, OutboundPlainMessage, PrefixedPayload, Tls13AeadAlgorithm,
        UnsupportedOperationError, make_tls13_aad,
    },
};

/// One of TLS 1.3's three AEADs.
#[derive(Clone, Copy)]
enum Alg {
    Aes128Gcm,
    Aes256Gcm,
    Chacha20Poly1305,
}

impl Alg {
    fn ring(self) -> &'static aead::Algorithm {
        match self {
            Alg::Aes128Gcm => &aead::AES_128_GCM,
            Alg::Aes256Gcm => &aead::AES_256_GCM,
            Alg::Chacha20Poly1305 => &aead::CHACHA20_POLY1305,
        }
    }
}

/// A direction's key, kept small: expanded for each record and dropped after it.
struct Compact {
    alg: Alg,
    key: AeadKey,
    iv: Iv,
}

impl Compact {
    fn expanded(&self, err: Error) -> Result<aead::LessSafeKey, Error> {
        aead::UnboundKey::new(self.alg.ring(), self.key.as_ref())
            .map(aead::LessSafeKey::new)
            .map_err(|_| err)
    }

    /// RFC 8446 §5.3: the IV xor the record's sequence number.
    fn nonce(&self, seq: u64) -> aead::Nonce {
        aead::Nonce::assume_unique_for_key(Nonce::new(&self.iv, seq).0)
    }

    fn tag_len(&self) -> usize {
        self.alg.ring().tag_len()
    }
}

impl MessageEncrypter for Compact {
    fn encrypt(
        &mut self,
        msg: OutboundPlainMessage<'_>,
        seq: u64,
    ) -> Result<OutboundOpaqueMessage, Error> {
        // RFC 8446 §5.2: TLSInnerPlaintext is the content, then its real type; the
        // record says application data, version 1.2, and its header is the AAD.
        let len = self.encrypted_payload_len(msg.payload.len());
        let mut out = PrefixedPayload::with_capacity(len);
        out.extend_from_chunks(&msg.payload);
        out.extend_from_slice(&msg.typ.to_array());
        self.expanded(Error::EncryptError)?
            .seal_in_place_append_tag(
                self.nonce(seq),
                aead::Aad::from(make_tls13_aad(len)),
                &mut out,
            )
            .map_err(|_| Error::EncryptError)?;
        Ok(OutboundOpaqueMessage::new(
            ContentType::ApplicationData,
            ProtocolVersion::TLSv1_2,
            out,
        ))
    }

    fn encrypted_payload_len(&self, payload_len: usize) -> usize {
        payload_len + 1 + self.tag_len()
    }
}

impl MessageDecrypter for Compact {
    fn decrypt<'a>(
        &mut self,
        mut msg: InboundOpaqueMessage<'a>,
        seq: u64,
    ) -> Result<InboundPlainMessage<'a>, Error> {
        let sealed = msg.payload.len();
        if sealed < self.tag_len() {
            return Err(Error::DecryptError);
        }
        let plain = self
            .expanded(Error::DecryptError)?
            .open_in_place(
                self.nonce(seq),
                aead::Aad::from(make_tls13_aad(sealed)),
                &mut msg.payload,
            )
            .map_err(|_| Error::DecryptError)?
            .len();
        msg.payload.truncate(plain);
        // Strips the padding and takes the real content type (an empty one is an error).
        msg.into_tls13_unpadded_message()
    }
}

impl Tls13AeadAlgorithm for Alg {
    fn encrypter(&self, key: AeadKey, iv: Iv) -> Box<dyn MessageEncrypter> {
        Box::new(Compact {
            alg: *self,
            key,
            iv,
        })
    }

    fn decrypter(&self, key: AeadKey, iv: Iv) -> Box<dyn MessageDecrypter> {
        Box::new(Compact {
            alg: *self,
            key,
            iv,
        })
    }

    fn key_len(&self) -> usize {
        self.ring().key_len()
    }

    fn extract_keys(
        &self,
        key: AeadKey,
        iv: Iv,
    ) -> Result<ConnectionTrafficSecrets, UnsupportedOperationError> {
        Ok(match self {
            Alg::Aes128Gcm => ConnectionTrafficSecrets::Aes128Gcm { key, iv },
            Alg::Aes256Gcm => ConnectionTrafficSecrets::Aes256Gcm { key, iv },
            Alg::Chacha20Poly1305 => ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv },
        })
    }
}

static AES_128_GCM: Alg = Alg::Aes128Gcm;
static AES_256_GCM: Alg = Alg::Aes256Gcm;
static CHACHA20_POLY1305: Alg = Alg::Chacha20Poly1305;

/// ring's TLS 1.3 suites (same ids, hashes, HKDF and limits) with our AEAD step.
static SUITES: LazyLock<Vec<Tls13CipherSuite>> = LazyLock::new(|| {
    let ring_suites = rustls::crypto::ring::ALL_CIPHER_SUITES;
    ring_suites
        .iter()
        .filter_map(|s| match s {
            SupportedCipherSuite::Tls13(s) => Some(*s),
            SupportedCipherSuite::Tls12(_) => None,
        })
        .filter_map(|s| {
            let alg: &'static Alg = match s.common.suite {
                rustls::CipherSuite::TLS13_AES_128_GCM_SHA256 => &AES_128_GCM,
                rustls::CipherSuite::TLS13_AES_256_GCM_SHA384 => &AES_256_GCM,
                rustls::CipherSuite::TLS13_CHACHA20_POLY1305_SHA256 => &CHACHA20_POLY1305,
                _ => return None,
            };
            Some(Tls13CipherSuite {
                common: CipherSuiteCommon {
                    suite: s.common.suite,
                    hash_provider: s.common.hash_provider,
                    confidentiality_limit: s.common.confidentiality_limit,
                },
                hkdf_provider: s.hkdf_provider,
                aead_alg: alg,
                // c1m speaks TCP only.
                quic: None,
            })
        })
        .collect()
});

/// Replaces each TLS 1.3 suite of `suites` by its compact twin, in place (the order,
/// and so the preference, stays).
pub(crate) fn compact_tls13(suites: &mut [SupportedCipherSuite]) {
    for s in suites.iter_mut() {
        if let Some(twin) = SUITES.iter().find(|t| t.common.suite == s.suite()) {
            *s = SupportedCipherSuite::Tls13(twin);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    #[test]
    fn every_ring_tls13_suite_has_a_compact_twin() {
        let mut all = rustls::crypto::ring::ALL_CIPHER_SUITES.to_vec();
        let before: Vec<_> = all.iter().map(|s| s.suite()).collect();
        compact_tls13(&mut all);
        assert_eq!(all.iter().map(|s| s.suite()).collect::<Vec<_>>(), before);
        assert_eq!(SUITES.len(), 3);
        for s in &all {
            if let SupportedCipherSuite::Tls13(t) = s {
                assert!(
                    SUITES.iter().any(|c| std::ptr::eq(c, *t)),
                    "{:?}",
                    s.suite()
                );
            }
        }
    }

    /// A record sealed here opens with ring's own TLS 1.3 decrypter and back, for the
    /// AEADs with 32-byte keys (the only length `AeadKey`'s public constructor makes;
    /// AES-128-GCM is carried through whole handshakes below), and a flipped bit does
    /// not open.
    #[test]
    fn records_open_with_rings_own_suites_both_ways() {
        for ours in SUITES.iter().filter(|s| s.aead_alg.key_len() == 32) {
            let theirs = rustls::crypto::ring::ALL_CIPHER_SUITES
                .iter()
                .find_map(|s| match s {
                    SupportedCipherSuite::Tls13(t) if t.common.suite == ours.common.suite => {
                        Some(*t)
                    }
                    _ => None,
                })
                .unwrap();
            for (enc, dec) in [
                (ours.aead_alg, theirs.aead_alg),
                (theirs.aead_alg, ours.aead_alg),
            ] {
                let mut e = enc.encrypter(AeadKey::from([7; 32]), Iv::new([9; 12]));
                let mut d = dec.decrypter(AeadKey::from([7; 32]), Iv::new([9; 12]));
                let payload = b"GET / HTTP/1.1\r\n\r\n";
                let msg = OutboundPlainMessage {
                    typ: ContentType::ApplicationData,
                    version: ProtocolVersion::TLSv1_2,
                    payload: payload[..].into(),
                };
                let sealed = e.encrypt(msg, 41).unwrap().encode();
                let mut good = sealed.clone();
                let m = InboundOpaqueMessage::new(
                    ContentType::ApplicationData,
                    ProtocolVersion::TLSv1_2,
                    &mut good[5..],
                );
                let plain = d.decrypt(m, 41).unwrap();
                assert_eq!(plain.payload, payload, "{:?}", ours.common.suite);
                let mut bad = sealed;
                bad[9] ^= 1;
                let m = InboundOpaqueMessage::new(
                    ContentType::ApplicationData,
                    ProtocolVersion::TLSv1_2,
                    &mut bad[5..],
                );
                assert!(d.decrypt(m, 41).is_err());
            }
        }
    }

    /// c1m's server (compact suites) and a client on ring's own suites agree on every
    /// TLS 1.3 AEAD, through a whole handshake and data each way.
    #[test]
    fn a_compact_server_talks_to_rings_own_client_on_each_aead() {
        use crate::workload::tls::footprint::tests::{client, connect, server};
        for s in rustls::crypto::ring::ALL_CIPHER_SUITES
            .iter()
            .filter(|s| matches!(s, SupportedCipherSuite::Tls13(_)))
        {
            let (sc, cert) = server(false);
            let cc = client(&cert, &[*s], &[&rustls::version::TLS13], false);
            let (ks, kc) = connect(&sc, &cc);
            assert!(ks.is_some() && kc.is_some(), "{:?}", s.suite());
        }
    }
}
