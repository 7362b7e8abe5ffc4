//! Why a TLS handshake failed, as the counted cause ([`TlsErrors`]): what rustls found
//! wrong here, or the alert the peer sent.

use rustls::{AlertDescription, CertificateError, Error};

use super::record_layer::RecordError;
use crate::workload::stats::counters::TlsErrors;

/// A TLS session that cannot go on.
#[derive(Debug)]
pub(crate) enum TlsFailure {
    Rustls(Error),
    /// Our side of the record layer could not write (a bug, not the peer's doing).
    Local(String),
    /// c1m's own record layer, after the handover, refused a record or could not seal.
    Record(RecordError),
}

impl From<Error> for TlsFailure {
    fn from(e: Error) -> TlsFailure {
        TlsFailure::Rustls(e)
    }
}

impl std::fmt::Display for TlsFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TlsFailure::Rustls(e) => write!(f, "{e}"),
            TlsFailure::Local(s) => f.write_str(s),
            TlsFailure::Record(e) => write!(f, "{e}"),
        }
    }
}

impl TlsFailure {
    /// Counts this failure under its cause.
    pub(crate) fn count(&self, c: &mut TlsErrors) {
        let e = match self {
            TlsFailure::Local(_) => {
                c.other += 1;
                return;
            }
            TlsFailure::Rustls(e) => e,
            TlsFailure::Record(e) => {
                match e {
                    RecordError::Alert(a) => TlsFailure::Rustls(Error::AlertReceived(*a)).count(c),
                    RecordError::Limit(_) | RecordError::Unsupported(_) | RecordError::Seal => {
                        c.other += 1
                    }
                    RecordError::Decrypt
                    | RecordError::Oversized(_)
                    | RecordError::UnexpectedContent(_)
                    | RecordError::UnexpectedHandshake(_)
                    | RecordError::KeyUpdate
                    | RecordError::Malformed(_) => c.protocol += 1,
                }
                return;
            }
        };
        match e {
            Error::InvalidMessage(_) | Error::InappropriateMessage { .. } => c.not_tls += 1,
            Error::InvalidCertificate(ce) => match ce {
                // A self-signed certificate with a trusted one's name but another key
                // fails its signature: untrusted all the same.
                CertificateError::UnknownIssuer | CertificateError::BadSignature => {
                    c.untrusted_certificate += 1
                }
                CertificateError::Expired
                | CertificateError::ExpiredContext { .. }
                | CertificateError::NotValidYet
                | CertificateError::NotValidYetContext { .. } => c.expired_certificate += 1,
                CertificateError::NotValidForName
                | CertificateError::NotValidForNameContext { .. } => c.wrong_name += 1,
                _ => c.bad_certificate += 1,
            },
            Error::NoCertificatesPresented => c.bad_certificate += 1,
            Error::AlertReceived(a) => match a {
                AlertDescription::UnknownCA
                | AlertDescription::BadCertificate
                | AlertDescription::CertificateExpired
                | AlertDescription::CertificateUnknown
                | AlertDescription::UnsupportedCertificate
                | AlertDescription::CertificateRevoked => c.peer_rejected_certificate += 1,
                AlertDescription::HandshakeFailure
                | AlertDescription::ProtocolVersion
                | AlertDescription::InsufficientSecurity => c.incompatible += 1,
                _ => c.peer_alert += 1,
            },
            Error::PeerIncompatible(_) => c.incompatible += 1,
            Error::DecryptError
            | Error::PeerMisbehaved(_)
            | Error::PeerSentOversizedRecord
            | Error::InappropriateHandshakeMessage { .. } => c.protocol += 1,
            _ => c.other += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_lands_on_its_cause() {
        let mut c = TlsErrors::default();
        for e in [
            Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType),
            Error::InvalidCertificate(CertificateError::UnknownIssuer),
            Error::InvalidCertificate(CertificateError::Expired),
            Error::InvalidCertificate(CertificateError::NotValidForName),
            Error::AlertReceived(AlertDescription::UnknownCA),
            Error::AlertReceived(AlertDescription::DecodeError),
            Error::DecryptError,
        ] {
            TlsFailure::from(e).count(&mut c);
        }
        TlsFailure::Local("x".into()).count(&mut c);
        assert_eq!(
            (
                c.not_tls,
                c.untrusted_certificate,
                c.expired_certificate,
                c.wrong_name
            ),
            (1, 1, 1, 1)
        );
        assert_eq!(
            (
                c.peer_rejected_certificate,
                c.peer_alert,
                c.protocol,
                c.other
            ),
            (1, 1, 1, 1)
        );
        assert_eq!(c.total(), 8);
    }
}
