//! TLS for the embedded server: a CA (new, or the one kept in the data directory, see
//! `identity`), a serving certificate for 127.0.0.1/localhost signed by it at every
//! start, and an axum listener that completes handshakes off the accept loop. kubectl
//! only sends bearer tokens over TLS, so the server always speaks HTTPS; the kubeconfig
//! carries the CA.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName, UnixTime};

/// A CA as PEM: its private key and its self-signed certificate.
pub(crate) struct CaPem {
    pub key: String,
    pub cert: String,
}

/// The serving identity of one server start.
pub(crate) struct ServerTls {
    /// PEM of the CA that signed the serving certificate (for kubeconfigs).
    pub ca_pem: String,
    pub acceptor: TlsAcceptor,
}

fn rc(e: rcgen::Error) -> String {
    e.to_string()
}

/// The CA's parameters; a serving certificate names the CA by them, so a CA kept on disk
/// is re-created as an issuer from these and its key.
fn ca_params() -> Result<CertificateParams, String> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(rc)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "granary-embedded-ca");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(ca_params)
}

/// A new CA.
pub(crate) fn new_ca() -> Result<CaPem, String> {
    let key = KeyPair::generate().map_err(rc)?;
    let key_pem = key.serialize_pem();
    let ca = CertifiedIssuer::self_signed(ca_params()?, key).map_err(rc)?;
    Ok(CaPem {
        key: key_pem,
        cert: ca.pem(),
    })
}

/// A serving certificate signed by `ca`, checked to verify against `ca`'s certificate
/// as a client would (so a CA key and certificate that do not belong together are
/// refused here rather than by every client).
pub(crate) fn serving(ca: &CaPem, now: DateTime<Utc>) -> Result<ServerTls, String> {
    // The parser's error could quote the key; say only that it is unusable.
    let ca_key = KeyPair::from_pem(&ca.key)
        .map_err(|_| "the CA key is not a PEM private key".to_string())?;
    let ca_der = CertificateDer::from_pem_slice(ca.cert.as_bytes())
        .map_err(|e| format!("CA certificate: {e}"))?;
    let issuer = Issuer::new(ca_params()?, ca_key);
    let mut leaf_params =
        CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
            .map_err(rc)?;
    leaf_params
        .distinguished_name
        .push(DnType::CommonName, "granary-embedded");
    leaf_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    // What a strict X.509 verifier (OpenSSL's X509_STRICT, Python ≥ 3.13's default)
    // wants of a leaf besides: the issuer's key identifier, its own (which rcgen writes
    // with an explicit `CA:FALSE`) and its key usages.
    leaf_params.use_authority_key_identifier_extension = true;
    leaf_params.is_ca = IsCa::ExplicitNoCa;
    leaf_params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    let leaf_key = KeyPair::generate().map_err(rc)?;
    let leaf = leaf_params.signed_by(&leaf_key, &issuer).map_err(rc)?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let now = UnixTime::since_unix_epoch(Duration::from_secs(
        u64::try_from(now.timestamp()).unwrap_or(0),
    ));
    verify(&ca_der, leaf.der(), provider.clone(), now)?;
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(vec![leaf.der().clone(), ca_der], key)
        .map_err(|e| e.to_string())?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(ServerTls {
        ca_pem: ca.cert.clone(),
        acceptor: TlsAcceptor::from(Arc::new(config)),
    })
}

/// Verifies `leaf` for 127.0.0.1 with `ca` as the only trust anchor.
fn verify(
    ca: &CertificateDer<'static>,
    leaf: &CertificateDer<'static>,
    provider: Arc<rustls::crypto::CryptoProvider>,
    now: UnixTime,
) -> Result<(), String> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(ca.clone())
        .map_err(|e| format!("CA certificate: {e}"))?;
    let verifier =
        rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| e.to_string())?;
    let name = ServerName::try_from("127.0.0.1").map_err(|e| e.to_string())?;
    rustls::client::danger::ServerCertVerifier::verify_server_cert(
        verifier.as_ref(),
        leaf,
        &[],
        &name,
        &[],
        now,
    )
    .map(|_| ())
    .map_err(|e| format!("the CA does not verify the serving certificate: {e}"))
}

pub(crate) use granary_runtime::tls_listener::TlsListener;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_ca_signs_serving_certificates_and_a_foreign_key_is_refused() {
        let ca = new_ca().unwrap();
        let tls = serving(&ca, Utc::now()).unwrap();
        assert_eq!(tls.ca_pem, ca.cert);
        let other = new_ca().unwrap();
        let mixed = CaPem {
            key: other.key,
            cert: ca.cert.clone(),
        };
        let err = serving(&mixed, Utc::now())
            .err()
            .expect("a key of another CA is refused");
        assert!(err.contains("does not verify"), "{err}");
        let garbage = CaPem {
            key: "not a key".into(),
            cert: ca.cert,
        };
        assert!(serving(&garbage, Utc::now()).is_err());
    }
}
