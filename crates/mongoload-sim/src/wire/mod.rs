//! MongoDB wire-protocol framing: parsing OP_MSG and legacy OP_QUERY
//! requests from whole frames and encoding OP_MSG / OP_REPLY replies. Pure
//! functions on byte slices, so every malformed case is unit-tested without
//! a socket.

use bson::{Bson, Document};

pub mod compress;

/// OP_REPLY, the legacy reply to OP_QUERY.
pub const OP_REPLY: i32 = 1;
/// OP_QUERY, only used by drivers for the first `hello`/`isMaster`.
pub const OP_QUERY: i32 = 2004;
/// OP_COMPRESSED: another message compressed ([`compress`]); the
/// simulator offers snappy, zlib and zstd in its `hello` reply.
pub const OP_COMPRESSED: i32 = 2012;
/// OP_MSG, the modern request and reply.
pub const OP_MSG: i32 = 2013;

/// Largest message the simulator accepts or advertises (as MongoDB).
pub const MAX_MESSAGE_SIZE: usize = 48_000_000;
/// Largest BSON document (as MongoDB).
pub const MAX_BSON_SIZE: usize = 16 * 1024 * 1024;
/// Length of the standard message header.
pub const HEADER_LEN: usize = 16;

const FLAG_CHECKSUM: u32 = 1;
const FLAG_MORE_TO_COME: u32 = 1 << 1;
const FLAG_EXHAUST_ALLOWED: u32 = 1 << 16;
/// Bits 0-15 must be understood by the receiver; these are the ones we do.
const KNOWN_REQUIRED: u32 = FLAG_CHECKSUM | FLAG_MORE_TO_COME;

/// Why a frame was rejected; the connection is closed with this as the logged reason.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum WireError {
    #[error("message length {0} is out of range ({HEADER_LEN}..={MAX_MESSAGE_SIZE})")]
    BadLength(i64),
    #[error("unsupported opcode {0}")]
    UnknownOpcode(i32),
    #[error("truncated {0}")]
    Truncated(&'static str),
    #[error("invalid BSON in {what}: {reason}")]
    Bson { what: &'static str, reason: String },
    #[error("OP_MSG checksum mismatch (sent {sent:#010x}, computed {computed:#010x})")]
    Checksum { sent: u32, computed: u32 },
    #[error("OP_MSG has unknown required flag bits {0:#x}")]
    Flags(u32),
    #[error("OP_MSG has unknown section kind {0}")]
    SectionKind(u8),
    #[error("OP_MSG has {0} body sections, expected exactly one")]
    BodyCount(usize),
    #[error("OP_MSG document sequence {0:?} collides with a body field")]
    DuplicateSequence(String),
    #[error("string is not NUL-terminated UTF-8")]
    BadCString,
    #[error(transparent)]
    Compressed(#[from] compress::CompressError),
}

/// The standard header every message starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub length: usize,
    pub request_id: i32,
    pub response_to: i32,
    pub op_code: i32,
}

/// Parses and validates the 16-byte header (the length bounds and the opcode).
pub fn parse_header(bytes: &[u8; HEADER_LEN]) -> Result<Header, WireError> {
    let length = i32_at(bytes, 0);
    if length < HEADER_LEN as i32 || length as i64 > MAX_MESSAGE_SIZE as i64 {
        return Err(WireError::BadLength(length as i64));
    }
    let op_code = i32_at(bytes, 12);
    if op_code != OP_MSG && op_code != OP_QUERY && op_code != OP_COMPRESSED {
        return Err(WireError::UnknownOpcode(op_code));
    }
    Ok(Header {
        length: length as usize,
        request_id: i32_at(bytes, 4),
        response_to: i32_at(bytes, 8),
        op_code,
    })
}

/// A decoded request.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// An OP_MSG command, with kind-1 document sequences folded into the
    /// body as arrays under their identifiers.
    Msg {
        request_id: i32,
        /// The client wants no reply (unacknowledged writes).
        more_to_come: bool,
        exhaust_allowed: bool,
        body: Document,
    },
    /// A legacy OP_QUERY (in practice the `isMaster` handshake on `admin.$cmd`).
    Query {
        request_id: i32,
        collection: String,
        query: Document,
    },
}

/// Parses a whole frame (header included, as its length says).
pub fn parse_message(frame: &[u8]) -> Result<Request, WireError> {
    let head: &[u8; HEADER_LEN] = frame
        .get(..HEADER_LEN)
        .and_then(|h| h.try_into().ok())
        .ok_or(WireError::Truncated("header"))?;
    let header = parse_header(head)?;
    if frame.len() != header.length {
        return Err(WireError::Truncated("message"));
    }
    match header.op_code {
        OP_MSG => parse_msg(&header, frame),
        OP_QUERY => parse_query(&header, &frame[HEADER_LEN..]),
        // OP_COMPRESSED is unwrapped before (compress::decompress).
        other => Err(WireError::UnknownOpcode(other)),
    }
}

fn parse_msg(header: &Header, frame: &[u8]) -> Result<Request, WireError> {
    let mut rest = &frame[HEADER_LEN..];
    let flags = take_u32(&mut rest, "OP_MSG flags")?;
    let required = flags & 0xffff;
    if required & !KNOWN_REQUIRED != 0 {
        return Err(WireError::Flags(required & !KNOWN_REQUIRED));
    }
    if flags & FLAG_CHECKSUM != 0 {
        if rest.len() < 4 {
            return Err(WireError::Truncated("OP_MSG checksum"));
        }
        let split = frame.len() - 4;
        let sent = u32::from_le_bytes(frame[split..].try_into().expect("4 bytes"));
        let computed = crc32c::crc32c(&frame[..split]);
        if sent != computed {
            return Err(WireError::Checksum { sent, computed });
        }
        rest = &rest[..rest.len() - 4];
    }
    let mut body: Option<Document> = None;
    let mut bodies = 0usize;
    let mut sequences: Vec<(String, Vec<Bson>)> = Vec::new();
    while !rest.is_empty() {
        let kind = rest[0];
        rest = &rest[1..];
        match kind {
            0 => {
                bodies += 1;
                body = Some(take_document(&mut rest, "OP_MSG body")?);
            }
            1 => {
                let size = take_i32(&mut rest, "document sequence size")?;
                if size < 4 || size as usize - 4 > rest.len() {
                    return Err(WireError::Truncated("document sequence"));
                }
                let (mut seq, after) = rest.split_at(size as usize - 4);
                rest = after;
                let id = take_cstring(&mut seq)?;
                let mut docs = Vec::new();
                while !seq.is_empty() {
                    docs.push(Bson::Document(take_document(
                        &mut seq,
                        "document sequence",
                    )?));
                }
                sequences.push((id, docs));
            }
            k => return Err(WireError::SectionKind(k)),
        }
    }
    let mut body = match (bodies, body) {
        (1, Some(b)) => b,
        (n, _) => return Err(WireError::BodyCount(n)),
    };
    for (id, docs) in sequences {
        if body.contains_key(&id) {
            return Err(WireError::DuplicateSequence(id));
        }
        body.insert(id, Bson::Array(docs));
    }
    Ok(Request::Msg {
        request_id: header.request_id,
        more_to_come: flags & FLAG_MORE_TO_COME != 0,
        exhaust_allowed: flags & FLAG_EXHAUST_ALLOWED != 0,
        body,
    })
}

fn parse_query(header: &Header, mut rest: &[u8]) -> Result<Request, WireError> {
    let _flags = take_i32(&mut rest, "OP_QUERY flags")?;
    let collection = take_cstring(&mut rest)?;
    let _skip = take_i32(&mut rest, "OP_QUERY numberToSkip")?;
    let _return = take_i32(&mut rest, "OP_QUERY numberToReturn")?;
    let mut query = take_document(&mut rest, "OP_QUERY query")?;
    // Legacy drivers may wrap the command as {$query: {...}, $readPreference: ...}.
    if let Some(Bson::Document(inner)) = query.get("$query") {
        query = inner.clone();
    }
    // An optional returnFieldsSelector may follow; it is ignored.
    if !rest.is_empty() {
        take_document(&mut rest, "OP_QUERY returnFieldsSelector")?;
    }
    Ok(Request::Query {
        request_id: header.request_id,
        collection,
        query,
    })
}

/// Appends an OP_MSG reply (flags 0, one body section) to `out`.
pub fn encode_msg(out: &mut Vec<u8>, request_id: i32, response_to: i32, body: &Document) {
    let start = out.len();
    write_header(out, request_id, response_to, OP_MSG);
    out.extend_from_slice(&0u32.to_le_bytes());
    out.push(0);
    body.to_writer(&mut *out)
        .expect("writing BSON to a Vec cannot fail");
    patch_length(out, start);
}

/// Appends an OP_REPLY carrying one document to `out`.
pub fn encode_reply(out: &mut Vec<u8>, request_id: i32, response_to: i32, doc: &Document) {
    let start = out.len();
    write_header(out, request_id, response_to, OP_REPLY);
    out.extend_from_slice(&0i32.to_le_bytes()); // responseFlags
    out.extend_from_slice(&0i64.to_le_bytes()); // cursorID
    out.extend_from_slice(&0i32.to_le_bytes()); // startingFrom
    out.extend_from_slice(&1i32.to_le_bytes()); // numberReturned
    doc.to_writer(&mut *out)
        .expect("writing BSON to a Vec cannot fail");
    patch_length(out, start);
}

fn write_header(out: &mut Vec<u8>, request_id: i32, response_to: i32, op_code: i32) {
    out.extend_from_slice(&0i32.to_le_bytes());
    out.extend_from_slice(&request_id.to_le_bytes());
    out.extend_from_slice(&response_to.to_le_bytes());
    out.extend_from_slice(&op_code.to_le_bytes());
}

fn patch_length(out: &mut [u8], start: usize) {
    let len = (out.len() - start) as i32;
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
}

fn i32_at(b: &[u8], at: usize) -> i32 {
    i32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn take_i32(rest: &mut &[u8], what: &'static str) -> Result<i32, WireError> {
    if rest.len() < 4 {
        return Err(WireError::Truncated(what));
    }
    let v = i32_at(rest, 0);
    *rest = &rest[4..];
    Ok(v)
}

fn take_u32(rest: &mut &[u8], what: &'static str) -> Result<u32, WireError> {
    take_i32(rest, what).map(|v| v as u32)
}

fn take_cstring(rest: &mut &[u8]) -> Result<String, WireError> {
    let nul = rest
        .iter()
        .position(|&b| b == 0)
        .ok_or(WireError::BadCString)?;
    let s = std::str::from_utf8(&rest[..nul]).map_err(|_| WireError::BadCString)?;
    let s = s.to_owned();
    *rest = &rest[nul + 1..];
    Ok(s)
}

fn take_document(rest: &mut &[u8], what: &'static str) -> Result<Document, WireError> {
    if rest.len() < 5 {
        return Err(WireError::Truncated(what));
    }
    let len = i32_at(rest, 0);
    if len < 5 || len as usize > rest.len() || len as usize > MAX_BSON_SIZE + 16 * 1024 {
        return Err(WireError::Bson {
            what,
            reason: format!("document length {len} out of range"),
        });
    }
    let (doc_bytes, after) = rest.split_at(len as usize);
    // from_slice decodes in place; Document::from_reader would copy the bytes first.
    let doc: Document = bson::from_slice(doc_bytes).map_err(|e| WireError::Bson {
        what,
        reason: e.to_string(),
    })?;
    *rest = after;
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn msg_frame(flags: u32, sections: &[u8], checksum: bool) -> Vec<u8> {
        let mut out = Vec::new();
        write_header(&mut out, 7, 0, OP_MSG);
        out.extend_from_slice(&flags.to_le_bytes());
        out.extend_from_slice(sections);
        if checksum {
            out.extend_from_slice(&[0; 4]);
            patch_length(&mut out, 0);
            let split = out.len() - 4;
            let crc = crc32c::crc32c(&out[..split]);
            out[split..].copy_from_slice(&crc.to_le_bytes());
        } else {
            patch_length(&mut out, 0);
        }
        out
    }

    fn body_section(d: &Document) -> Vec<u8> {
        let mut s = vec![0u8];
        d.to_writer(&mut s).unwrap();
        s
    }

    fn seq_section(id: &str, docs: &[Document]) -> Vec<u8> {
        let mut payload = Vec::new();
        payload.extend_from_slice(id.as_bytes());
        payload.push(0);
        for d in docs {
            d.to_writer(&mut payload).unwrap();
        }
        let mut s = vec![1u8];
        s.extend_from_slice(&((payload.len() + 4) as i32).to_le_bytes());
        s.extend_from_slice(&payload);
        s
    }

    #[test]
    fn reply_round_trips_through_the_parser() {
        let body = doc! { "ping": 1, "$db": "admin" };
        let mut out = vec![0xAA]; // encoding appends after existing bytes
        encode_msg(&mut out, 5, 9, &body);
        let frame = &out[1..];
        let header = parse_header(frame[..16].try_into().unwrap()).unwrap();
        assert_eq!(
            header,
            Header {
                length: frame.len(),
                request_id: 5,
                response_to: 9,
                op_code: OP_MSG
            }
        );
        match parse_message(frame).unwrap() {
            Request::Msg {
                request_id,
                more_to_come,
                body: b,
                ..
            } => {
                assert_eq!(request_id, 5);
                assert!(!more_to_come);
                assert_eq!(b, body);
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn document_sequences_fold_into_the_body() {
        let mut sections = body_section(&doc! { "insert": "c", "$db": "d" });
        sections.extend(seq_section(
            "documents",
            &[doc! {"_id": 1}, doc! {"_id": 2}],
        ));
        let frame = msg_frame(FLAG_MORE_TO_COME, &sections, false);
        let Request::Msg {
            body, more_to_come, ..
        } = parse_message(&frame).unwrap()
        else {
            panic!()
        };
        assert!(more_to_come);
        assert_eq!(
            body,
            doc! { "insert": "c", "$db": "d", "documents": [{"_id": 1}, {"_id": 2}] }
        );
    }

    #[test]
    fn checksum_is_verified() {
        let sections = body_section(&doc! { "ping": 1 });
        let mut frame = msg_frame(FLAG_CHECKSUM, &sections, true);
        assert!(parse_message(&frame).is_ok());
        let last = frame.len() - 1;
        frame[last] ^= 0xff;
        assert!(matches!(
            parse_message(&frame),
            Err(WireError::Checksum { .. })
        ));
    }

    #[test]
    fn legacy_query_is_parsed_and_unwrapped() {
        let mut out = Vec::new();
        write_header(&mut out, 3, 0, OP_QUERY);
        out.extend_from_slice(&0i32.to_le_bytes());
        out.extend_from_slice(b"admin.$cmd\0");
        out.extend_from_slice(&0i32.to_le_bytes());
        out.extend_from_slice(&(-1i32).to_le_bytes());
        doc! { "$query": { "isMaster": 1 } }
            .to_writer(&mut out)
            .unwrap();
        patch_length(&mut out, 0);
        assert_eq!(
            parse_message(&out).unwrap(),
            Request::Query {
                request_id: 3,
                collection: "admin.$cmd".into(),
                query: doc! {"isMaster": 1}
            }
        );
    }

    #[test]
    fn op_reply_has_the_legacy_layout() {
        let mut out = Vec::new();
        encode_reply(&mut out, 1, 3, &doc! { "ok": 1 });
        assert_eq!(i32_at(&out, 0) as usize, out.len());
        assert_eq!(i32_at(&out, 12), OP_REPLY);
        assert_eq!(i32_at(&out, 32), 1); // numberReturned
        assert_eq!(Document::from_reader(&out[36..]).unwrap(), doc! { "ok": 1 });
    }

    #[test]
    fn bad_lengths_are_rejected() {
        let mut h = [0u8; 16];
        h[12..16].copy_from_slice(&OP_MSG.to_le_bytes());
        h[0..4].copy_from_slice(&8i32.to_le_bytes());
        assert_eq!(parse_header(&h), Err(WireError::BadLength(8)));
        h[0..4].copy_from_slice(&(MAX_MESSAGE_SIZE as i32 + 1).to_le_bytes());
        assert!(matches!(parse_header(&h), Err(WireError::BadLength(_))));
        h[0..4].copy_from_slice(&(-5i32).to_le_bytes());
        assert_eq!(parse_header(&h), Err(WireError::BadLength(-5)));
    }

    #[test]
    fn unknown_opcodes_are_rejected_and_compressed_ones_unwrapped_first() {
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&16i32.to_le_bytes());
        for op in [2005i32, 0] {
            h[12..16].copy_from_slice(&op.to_le_bytes());
            assert_eq!(parse_header(&h), Err(WireError::UnknownOpcode(op)));
        }
        // OP_COMPRESSED passes the header check; as a message it must be
        // unwrapped first.
        h[12..16].copy_from_slice(&OP_COMPRESSED.to_le_bytes());
        assert!(parse_header(&h).is_ok());
        let mut msg = Vec::new();
        encode_msg(&mut msg, 1, 0, &doc! { "ping": 1 });
        let packed = compress::compress(&msg, 3);
        assert_eq!(
            parse_message(&packed),
            Err(WireError::UnknownOpcode(OP_COMPRESSED))
        );
        let (plain, _) = compress::decompress(&packed).unwrap();
        assert!(parse_message(&plain).is_ok());
    }

    #[test]
    fn malformed_bodies_are_rejected() {
        // Bad BSON: a length that claims more bytes than the section has.
        let mut bad = body_section(&doc! { "ping": 1 });
        bad[1] = 200;
        assert!(matches!(
            parse_message(&msg_frame(0, &bad, false)),
            Err(WireError::Bson { .. })
        ));
        // Corrupt element type inside a well-sized document.
        let mut corrupt = body_section(&doc! { "ping": 1 });
        corrupt[5] = 0x77;
        assert!(matches!(
            parse_message(&msg_frame(0, &corrupt, false)),
            Err(WireError::Bson { .. })
        ));
        // Unknown section kind.
        assert_eq!(
            parse_message(&msg_frame(0, &[9, 0, 0], false)),
            Err(WireError::SectionKind(9))
        );
        // No body, two bodies.
        assert_eq!(
            parse_message(&msg_frame(0, &[], false)),
            Err(WireError::BodyCount(0))
        );
        let mut two = body_section(&doc! { "a": 1 });
        two.extend(body_section(&doc! { "b": 1 }));
        assert_eq!(
            parse_message(&msg_frame(0, &two, false)),
            Err(WireError::BodyCount(2))
        );
        // Unknown required flag bit.
        let ok = body_section(&doc! { "ping": 1 });
        assert_eq!(
            parse_message(&msg_frame(1 << 4, &ok, false)),
            Err(WireError::Flags(1 << 4))
        );
        // Truncated document sequence.
        let mut seq = body_section(&doc! { "insert": "c" });
        seq.extend([1, 100, 0, 0, 0, b'x']);
        assert_eq!(
            parse_message(&msg_frame(0, &seq, false)),
            Err(WireError::Truncated("document sequence"))
        );
        // Sequence colliding with a body field.
        let mut dup = body_section(&doc! { "documents": [] });
        dup.extend(seq_section("documents", &[doc! {}]));
        assert!(matches!(
            parse_message(&msg_frame(0, &dup, false)),
            Err(WireError::DuplicateSequence(_))
        ));
        // Frame shorter than its header says.
        let mut short = msg_frame(0, &ok, false);
        short.pop();
        assert_eq!(parse_message(&short), Err(WireError::Truncated("message")));
        // Flags cut off.
        let mut tiny = Vec::new();
        write_header(&mut tiny, 1, 0, OP_MSG);
        patch_length(&mut tiny, 0);
        assert_eq!(
            parse_message(&tiny),
            Err(WireError::Truncated("OP_MSG flags"))
        );
    }
}
