//! `[http] web_config`: TLS and basic authentication for the HTTP
//! endpoints, from a file in the Prometheus exporter-toolkit's web
//! configuration format, the one node_exporter's `--web.config.file` and
//! mongodb_exporter read (docs/metrics.md, "TLS and a password"):
//!
//! ```yaml
//! tls_server_config:
//!   cert_file: server.crt          # relative paths: from the file's directory
//!   key_file: server.key
//!   client_auth_type: RequireAndVerifyClientCert
//!   client_ca_file: clients-ca.crt
//!   min_version: TLS12
//! basic_auth_users:
//!   prometheus: $2y$10$…           # bcrypt (htpasswd -nBC 10 "" | tr -d ':\n')
//! ```
//!
//! [`WebConfig::load`] reads and checks a file (check-config, the start,
//! each reload); [`WebConfig::authorize`] judges a request's
//! `Authorization` header. A key the toolkit has and mongoload does not
//! (`http_server_config`, `cipher_suites`, …) is an error naming it, never
//! ignored: a setting meant to secure the endpoint must not be dropped.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use base64::Engine as _;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::Deserialize;
use sha2::{Digest, Sha256};

/// The file as written.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct WebConfigFile {
    tls_server_config: Option<TlsServerFile>,
    #[serde(default)]
    basic_auth_users: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsServerFile {
    cert_file: PathBuf,
    key_file: PathBuf,
    #[serde(default)]
    client_auth_type: ClientAuth,
    client_ca_file: Option<PathBuf>,
    min_version: Option<TlsVersion>,
}

/// `client_auth_type`: the exporter-toolkit's names (Go's
/// `tls.ClientAuthType`). mongoload verifies client certificates against
/// `client_ca_file` or asks for none; the two that accept a certificate
/// without verifying it are refused by name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub(crate) enum ClientAuth {
    #[default]
    NoClientCert,
    RequestClientCert,
    RequireAnyClientCert,
    VerifyClientCertIfGiven,
    RequireAndVerifyClientCert,
}

/// `min_version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub(crate) enum TlsVersion {
    TLS12,
    TLS13,
}

/// Why a web configuration file cannot be used: the file, the key and the
/// reason, as every config error says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {key}: {reason}", file.display())]
pub struct WebConfigError {
    pub file: PathBuf,
    pub key: String,
    pub reason: String,
}

/// A loaded web configuration: the TLS server configuration (none: plain
/// HTTP) and the users of basic authentication (none: no password asked).
#[derive(Clone)]
pub struct WebConfig {
    pub file: PathBuf,
    pub tls: Option<Arc<rustls::ServerConfig>>,
    users: Arc<BTreeMap<String, String>>,
    /// Digests of the credentials that passed, so that bcrypt (about 50 ms
    /// of CPU at cost 10) runs once per user and password, not per scrape.
    passed: Arc<Mutex<HashSet<[u8; 32]>>>,
}

impl std::fmt::Debug for WebConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebConfig")
            .field("file", &self.file)
            .field("tls", &self.tls.is_some())
            .field("users", &self.users.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// The answer to a request's credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// No users configured, or a user and its password.
    Allowed,
    /// No `Authorization: Basic` header (or one that does not decode).
    Missing,
    /// An unknown user or a wrong password.
    Wrong,
}

/// A bcrypt hash of no password anyone has: an unknown user is checked
/// against it, so it takes as long as a known one.
const DUMMY_HASH: &str = "$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DSjXwJnM8kgz8EP/0KeWK";

impl WebConfig {
    /// Reads `file` and everything it names (certificates, key, client
    /// CAs), and checks the users' hashes.
    pub fn load(file: &Path) -> Result<WebConfig, WebConfigError> {
        let err = |key: &str, reason: String| WebConfigError {
            file: file.to_path_buf(),
            key: key.to_owned(),
            reason,
        };
        let text = std::fs::read_to_string(file)
            .map_err(|e| err("web_config", format!("cannot read the file: {e}")))?;
        let built = config::Config::builder()
            .add_source(config::File::from_str(&text, config::FileFormat::Yaml))
            .build()
            .map_err(|e| err("(file)", format!("not valid YAML: {e}")))?;
        let parsed: WebConfigFile = serde_path_to_error::deserialize(built).map_err(|e| {
            let key = match e.path().to_string() {
                k if k == "." => "(file)".to_owned(),
                k => k,
            };
            err(&key, reason(e.inner()))
        })?;
        let dir = file.parent().unwrap_or(Path::new("."));
        let tls = match &parsed.tls_server_config {
            None => None,
            Some(t) => Some(Arc::new(tls_config(t, dir).map_err(|(k, r)| err(k, r))?)),
        };
        for (user, hash) in &parsed.basic_auth_users {
            hash.parse::<bcrypt::HashParts>().map_err(|e| {
                err(
                    &format!("basic_auth_users.{user}"),
                    format!("not a bcrypt hash ({e}); make one with `htpasswd -nBC 10 \"\" | tr -d ':\\n'`"),
                )
            })?;
        }
        Ok(WebConfig {
            file: file.to_path_buf(),
            tls,
            users: Arc::new(parsed.basic_auth_users),
            passed: Arc::default(),
        })
    }

    /// Whether a password is asked for.
    pub fn asks_password(&self) -> bool {
        !self.users.is_empty()
    }

    /// Judges a request's `Authorization` header value (`None`: absent):
    /// [`WebConfig::judge_fast`], else bcrypt.
    pub fn authorize(&self, header: Option<&[u8]>) -> Verdict {
        self.judge_fast(header)
            .unwrap_or_else(|| self.verify(header))
    }

    /// The verdict where it costs nothing: no users, no credentials, or a
    /// user and password that passed before. `None`: bcrypt must decide
    /// (tens of milliseconds of CPU; the server throttles those).
    pub fn judge_fast(&self, header: Option<&[u8]>) -> Option<Verdict> {
        if self.users.is_empty() {
            return Some(Verdict::Allowed);
        }
        let Some((user, password)) = header.and_then(basic_credentials) else {
            return Some(Verdict::Missing);
        };
        let passed = self.passed.lock().unwrap_or_else(PoisonError::into_inner);
        let hash = self.users.get(&user)?;
        passed
            .contains(&digest(&user, hash, &password))
            .then_some(Verdict::Allowed)
    }

    /// bcrypt's verdict on the header (an unknown user is checked against
    /// a hash of nothing, so it takes as long); what
    /// [`WebConfig::judge_fast`] could not decide.
    pub fn verify(&self, header: Option<&[u8]>) -> Verdict {
        let Some((user, password)) = header.and_then(basic_credentials) else {
            return Verdict::Missing;
        };
        let hash = self.users.get(&user);
        let ok =
            bcrypt::verify(&password, hash.map_or(DUMMY_HASH, String::as_str)).unwrap_or(false);
        match hash {
            Some(hash) if ok => {
                let mut passed = self.passed.lock().unwrap_or_else(PoisonError::into_inner);
                // Bounded; a reload starts afresh anyway.
                if passed.len() < 1024 {
                    passed.insert(digest(&user, hash, &password));
                }
                Verdict::Allowed
            }
            _ => Verdict::Wrong,
        }
    }
}

/// What the cache of passed credentials keeps: a digest, not the password.
fn digest(user: &str, hash: &str, password: &str) -> [u8; 32] {
    Sha256::new()
        .chain_update(user.as_bytes())
        .chain_update([0])
        .chain_update(hash.as_bytes())
        .chain_update([0])
        .chain_update(password.as_bytes())
        .finalize()
        .into()
}

/// The user and password of an `Authorization: Basic …` value.
fn basic_credentials(header: &[u8]) -> Option<(String, String)> {
    let text = std::str::from_utf8(header).ok()?;
    let (scheme, encoded) = text.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (user, password) = decoded.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

/// A deserialization error in words, with what mongoload reads where a
/// key is unknown (the toolkit has more than mongoload supports).
fn reason(e: &config::ConfigError) -> String {
    let text = e.to_string();
    if text.contains("unknown field") {
        format!("{text}: mongoload reads tls_server_config (cert_file, key_file, client_auth_type, client_ca_file, min_version) and basic_auth_users")
    } else {
        text
    }
}

/// The rustls server configuration of `t`, its paths relative to `dir`;
/// errors name the key.
fn tls_config(
    t: &TlsServerFile,
    dir: &Path,
) -> Result<rustls::ServerConfig, (&'static str, String)> {
    let path = |p: &Path| dir.join(p);
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path(&t.cert_file))
        .and_then(|i| i.collect::<Result<_, _>>())
        .map_err(|e| {
            (
                "tls_server_config.cert_file",
                format!("{}: {e}", t.cert_file.display()),
            )
        })?;
    if certs.is_empty() {
        return Err((
            "tls_server_config.cert_file",
            format!("{}: no certificate in it", t.cert_file.display()),
        ));
    }
    let key = PrivateKeyDer::from_pem_file(path(&t.key_file)).map_err(|e| {
        (
            "tls_server_config.key_file",
            format!("{}: {e}", t.key_file.display()),
        )
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions: &[&rustls::SupportedProtocolVersion] = match t.min_version {
        Some(TlsVersion::TLS13) => &[&rustls::version::TLS13],
        _ => rustls::DEFAULT_VERSIONS,
    };
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .map_err(|e| ("tls_server_config.min_version", e.to_string()))?;
    let verify = match t.client_auth_type {
        ClientAuth::NoClientCert => None,
        ClientAuth::VerifyClientCertIfGiven => Some(false),
        ClientAuth::RequireAndVerifyClientCert => Some(true),
        other => {
            return Err((
                "tls_server_config.client_auth_type",
                format!("{other:?} accepts a client certificate without verifying it; mongoload supports NoClientCert, VerifyClientCertIfGiven and RequireAndVerifyClientCert"),
            ))
        }
    };
    let builder = match verify {
        None => {
            if t.client_ca_file.is_some() {
                return Err((
                    "tls_server_config.client_ca_file",
                    "set, but client_auth_type is NoClientCert: it would not be used".to_owned(),
                ));
            }
            builder.with_no_client_auth()
        }
        Some(required) => {
            let Some(ca) = &t.client_ca_file else {
                return Err((
                    "tls_server_config.client_ca_file",
                    format!("needed by client_auth_type {:?}", t.client_auth_type),
                ));
            };
            let mut roots = rustls::RootCertStore::empty();
            let cas = CertificateDer::pem_file_iter(path(ca))
                .and_then(|i| i.collect::<Result<Vec<_>, _>>())
                .map_err(|e| {
                    (
                        "tls_server_config.client_ca_file",
                        format!("{}: {e}", ca.display()),
                    )
                })?;
            let (added, _) = roots.add_parsable_certificates(cas);
            if added == 0 {
                return Err((
                    "tls_server_config.client_ca_file",
                    format!("{}: no CA certificate in it", ca.display()),
                ));
            }
            let mut verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            );
            if !required {
                verifier = verifier.allow_unauthenticated();
            }
            let verifier = verifier
                .build()
                .map_err(|e| ("tls_server_config.client_ca_file", e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_single_cert(certs, key).map_err(|e| {
        (
            "tls_server_config.key_file",
            format!("does not go with cert_file: {e}"),
        )
    })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    /// A self-signed certificate and its key, in PEM, in `dir`.
    fn cert(dir: &Path) {
        let c = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        write(dir, "server.crt", &c.cert.pem());
        write(dir, "server.key", &c.signing_key.serialize_pem());
    }

    #[test]
    fn a_file_with_tls_and_users_loads_and_judges_passwords() {
        let dir = tempfile::tempdir().unwrap();
        cert(dir.path());
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        let file = write(
            dir.path(),
            "web.yml",
            &format!(
                "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\nbasic_auth_users:\n  Prom: '{hash}'\n"
            ),
        );
        let w = WebConfig::load(&file).unwrap();
        assert!(w.tls.is_some() && w.asks_password());
        let basic = |s: &str| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(s)
            )
        };
        assert_eq!(w.authorize(None), Verdict::Missing);
        assert_eq!(w.authorize(Some(b"Bearer x")), Verdict::Missing);
        assert_eq!(
            w.authorize(Some(basic("Prom:s3cret").as_bytes())),
            Verdict::Allowed
        );
        // Again, from the cache.
        assert_eq!(
            w.authorize(Some(basic("Prom:s3cret").as_bytes())),
            Verdict::Allowed
        );
        assert_eq!(
            w.authorize(Some(basic("Prom:wrong").as_bytes())),
            Verdict::Wrong
        );
        assert_eq!(
            w.authorize(Some(basic("prom:s3cret").as_bytes())),
            Verdict::Wrong,
            "user names are case-sensitive"
        );
        assert_eq!(
            w.authorize(Some(basic("nobody:s3cret").as_bytes())),
            Verdict::Wrong
        );
        // No users: nothing asked.
        let open = write(
            dir.path(),
            "open.yml",
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n",
        );
        assert_eq!(
            WebConfig::load(&open).unwrap().authorize(None),
            Verdict::Allowed
        );
    }

    #[test]
    fn errors_name_the_file_the_key_and_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        cert(dir.path());
        let load = |text: &str| WebConfig::load(&write(dir.path(), "w.yml", text)).unwrap_err();
        let e = load("basic_auth_users:\n  prom: plaintext\n");
        assert_eq!(e.key, "basic_auth_users.prom");
        assert!(e.reason.contains("not a bcrypt hash"), "{e}");
        assert!(e
            .to_string()
            .starts_with(&dir.path().join("w.yml").display().to_string()));
        let e = load("http_server_config:\n  http2: false\n");
        assert!(
            e.reason.contains("unknown field") && e.reason.contains("http_server_config"),
            "{e}"
        );
        let e = load("tls_server_config:\n  cert_file: missing.crt\n  key_file: server.key\n");
        assert_eq!(e.key, "tls_server_config.cert_file");
        let e = load("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_auth_type: RequireAnyClientCert\n");
        assert_eq!(e.key, "tls_server_config.client_auth_type");
        let e = load("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_auth_type: RequireAndVerifyClientCert\n");
        assert_eq!(e.key, "tls_server_config.client_ca_file");
        let e = load("tls_server_config:\n  cert_file: server.crt\n  key_file: server.crt\n");
        assert_eq!(e.key, "tls_server_config.key_file");
        let e = WebConfig::load(&dir.path().join("absent.yml")).unwrap_err();
        assert!(e.reason.contains("cannot read"), "{e}");
    }
}
