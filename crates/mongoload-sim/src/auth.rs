//! Authentication for the simulator (`mongoload sim --auth USER:PASSWORD`):
//! SCRAM-SHA-256 and SCRAM-SHA-1 (RFC 5802 / 7677) as MongoDB runs them —
//! `saslStart`/`saslContinue` with `skipEmptyExchange`, speculative
//! authentication and `saslSupportedMechs` in `hello`, SHA-1 over MongoDB's
//! md5 password digest, SHA-256 over the SASLprep'd password — and code 13
//! Unauthorized for every other command before authentication. One user, in
//! the `admin` database, with every privilege once authenticated.

use std::fmt;
use std::str::FromStr;

use base64::Engine as _;
use bson::{doc, spec::BinarySubtype, Binary, Bson, Document};
use hmac::{Hmac, KeyInit, Mac};
use md5::{Digest, Md5};
use rand::RngCore;
use sha1::Sha1;
use sha2::Sha256;

use super::error::{command_name, CmdError};

/// The database the simulator's user is defined in.
pub const USER_DB: &str = "admin";
/// MongoDB's default iteration counts (`scramIterationCount`,
/// `scramSHA256IterationCount`).
const SHA1_ITERATIONS: u32 = 10_000;
const SHA256_ITERATIONS: u32 = 15_000;
/// MongoDB always numbers the one conversation of a connection 1.
const CONVERSATION_ID: i32 = 1;
/// Commands MongoDB answers before authentication (`requiresAuth` false).
const OPEN_COMMANDS: &[&str] = &[
    "hello",
    "isMaster",
    "ismaster",
    "saslStart",
    "saslContinue",
    "ping",
    "buildInfo",
    "buildinfo",
    "connectionStatus",
];

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// `USER:PASSWORD` for `--auth`. `Debug` hides the password.
#[derive(Clone, PartialEq, Eq)]
pub struct AuthUser {
    pub user: String,
    pub password: String,
}

impl fmt::Debug for AuthUser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AuthUser({:?}:***)", self.user)
    }
}

impl FromStr for AuthUser {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.split_once(':') {
            Some((user, password)) if !user.is_empty() && !password.is_empty() => Ok(AuthUser {
                user: user.to_owned(),
                password: password.to_owned(),
            }),
            _ => Err("expected USER:PASSWORD, both non-empty".to_owned()),
        }
    }
}

/// A SCRAM variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    Sha1,
    Sha256,
}

impl Mechanism {
    /// The SASL name.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Sha1 => "SCRAM-SHA-1",
            Mechanism::Sha256 => "SCRAM-SHA-256",
        }
    }

    fn parse(name: &str) -> Option<Mechanism> {
        match name {
            "SCRAM-SHA-1" => Some(Mechanism::Sha1),
            "SCRAM-SHA-256" => Some(Mechanism::Sha256),
            _ => None,
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        fn mac<M: Mac + KeyInit>(key: &[u8], data: &[u8]) -> Vec<u8> {
            let mut m = <M as KeyInit>::new_from_slice(key).expect("HMAC takes any key length");
            m.update(data);
            m.finalize().into_bytes().to_vec()
        }
        match self {
            Mechanism::Sha1 => mac::<Hmac<Sha1>>(key, data),
            Mechanism::Sha256 => mac::<Hmac<Sha256>>(key, data),
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            Mechanism::Sha1 => Sha1::digest(data).to_vec(),
            Mechanism::Sha256 => Sha256::digest(data).to_vec(),
        }
    }

    /// `Hi(Normalize(password), salt, i)` with MongoDB's normalisation:
    /// SHA-1 hashes `hex(md5("user:mongo:password"))`, SHA-256 the
    /// SASLprep'd password.
    fn salted_password(self, user: &str, password: &str, salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            Mechanism::Sha1 => {
                let digest = Md5::digest(format!("{user}:mongo:{password}").as_bytes());
                let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
                let mut out = vec![0u8; 20];
                pbkdf2::pbkdf2_hmac::<Sha1>(hex.as_bytes(), salt, iterations, &mut out);
                out
            }
            Mechanism::Sha256 => {
                // A password SASLprep refuses is used as is: the simulator's
                // own user, set on its command line.
                let prepped = stringprep::saslprep(password)
                    .map(|p| p.into_owned())
                    .unwrap_or_else(|_| password.to_owned());
                let mut out = vec![0u8; 32];
                pbkdf2::pbkdf2_hmac::<Sha256>(prepped.as_bytes(), salt, iterations, &mut out);
                out
            }
        }
    }
}

/// What the server stores for one mechanism (RFC 5802 §3).
#[derive(Clone)]
struct Keys {
    salt: Vec<u8>,
    iterations: u32,
    stored_key: Vec<u8>,
    server_key: Vec<u8>,
}

impl Keys {
    fn derive(mechanism: Mechanism, user: &AuthUser, salt: Vec<u8>, iterations: u32) -> Keys {
        let salted = mechanism.salted_password(&user.user, &user.password, &salt, iterations);
        let client_key = mechanism.hmac(&salted, b"Client Key");
        Keys {
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(&salted, b"Server Key"),
            salt,
            iterations,
        }
    }
}

/// The simulator's one user, its keys derived once at start.
#[derive(Clone)]
pub struct Credentials {
    user: String,
    sha1: Keys,
    sha256: Keys,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

/// What to do with a command on a connection: answer it here, or run it
/// (a `hello` gets `fields` added to its reply).
#[derive(Debug, PartialEq)]
pub enum Verdict {
    Reply(Document),
    Run { fields: Document },
}

/// One connection's authentication state.
#[derive(Debug, Default)]
pub struct Session {
    authenticated: bool,
    conversation: Option<Conversation>,
}

#[derive(Debug)]
struct Conversation {
    mechanism: Mechanism,
    /// `client-first-message-bare,server-first-message`: the start of the AuthMessage.
    first_messages: String,
    nonce: String,
    skip_empty_exchange: bool,
    /// The proof was accepted; waiting for the client's empty message.
    verified: bool,
}

fn auth_failed() -> CmdError {
    CmdError::new(18, "AuthenticationFailed", "Authentication failed.")
}

fn bad_value(message: impl Into<String>) -> CmdError {
    CmdError::new(2, "BadValue", message)
}

fn binary(bytes: Vec<u8>) -> Bson {
    Bson::Binary(Binary {
        subtype: BinarySubtype::Generic,
        bytes,
    })
}

impl Credentials {
    /// Derives the keys of `user` with fresh random salts and MongoDB's
    /// iteration counts.
    pub fn new(user: &AuthUser) -> Credentials {
        let mut rng = rand::rng();
        let mut salt = |n: usize| {
            let mut s = vec![0u8; n];
            rng.fill_bytes(&mut s);
            s
        };
        // MongoDB's salt lengths: 16 bytes for SHA-1, 28 for SHA-256.
        let (s1, s256) = (salt(16), salt(28));
        Credentials::with_salts(user, (s1, SHA1_ITERATIONS), (s256, SHA256_ITERATIONS))
    }

    /// As [`Credentials::new`], with given salts and iteration counts
    /// (for the RFC test vectors).
    pub fn with_salts(
        user: &AuthUser,
        sha1: (Vec<u8>, u32),
        sha256: (Vec<u8>, u32),
    ) -> Credentials {
        Credentials {
            user: user.user.clone(),
            sha1: Keys::derive(Mechanism::Sha1, user, sha1.0, sha1.1),
            sha256: Keys::derive(Mechanism::Sha256, user, sha256.0, sha256.1),
        }
    }

    /// The user name.
    pub fn user(&self) -> &str {
        &self.user
    }

    fn keys(&self, mechanism: Mechanism) -> &Keys {
        match mechanism {
            Mechanism::Sha1 => &self.sha1,
            Mechanism::Sha256 => &self.sha256,
        }
    }

    /// Decides what happens to `cmd` on a connection in state `session`.
    pub fn check(&self, session: &mut Session, cmd: &Document) -> Verdict {
        let name = command_name(cmd);
        let db = cmd.get_str("$db").unwrap_or("test");
        let result = match name {
            "saslStart" => self.sasl_start(session, db, cmd, &mut server_nonce),
            "saslContinue" => self.sasl_continue(session, cmd),
            "hello" | "isMaster" | "ismaster" => {
                return Verdict::Run {
                    fields: self.hello_fields(session, cmd),
                }
            }
            _ if session.authenticated || OPEN_COMMANDS.contains(&name) => {
                return Verdict::Run {
                    fields: Document::new(),
                }
            }
            _ => Err(CmdError::new(
                13,
                "Unauthorized",
                format!("command {name} requires authentication"),
            )),
        };
        Verdict::Reply(match result {
            Ok(mut reply) => {
                reply.insert("ok", 1.0);
                reply
            }
            Err(e) => e.to_doc(),
        })
    }

    /// `saslSupportedMechs` when the hello names this user, and the first
    /// SCRAM round when it carries `speculativeAuthenticate` (left out when
    /// that round fails: the client then authenticates explicitly).
    fn hello_fields(&self, session: &mut Session, cmd: &Document) -> Document {
        let mut fields = Document::new();
        if cmd.get_str("saslSupportedMechs") == Ok(&format!("{USER_DB}.{}", self.user)) {
            fields.insert(
                "saslSupportedMechs",
                vec![Mechanism::Sha1.name(), Mechanism::Sha256.name()],
            );
        }
        if let Ok(spec) = cmd.get_document("speculativeAuthenticate") {
            let db = spec.get_str("db").unwrap_or(USER_DB);
            if spec.contains_key("saslStart") {
                if let Ok(first) = self.sasl_start(session, db, spec, &mut server_nonce) {
                    fields.insert("speculativeAuthenticate", first);
                }
            }
        }
        fields
    }

    /// The first round: checks the user, answers with the combined nonce,
    /// the salt and the iteration count.
    fn sasl_start(
        &self,
        session: &mut Session,
        db: &str,
        cmd: &Document,
        nonce: &mut dyn FnMut() -> String,
    ) -> Result<Document, CmdError> {
        session.conversation = None;
        let mechanism = cmd.get_str("mechanism").unwrap_or_default();
        let Some(mechanism) = Mechanism::parse(mechanism) else {
            return Err(CmdError::new(
                334,
                "MechanismUnavailable",
                format!("Received authentication for mechanism {mechanism} which is not enabled"),
            ));
        };
        let payload = payload(cmd)?;
        let client_first = std::str::from_utf8(payload)
            .map_err(|_| bad_value("SCRAM client-first-message is not UTF-8"))?;
        let (user, client_nonce, bare) = parse_client_first(client_first)?;
        if db != USER_DB || user != self.user {
            return Err(auth_failed());
        }
        let keys = self.keys(mechanism);
        let nonce = format!("{client_nonce}{}", nonce());
        let server_first = format!(
            "r={nonce},s={},i={}",
            B64.encode(&keys.salt),
            keys.iterations
        );
        let skip_empty_exchange = cmd
            .get_document("options")
            .ok()
            .and_then(|o| o.get_bool("skipEmptyExchange").ok())
            .unwrap_or(false);
        session.conversation = Some(Conversation {
            mechanism,
            first_messages: format!("{bare},{server_first}"),
            nonce,
            skip_empty_exchange,
            verified: false,
        });
        Ok(doc! {
            "conversationId": CONVERSATION_ID,
            "done": false,
            "payload": binary(server_first.into_bytes()),
        })
    }

    /// The second round checks the client's proof and answers with the
    /// server signature; without `skipEmptyExchange` a third, empty round
    /// ends the conversation.
    fn sasl_continue(&self, session: &mut Session, cmd: &Document) -> Result<Document, CmdError> {
        let Some(conv) = session.conversation.take() else {
            return Err(CmdError::new(
                17,
                "ProtocolError",
                "No SASL session state found",
            ));
        };
        let id_matches = match cmd.get("conversationId") {
            Some(Bson::Int32(n)) => *n == CONVERSATION_ID,
            Some(Bson::Int64(n)) => *n == CONVERSATION_ID as i64,
            Some(Bson::Double(n)) => *n == CONVERSATION_ID as f64,
            _ => false,
        };
        if !id_matches {
            return Err(CmdError::new(
                17,
                "ProtocolError",
                "Invalid conversation id",
            ));
        }
        let payload = payload(cmd)?;
        if conv.verified {
            return if payload.is_empty() {
                Ok(
                    doc! { "conversationId": CONVERSATION_ID, "done": true, "payload": binary(Vec::new()) },
                )
            } else {
                Err(bad_value("SCRAM: expected an empty final message"))
            };
        }
        let client_final = std::str::from_utf8(payload).map_err(|_| auth_failed())?;
        let signature = self.verify(&conv, client_final)?;
        session.authenticated = true;
        let done = conv.skip_empty_exchange;
        if !done {
            session.conversation = Some(Conversation {
                verified: true,
                ..conv
            });
        }
        Ok(doc! {
            "conversationId": CONVERSATION_ID,
            "done": done,
            "payload": binary(format!("v={}", B64.encode(signature)).into_bytes()),
        })
    }

    /// Checks `c=biws,r=<nonce>,p=<proof>` and returns the server signature.
    fn verify(&self, conv: &Conversation, client_final: &str) -> Result<Vec<u8>, CmdError> {
        let (without_proof, proof) = client_final.rsplit_once(",p=").ok_or_else(auth_failed)?;
        let mut parts = without_proof.split(',');
        let binding = parts.next().and_then(|p| p.strip_prefix("c="));
        let nonce = parts.next().and_then(|p| p.strip_prefix("r="));
        // "biws" is base64("n,,"): no channel binding, no authzid.
        if binding != Some("biws") || nonce != Some(conv.nonce.as_str()) {
            return Err(auth_failed());
        }
        let proof = B64.decode(proof).map_err(|_| auth_failed())?;
        let m = conv.mechanism;
        let keys = self.keys(m);
        let auth_message = format!("{},{without_proof}", conv.first_messages);
        let client_signature = m.hmac(&keys.stored_key, auth_message.as_bytes());
        if proof.len() != client_signature.len() {
            return Err(auth_failed());
        }
        let client_key: Vec<u8> = proof
            .iter()
            .zip(&client_signature)
            .map(|(p, s)| p ^ s)
            .collect();
        if !constant_time_eq(&m.hash(&client_key), &keys.stored_key) {
            return Err(auth_failed());
        }
        Ok(m.hmac(&keys.server_key, auth_message.as_bytes()))
    }
}

/// Checks `cmd` against the simulator's authentication (`auth`, when it
/// has a user): either the reply to send at once (a SASL step, a refusal,
/// `connectionStatus`), or the fields to add to the command's own reply
/// (speculative authentication in `hello`), which [`finish`] adds.
pub fn gate(auth: Option<&Credentials>, session: &mut Session, cmd: &Document) -> Verdict {
    if command_name(cmd) == "connectionStatus" {
        return Verdict::Reply(connection_status(auth, session));
    }
    match auth {
        Some(creds) => creds.check(session, cmd),
        None => Verdict::Run {
            fields: Document::new(),
        },
    }
}

/// The command's reply with the fields [`gate`] asked to add.
pub fn finish(mut reply: Document, fields: Document) -> Document {
    if !fields.is_empty() {
        // Keep `ok` last, as the server does.
        let ok = reply.remove("ok");
        reply.extend(fields);
        if let Some(ok) = ok {
            reply.insert("ok", ok);
        }
    }
    reply
}

/// `connectionStatus`, which MongoDB answers before authentication too:
/// the connection's user, with the `root` role the simulator's one user has.
fn connection_status(creds: Option<&Credentials>, session: &Session) -> Document {
    let (users, roles) = match creds {
        Some(c) if session.authenticated => (
            vec![doc! {"user": c.user(), "db": USER_DB}],
            vec![doc! {"role": "root", "db": USER_DB}],
        ),
        _ => (Vec::new(), Vec::new()),
    };
    doc! {
        "authInfo": { "authenticatedUsers": users, "authenticatedUserRoles": roles },
        "ok": 1.0,
    }
}

/// 24 random bytes, base64: the server's half of the nonce, as MongoDB.
fn server_nonce() -> String {
    let mut bytes = [0u8; 24];
    rand::rng().fill_bytes(&mut bytes);
    B64.encode(bytes)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn payload(cmd: &Document) -> Result<&[u8], CmdError> {
    match cmd.get("payload") {
        Some(Bson::Binary(b)) => Ok(&b.bytes),
        _ => Err(CmdError::new(
            14,
            "TypeMismatch",
            "'payload' must be binary data",
        )),
    }
}

/// Splits `n,,n=<user>,r=<nonce>` into the user (unescaped), the nonce and
/// the bare message (without the GS2 header).
fn parse_client_first(message: &str) -> Result<(String, &str, &str), CmdError> {
    let rest = match message
        .strip_prefix("n,")
        .or_else(|| message.strip_prefix("y,"))
    {
        Some(rest) => rest,
        None if message.starts_with("p=") => {
            return Err(bad_value("SCRAM channel binding is not supported"))
        }
        None => return Err(bad_value("SCRAM: malformed client-first-message")),
    };
    let Some(bare) = rest.strip_prefix(',') else {
        return Err(bad_value(
            "SCRAM: an authorization identity is not supported",
        ));
    };
    let mut parts = bare.split(',');
    let user = parts.next().and_then(|p| p.strip_prefix("n="));
    let nonce = parts.next().and_then(|p| p.strip_prefix("r="));
    match (user, nonce) {
        (Some(user), Some(nonce)) if !nonce.is_empty() => {
            Ok((user.replace("=2C", ",").replace("=3D", "="), nonce, bare))
        }
        _ => Err(bad_value("SCRAM: malformed client-first-message")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str, password: &str) -> AuthUser {
        AuthUser {
            user: name.into(),
            password: password.into(),
        }
    }

    fn start_cmd(mechanism: &str, message: &str) -> Document {
        doc! {
            "saslStart": 1,
            "mechanism": mechanism,
            "payload": binary(message.as_bytes().to_vec()),
            "options": { "skipEmptyExchange": true },
            "$db": "admin",
        }
    }

    fn continue_cmd(message: &str) -> Document {
        doc! { "saslContinue": 1, "conversationId": 1, "payload": binary(message.as_bytes().to_vec()), "$db": "admin" }
    }

    fn payload_text(reply: &Document) -> String {
        String::from_utf8(reply.get_binary_generic("payload").unwrap().clone()).unwrap()
    }

    /// Runs the RFC conversation with a fixed server nonce and returns the
    /// server-first message and the final reply.
    fn converse(
        creds: &Credentials,
        mechanism: &str,
        client_first: &str,
        server_nonce: &str,
        client_final: &str,
    ) -> (String, Document) {
        let mut session = Session::default();
        let mut nonce = || server_nonce.to_owned();
        let first = creds
            .sasl_start(
                &mut session,
                "admin",
                &start_cmd(mechanism, client_first),
                &mut nonce,
            )
            .unwrap();
        let final_reply = creds.check(&mut session, &continue_cmd(client_final));
        let Verdict::Reply(final_reply) = final_reply else {
            panic!("saslContinue is answered by the auth layer")
        };
        (payload_text(&first), final_reply)
    }

    /// The SCRAM-SHA-1 conversation of MongoDB's authentication spec
    /// (user "user", password "pencil", MongoDB's md5 digest, i=10000).
    #[test]
    fn sha1_matches_the_mongodb_spec_vector() {
        let salt = B64.decode("rQ9ZY3MntBeuP3E1TDVC4w==").unwrap();
        let creds =
            Credentials::with_salts(&user("user", "pencil"), (salt, 10_000), (vec![0; 28], 4096));
        let (server_first, reply) = converse(
            &creds,
            "SCRAM-SHA-1",
            "n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL",
            "Ho+Vgk7qvUOKUwuWLIWg4l/9SraGMHEE",
            "c=biws,r=fyko+d2lbbFgONRv9qkxdawLHo+Vgk7qvUOKUwuWLIWg4l/9SraGMHEE,p=MC2T8BvbmWRckDw8oWl5IVghwCY=",
        );
        assert_eq!(
            server_first,
            "r=fyko+d2lbbFgONRv9qkxdawLHo+Vgk7qvUOKUwuWLIWg4l/9SraGMHEE,s=rQ9ZY3MntBeuP3E1TDVC4w==,i=10000"
        );
        assert_eq!(reply.get_f64("ok"), Ok(1.0), "{reply}");
        assert_eq!(reply.get_bool("done"), Ok(true));
        assert_eq!(payload_text(&reply), "v=UMWeI25JD1yNYZRMpZ4VHvhZ9e0=");
    }

    /// RFC 7677's SCRAM-SHA-256 conversation (user "user", the client's
    /// proof made with password "pencil") against a user whose password
    /// is `password`.
    fn rfc_7677(password: &str) -> (Credentials, Document) {
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let creds =
            Credentials::with_salts(&user("user", password), (vec![0; 16], 4096), (salt, 4096));
        let (_, reply) = converse(
            &creds,
            "SCRAM-SHA-256",
            "n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
            "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
        );
        (creds, reply)
    }

    #[test]
    fn sha256_matches_the_rfc_7677_vector() {
        let (_, reply) = rfc_7677("pencil");
        assert_eq!(reply.get_f64("ok"), Ok(1.0), "{reply}");
        assert_eq!(
            payload_text(&reply),
            "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
    }

    #[test]
    fn a_wrong_proof_or_user_is_authentication_failed() {
        let (creds, reply) = rfc_7677("other");
        assert_eq!(reply.get_i32("code"), Ok(18), "{reply}");
        assert_eq!(reply.get_str("codeName"), Ok("AuthenticationFailed"));

        let mut session = Session::default();
        let Verdict::Reply(r) = creds.check(
            &mut session,
            &start_cmd("SCRAM-SHA-256", "n,,n=nobody,r=abc"),
        ) else {
            panic!("saslStart is answered by the auth layer")
        };
        assert_eq!(r.get_i32("code"), Ok(18), "{r}");
        // A user of another database is another user.
        let mut cmd = start_cmd("SCRAM-SHA-256", "n,,n=user,r=abc");
        cmd.insert("$db", "mongoload");
        let Verdict::Reply(r) = creds.check(&mut session, &cmd) else {
            panic!()
        };
        assert_eq!(r.get_i32("code"), Ok(18), "{r}");
    }

    #[test]
    fn commands_before_authentication_are_unauthorized() {
        let creds = Credentials::new(&user("app", "pw"));
        let mut session = Session::default();
        let Verdict::Reply(r) =
            creds.check(&mut session, &doc! {"find": "c", "filter": {}, "$db": "x"})
        else {
            panic!("find is refused")
        };
        assert_eq!(
            (r.get_i32("code"), r.get_str("errmsg")),
            (Ok(13), Ok("command find requires authentication"))
        );
        for open in ["ping", "buildInfo", "hello", "isMaster"] {
            assert!(
                matches!(
                    creds.check(&mut session, &doc! {open: 1, "$db": "admin"}),
                    Verdict::Run { .. }
                ),
                "{open}"
            );
        }
        session.authenticated = true;
        assert!(matches!(
            creds.check(&mut session, &doc! {"find": "c", "$db": "x"}),
            Verdict::Run { .. }
        ));
    }

    #[test]
    fn hello_negotiates_and_starts_speculatively() {
        let creds = Credentials::new(&user("app", "pw"));
        let mut session = Session::default();
        let hello = doc! {
            "hello": 1,
            "saslSupportedMechs": "admin.app",
            "speculativeAuthenticate": {
                "saslStart": 1,
                "mechanism": "SCRAM-SHA-256",
                "payload": binary(b"n,,n=app,r=clientnonce".to_vec()),
                "options": { "skipEmptyExchange": true },
                "db": "admin",
            },
            "$db": "admin",
        };
        let Verdict::Run { fields } = creds.check(&mut session, &hello) else {
            panic!("hello runs")
        };
        let mechs = fields.get_array("saslSupportedMechs").unwrap();
        assert_eq!(mechs.len(), 2);
        let spec = fields.get_document("speculativeAuthenticate").unwrap();
        assert_eq!(spec.get_i32("conversationId"), Ok(1));
        assert_eq!(spec.get_bool("done"), Ok(false));
        assert!(payload_text(spec).starts_with("r=clientnonce"), "{spec}");
        assert!(session.conversation.is_some());

        // Another user: neither field, and no conversation.
        let mut session = Session::default();
        let mut other = hello.clone();
        other.insert("saslSupportedMechs", "admin.eve");
        other
            .get_document_mut("speculativeAuthenticate")
            .unwrap()
            .insert("payload", binary(b"n,,n=eve,r=x".to_vec()));
        let Verdict::Run { fields } = creds.check(&mut session, &other) else {
            panic!()
        };
        assert!(fields.is_empty(), "{fields}");
        assert!(session.conversation.is_none());
    }

    #[test]
    fn without_skip_empty_exchange_a_third_round_ends_it() {
        let creds = Credentials::new(&user("app", "pw"));
        // A conversation whose proof was already accepted.
        let mut session = Session {
            authenticated: true,
            conversation: Some(Conversation {
                mechanism: Mechanism::Sha256,
                first_messages: String::new(),
                nonce: String::new(),
                skip_empty_exchange: false,
                verified: true,
            }),
        };
        let Verdict::Reply(r) = creds.check(&mut session, &continue_cmd("")) else {
            panic!()
        };
        assert_eq!((r.get_bool("done"), r.get_f64("ok")), (Ok(true), Ok(1.0)));
        let Verdict::Reply(r) = creds.check(&mut session, &continue_cmd("")) else {
            panic!()
        };
        assert_eq!(r.get_i32("code"), Ok(17), "no conversation left: {r}");
    }

    #[test]
    fn auth_user_parses_and_hides_the_password() {
        let u: AuthUser = "app:s3:cret".parse().unwrap();
        assert_eq!((u.user.as_str(), u.password.as_str()), ("app", "s3:cret"));
        assert!(!format!("{u:?}").contains("s3"));
        assert!("app".parse::<AuthUser>().is_err());
        assert!(":pw".parse::<AuthUser>().is_err());
        assert!("app:".parse::<AuthUser>().is_err());
    }

    #[test]
    fn client_first_parsing() {
        assert_eq!(
            parse_client_first("n,,n=a=2Cb=3Dc,r=xyz").unwrap(),
            ("a,b=c".to_owned(), "xyz", "n=a=2Cb=3Dc,r=xyz")
        );
        assert!(parse_client_first("p=tls-unique,,n=a,r=x").is_err());
        assert!(parse_client_first("n,a=admin,n=a,r=x").is_err());
        assert!(parse_client_first("n,,n=a").is_err());
    }
}
