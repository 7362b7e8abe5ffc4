//! TLS 1.3 session tickets that every shard and worker of one `c1m server` opens.
//!
//! Why: rustls's `Ticketer::new()` makes random keys per call, and each shard builds its
//! own `ServerConfig`; a ticket one shard issued was refused by the others, so a client
//! resumed only when SO_REUSEPORT sent it back to the same shard (measured: 23 of 40
//! one-at-a-time connections on the 2 shards of this box, instead of 39). One key is
//! made where the flags are read and travels with the certificate to every shard.
//!
//! The key lives as long as the server and is never written to disk: no rotation, which
//! a load test's minutes do not need (a ticket opened after a restart is refused, and
//! the client does a full handshake).

use ring::{
    aead,
    rand::{SecureRandom, SystemRandom},
};
use rustls::server::ProducesTickets;

/// Bytes of a ticket key (ChaCha20-Poly1305).
pub(crate) const KEY_LEN: usize = 32;
const NONCE_LEN: usize = 12;
/// Binds a ticket to its use, so nothing else sealed with the key opens as one.
const AAD: &[u8] = b"c1m session ticket";
/// What a client is told a ticket is good for (rustls's own ticketer says 6 hours).
const LIFETIME_S: u32 = 6 * 3600;

/// A fresh random ticket key.
pub(crate) fn new_key() -> Result<[u8; KEY_LEN], rustls::Error> {
    let mut k = [0; KEY_LEN];
    SystemRandom::new()
        .fill(&mut k)
        .map_err(|_| rustls::Error::FailedToGetRandomBytes)?;
    Ok(k)
}

/// Seals tickets under one key: a random nonce, then the ticket and its tag.
pub(crate) struct SharedTickets {
    key: aead::LessSafeKey,
    rng: SystemRandom,
}

impl std::fmt::Debug for SharedTickets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedTickets")
    }
}

impl SharedTickets {
    pub(crate) fn new(key: &[u8; KEY_LEN]) -> Result<SharedTickets, rustls::Error> {
        let k = aead::UnboundKey::new(&aead::CHACHA20_POLY1305, key)
            .map_err(|_| rustls::Error::General("ticket key".into()))?;
        Ok(SharedTickets {
            key: aead::LessSafeKey::new(k),
            rng: SystemRandom::new(),
        })
    }
}

impl ProducesTickets for SharedTickets {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        LIFETIME_S
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        let mut nonce = [0; NONCE_LEN];
        self.rng.fill(&mut nonce).ok()?;
        let mut out = Vec::with_capacity(NONCE_LEN + plain.len() + aead::MAX_TAG_LEN);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(plain);
        let tag = self
            .key
            .seal_in_place_separate_tag(
                aead::Nonce::assume_unique_for_key(nonce),
                aead::Aad::from(AAD),
                &mut out[NONCE_LEN..],
            )
            .ok()?;
        out.extend_from_slice(tag.as_ref());
        Some(out)
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        let (nonce, sealed) = cipher.split_at_checked(NONCE_LEN)?;
        let nonce = aead::Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut body = sealed.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, aead::Aad::from(AAD), &mut body)
            .ok()?;
        Some(plain.to_vec())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    #[test]
    fn a_ticket_opens_under_the_same_key_only_and_garbage_opens_nowhere() {
        let key = new_key().unwrap();
        let (a, b) = (
            SharedTickets::new(&key).unwrap(),
            SharedTickets::new(&key).unwrap(),
        );
        let other = SharedTickets::new(&new_key().unwrap()).unwrap();
        let t = a.encrypt(b"session state").unwrap();
        assert_eq!(b.decrypt(&t).as_deref(), Some(&b"session state"[..]));
        assert_eq!(other.decrypt(&t), None);
        let mut flipped = t.clone();
        flipped[NONCE_LEN + 1] ^= 1;
        assert_eq!(b.decrypt(&flipped), None);
        for n in 0..t.len() {
            assert_eq!(b.decrypt(&t[..n]), None, "{n} bytes");
        }
        assert_ne!(a.encrypt(b"x"), a.encrypt(b"x"), "a fresh nonce each time");
    }
}
