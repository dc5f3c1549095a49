//! MongoDB connection strings as secrets: a wrapper whose `Debug` and
//! `Display` never show the password, and the redaction and host-listing
//! helpers used for log lines, `/status` and `check-config`.

use std::fmt;

use serde::Deserialize;

/// A connection string. Only [`SecretUri::expose`] gives the raw text; every
/// formatting path shows the redacted form, so a `{:?}` of the config cannot
/// leak the password into a log.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct SecretUri(String);

impl SecretUri {
    /// Wraps a raw connection string.
    pub fn new(uri: impl Into<String>) -> SecretUri {
        SecretUri(uri.into())
    }

    /// The raw connection string, password included: for the driver only.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The connection string with credentials replaced by `***`.
    pub fn redacted(&self) -> String {
        redact_uri(&self.0)
    }
}

impl fmt::Debug for SecretUri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SecretUri({:?})", self.redacted())
    }
}

impl fmt::Display for SecretUri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

/// Splits `scheme://authority/rest` into (scheme with `://`, authority,
/// rest). The userinfo ends at the last `@` before the first `/`, so a
/// (wrongly unescaped) `@` in the password still ends up inside it, while an
/// `@` in the query (`appName=a@b`) does not.
fn split(uri: &str) -> Option<(&str, &str, &str)> {
    let body_start = uri.find("://")? + 3;
    let body = &uri[body_start..];
    let slash = body.find('/').unwrap_or(body.len());
    let host_start = body[..slash].rfind('@').map_or(0, |i| i + 1);
    let host_end = body[host_start..]
        .find(['/', '?'])
        .map_or(body.len(), |i| host_start + i);
    Some((&uri[..body_start], &body[..host_end], &body[host_end..]))
}

/// Query parameter names whose values are secrets.
fn is_secret_param(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.contains("password") || n.contains("secret") || n.contains("token")
}

/// Replaces the password of a `mongodb://` or `mongodb+srv://` connection
/// string with `***` (`user:***@h1,h2/db?…`), and the values of query
/// parameters that carry secrets (`password=`, `…token…`, and
/// `AWS_SESSION_TOKEN:` inside `authMechanismProperties`). A string that
/// does not parse as a URI but holds an `@` has everything before it hidden.
pub fn redact_uri(uri: &str) -> String {
    let Some((scheme, authority, rest)) = split(uri) else {
        return match uri.rfind('@') {
            Some(i) => format!("***{}", &uri[i..]),
            None => uri.to_string(),
        };
    };
    let mut out = String::with_capacity(uri.len());
    out.push_str(scheme);
    match authority.rfind('@') {
        Some(at) => {
            let userinfo = &authority[..at];
            match userinfo.find(':') {
                Some(colon) => {
                    out.push_str(&userinfo[..colon]);
                    out.push_str(":***");
                }
                None => out.push_str(userinfo),
            }
            out.push_str(&authority[at..]);
        }
        None => out.push_str(authority),
    }
    match rest.find('?') {
        None => out.push_str(rest),
        Some(q) => {
            out.push_str(&rest[..=q]);
            let params: Vec<String> = rest[q + 1..]
                .split('&')
                .map(|p| match p.split_once('=') {
                    Some((k, _)) if is_secret_param(k) => format!("{k}=***"),
                    Some((k, v)) if k.eq_ignore_ascii_case("authMechanismProperties") => {
                        let props: Vec<String> = v
                            .split(',')
                            .map(|prop| match prop.split_once(':') {
                                Some((pk, _)) if is_secret_param(pk) => format!("{pk}:***"),
                                _ => prop.to_string(),
                            })
                            .collect();
                        format!("{k}={}", props.join(","))
                    }
                    _ => p.to_string(),
                })
                .collect();
            out.push_str(&params.join("&"));
        }
    }
    out
}

/// Parses a connection string with the driver's own parser, as `run`
/// does when it builds the client: an unknown or misspelt option, a bad
/// value, a compressor the build lacks, `socketTimeoutMS` and the option
/// combinations the driver refuses all fail here, with the driver's reason
/// (never the password). A `mongodb+srv://` string is parsed without its
/// DNS lookup: what the SRV and TXT records add is checked at run time.
pub(crate) fn check_with_driver(uri: &str) -> Result<(), String> {
    use mongodb::options::{ClientOptions, ConnectionString};
    use std::future::IntoFuture;
    let parsed = if uri.starts_with("mongodb+srv://") {
        ConnectionString::parse(uri).map(drop)
    } else {
        // No DNS and no I/O for a host list: the future completes at once,
        // outside any runtime.
        futures::executor::block_on(ClientOptions::parse(uri).into_future()).map(drop)
    };
    parsed.map_err(|e| driver_reason(&e, uri))
}

/// The driver's reason for refusing a connection string, on one line and
/// without the password (not its `Kind: …, labels: {}` dump).
pub fn driver_reason(e: &mongodb::error::Error, uri: &str) -> String {
    let message = match e.kind.as_ref() {
        mongodb::error::ErrorKind::InvalidArgument { message, .. } => message.clone(),
        mongodb::error::ErrorKind::DnsResolve { message, .. } => format!("DNS: {message}"),
        other => other.to_string(),
    };
    scrub(&message, uri)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The hosts of a connection string (`host:port` as written, or the SRV
/// name), for log lines; empty when the string does not parse.
pub fn uri_hosts(uri: &str) -> Vec<String> {
    let Some((_, authority, _)) = split(uri) else {
        return Vec::new();
    };
    let hosts = authority
        .rfind('@')
        .map_or(authority, |at| &authority[at + 1..]);
    hosts
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(str::to_string)
        .collect()
}

/// The user a connection string authenticates as, and where: what a log
/// line may say about the credentials (never the password).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UriUser {
    /// The user name, percent-decoded.
    pub user: String,
    /// `authSource`, else the database in the path, else `admin`.
    pub source: String,
    /// `authMechanism`, when the URI names one (else negotiated).
    pub mechanism: Option<String>,
}

/// The user of a connection string with credentials; `None` without.
pub fn uri_user(uri: &str) -> Option<UriUser> {
    let (_, authority, rest) = split(uri)?;
    let userinfo = &authority[..authority.rfind('@')?];
    let user = percent_decode(userinfo.split(':').next().unwrap_or(""));
    if user.is_empty() {
        return None;
    }
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let param = |name: &str| {
        query
            .split('&')
            .filter_map(|p| p.split_once('='))
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| percent_decode(v))
    };
    let path_db = path.trim_start_matches('/');
    let source = param("authSource")
        .or_else(|| (!path_db.is_empty()).then(|| percent_decode(path_db)))
        .unwrap_or_else(|| "admin".to_owned());
    Some(UriUser {
        user,
        source,
        mechanism: param("authMechanism"),
    })
}

/// Removes the URI's password from a message, in case an error echoes
/// part of the URI back.
pub fn scrub(message: &str, uri: &str) -> String {
    let redacted = redact_uri(uri);
    let mut out = message.replace(uri, &redacted);
    if let Some(password) = password_of(uri) {
        if !password.is_empty() {
            out = out.replace(password, "***");
        }
    }
    out
}

fn password_of(uri: &str) -> Option<&str> {
    let rest = uri.split_once("://")?.1;
    let userinfo = &rest[..rest.rfind('@')?];
    Some(userinfo.split_once(':')?.1)
}

/// Decodes `%XX` escapes; anything malformed is kept as written.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_the_password() {
        assert_eq!(
            redact_uri("mongodb://admin:s3cr3t@h1:27017,h2:27018/db?replicaSet=rs0"),
            "mongodb://admin:***@h1:27017,h2:27018/db?replicaSet=rs0"
        );
        assert_eq!(
            redact_uri("mongodb+srv://u:p%40ss@cluster0.example.net/?retryWrites=true"),
            "mongodb+srv://u:***@cluster0.example.net/?retryWrites=true"
        );
        // An unescaped '@' in the password stays hidden.
        let r = redact_uri("mongodb://u:p@ss@h1/db");
        assert_eq!(r, "mongodb://u:***@h1/db");
        assert!(!r.contains("ss@"));
    }

    #[test]
    fn leaves_uris_without_credentials_alone() {
        for u in [
            "mongodb://localhost:27017",
            "mongodb://h1,h2/db?w=majority",
            "mongodb://user@h1/?authMechanism=MONGODB-X509",
        ] {
            assert_eq!(redact_uri(u), u);
        }
    }

    #[test]
    fn redacts_secrets_in_the_query() {
        let r = redact_uri(
            "mongodb://h1/?password=hunter2&authMechanism=MONGODB-AWS\
             &authMechanismProperties=AWS_SESSION_TOKEN:abc123,SERVICE_NAME:x&appName=a",
        );
        assert!(!r.contains("hunter2"), "{r}");
        assert!(!r.contains("abc123"), "{r}");
        assert!(r.contains("password=***"), "{r}");
        assert!(r.contains("AWS_SESSION_TOKEN:***,SERVICE_NAME:x"), "{r}");
        assert!(r.ends_with("&appName=a"), "{r}");
    }

    #[test]
    fn malformed_strings_do_not_leak() {
        assert_eq!(redact_uri("u:secret@host"), "***@host");
        assert_eq!(redact_uri("localhost"), "localhost");
    }

    #[test]
    fn lists_hosts() {
        assert_eq!(
            uri_hosts("mongodb://a:b@h1:27017,h2:27018/db?x=y"),
            vec!["h1:27017", "h2:27018"]
        );
        assert_eq!(
            uri_hosts("mongodb+srv://c.example.net"),
            vec!["c.example.net"]
        );
        assert!(uri_hosts("nonsense").is_empty());
    }

    #[test]
    fn names_the_user_and_the_auth_source() {
        let u = uri_user("mongodb://app%40x:p%3Aw@h1,h2/load?authMechanism=SCRAM-SHA-1").unwrap();
        assert_eq!(
            u,
            UriUser {
                user: "app@x".into(),
                source: "load".into(),
                mechanism: Some("SCRAM-SHA-1".into()),
            }
        );
        let u = uri_user("mongodb://app:pw@h/db?authSource=admin").unwrap();
        assert_eq!((u.source.as_str(), u.mechanism), ("admin", None));
        assert_eq!(uri_user("mongodb://app:pw@h").unwrap().source, "admin");
        assert_eq!(uri_user("mongodb://h/db"), None);
        assert_eq!(uri_user("nonsense"), None);
        assert_eq!(percent_decode("a%2"), "a%2");
    }

    #[test]
    fn the_driver_parser_accepts_compression_and_refuses_what_run_refuses() {
        for ok in [
            "mongodb://h1:27017/?compressors=zstd",
            "mongodb://h1/?compressors=snappy,zlib&zlibCompressionLevel=6",
            "mongodb://u:p@h1,h2/db?replicaSet=rs0&compressors=zstd,snappy,zlib",
            "mongodb+srv://u:p@cluster0.example.net/?compressors=zstd",
        ] {
            assert_eq!(check_with_driver(ok), Ok(()), "{ok}");
        }
        for (bad, says) in [
            ("mongodb://h1/?compresors=zstd", "compresors"),
            ("mongodb://h1/?compressors=lz4", "lz4"),
            ("mongodb://h1/?socketTimeoutMS=5", "socketTimeoutMS"),
            ("mongodb://h1/?maxPoolSize=0", "maxPoolSize"),
            ("mongodb://u:hunter2@h1:notaport/", "port"),
        ] {
            let reason = check_with_driver(bad).expect_err(bad);
            assert!(reason.contains(says), "{bad}: {reason}");
            assert!(!reason.contains("hunter2"), "{reason}");
            assert!(!reason.contains("labels"), "{reason}");
            assert!(!reason.contains('\n'), "{reason}");
        }
    }

    #[test]
    fn debug_and_display_hide_the_password() {
        let s = SecretUri::new("mongodb://u:topsecret@h/");
        assert!(!format!("{s:?}").contains("topsecret"));
        assert!(!format!("{s}").contains("topsecret"));
        assert_eq!(s.expose(), "mongodb://u:topsecret@h/");
    }

    #[test]
    fn scrub_removes_password_and_uri() {
        let uri = "mongodb://app:s3cr%3Et@db1:27017,db2/?replicaSet=rs0";
        let msg = format!("bad thing with {uri} and s3cr%3Et");
        let out = scrub(&msg, uri);
        assert!(!out.contains("s3cr%3Et"), "{out}");
        assert!(out.contains("db1:27017"), "{out}");
    }
}
