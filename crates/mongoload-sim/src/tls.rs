//! TLS for the simulator (`mongoload sim --tls-cert FILE --tls-key FILE`):
//! a rustls server configuration from PEM files, and the handshake of an
//! accepted connection, bounded in time so a silent peer cannot hold a task.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// How long a client gets to complete the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The certificate chain and private key files (PEM).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Why the TLS configuration cannot be built; names the file.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {reason}", path.display())]
    Pem { path: PathBuf, reason: String },
    #[error("{} and {}: {reason}", cert.display(), key.display())]
    Config {
        cert: PathBuf,
        key: PathBuf,
        reason: String,
    },
}

impl From<TlsError> for std::io::Error {
    fn from(e: TlsError) -> Self {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string())
    }
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// Builds the acceptor: TLS 1.2 and 1.3 with the ring provider, no client
/// certificates.
pub fn acceptor(files: &TlsFiles) -> Result<TlsAcceptor, TlsError> {
    let pem_error = |path: &Path, reason: String| TlsError::Pem {
        path: path.to_path_buf(),
        reason,
    };
    let cert_pem = read(&files.cert)?;
    let certs = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(&files.cert, format!("not a PEM certificate chain: {e}")))?;
    if certs.is_empty() {
        return Err(pem_error(&files.cert, "no CERTIFICATE in the file".into()));
    }
    let key = PrivateKeyDer::from_pem_slice(&read(&files.key)?)
        .map_err(|e| pem_error(&files.key, format!("no usable PEM private key: {e}")))?;
    let config_error = |reason: String| TlsError::Config {
        cert: files.cert.clone(),
        key: files.key.clone(),
        reason,
    };
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| config_error(e.to_string()))?
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .map_err(|e| config_error(e.to_string()))?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Runs the server side of the TLS handshake on an accepted connection.
pub async fn accept(
    acceptor: &TlsAcceptor,
    stream: TcpStream,
) -> std::io::Result<TlsStream<TcpStream>> {
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(r) => r,
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "TLS handshake timed out",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("cert.pem");
        let key = dir.path().join("key.pem");
        let files = TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
        };
        let e = acceptor(&files).err().unwrap().to_string();
        assert!(e.contains("cert.pem") && e.contains("cannot read"), "{e}");
        std::fs::write(&cert, "not pem").unwrap();
        let e = acceptor(&files).err().unwrap().to_string();
        assert!(
            e.contains("cert.pem") && e.contains("no CERTIFICATE"),
            "{e}"
        );
    }
}
