//! Certificates made at test time (rcgen): a CA and a server certificate
//! for `localhost` and `127.0.0.1` signed by it, written as PEM files.

#![allow(dead_code)] // each test crate uses a different subset

use std::path::PathBuf;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

/// PEM files in a temporary directory (removed on drop).
pub struct Certs {
    /// Held so the files live as long as the value.
    pub dir: tempfile::TempDir,
    /// The CA certificate clients trust (`tlsCAFile`).
    pub ca: PathBuf,
    /// The server's certificate and key (`--tls-cert`, `--tls-key`).
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Certs {
    /// A fresh CA named `ca_name` and a server certificate it signed.
    pub fn new(ca_name: &str) -> Certs {
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, ca_name);
        let ca_key = KeyPair::generate().unwrap();
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);

        let mut params =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "mongoload sim");
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &issuer).unwrap();

        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: String| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        Certs {
            ca: write("ca.pem", ca_cert.pem()),
            cert: write("server.pem", cert.pem()),
            key: write("server.key", key.serialize_pem()),
            dir,
        }
    }

    /// The files as the simulator takes them.
    pub fn tls_files(&self) -> mongoload::sim::TlsFiles {
        mongoload::sim::TlsFiles {
            cert: self.cert.clone(),
            key: self.key.clone(),
        }
    }
}
