//! OP_COMPRESSED (opcode 2012): the compressors the simulator offers in
//! its `hello` reply (those of the client's `compression` list it knows,
//! in the client's order of preference), and the unwrapping and wrapping
//! of compressed frames. A request that came compressed is answered with
//! the same compressor, as mongod does. Pure functions on byte slices.

use std::io::{Read, Write};

use bson::Bson;

use super::{HEADER_LEN, MAX_MESSAGE_SIZE, OP_COMPRESSED};

/// The compressors the simulator speaks, by their wire names.
pub const SUPPORTED: [&str; 3] = ["snappy", "zlib", "zstd"];

/// A compressor's id on the wire (`noop` is 0).
pub fn id_of(name: &str) -> Option<u8> {
    match name {
        "noop" => Some(0),
        "snappy" => Some(1),
        "zlib" => Some(2),
        "zstd" => Some(3),
        _ => None,
    }
}

/// What the `hello` reply's `compression` says: the client's offered
/// names this simulator speaks, in the client's order.
pub fn negotiate(offered: &[Bson]) -> Vec<String> {
    offered
        .iter()
        .filter_map(Bson::as_str)
        .filter(|n| SUPPORTED.contains(n))
        .map(str::to_owned)
        .collect()
}

/// Why a compressed frame was refused.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CompressError {
    #[error("truncated OP_COMPRESSED header")]
    Truncated,
    #[error("OP_COMPRESSED with unknown compressor id {0}")]
    Unknown(u8),
    #[error("OP_COMPRESSED uncompressed size {0} is out of range")]
    Size(i64),
    #[error("OP_COMPRESSED does not decompress ({0})")]
    Corrupt(String),
    #[error("OP_COMPRESSED of a compressed message")]
    Nested,
}

/// Unwraps an OP_COMPRESSED frame (header included): the original message
/// as a whole frame (its header's length and opcode restored, request ids
/// kept) and the compressor's id.
pub fn decompress(frame: &[u8]) -> Result<(Vec<u8>, u8), CompressError> {
    const FIXED: usize = HEADER_LEN + 9;
    if frame.len() < FIXED {
        return Err(CompressError::Truncated);
    }
    let i32_at = |at: usize| i32::from_le_bytes(frame[at..at + 4].try_into().unwrap());
    let original_op = i32_at(HEADER_LEN);
    let size = i32_at(HEADER_LEN + 4);
    let id = frame[HEADER_LEN + 8];
    if original_op == OP_COMPRESSED {
        return Err(CompressError::Nested);
    }
    if size < 0 || size as usize + HEADER_LEN > MAX_MESSAGE_SIZE {
        return Err(CompressError::Size(size.into()));
    }
    let size = size as usize;
    let data = &frame[FIXED..];
    let body = match id {
        0 => data.to_vec(),
        1 => snap::raw::Decoder::new()
            .decompress_vec(data)
            .map_err(|e| CompressError::Corrupt(e.to_string()))?,
        2 => {
            let mut out = Vec::with_capacity(size);
            flate2::read::ZlibDecoder::new(data)
                .take(size as u64 + 1)
                .read_to_end(&mut out)
                .map_err(|e| CompressError::Corrupt(e.to_string()))?;
            out
        }
        3 => {
            zstd::bulk::decompress(data, size).map_err(|e| CompressError::Corrupt(e.to_string()))?
        }
        other => return Err(CompressError::Unknown(other)),
    };
    if body.len() != size {
        return Err(CompressError::Corrupt(format!(
            "{} bytes, the header says {size}",
            body.len()
        )));
    }
    let mut out = Vec::with_capacity(HEADER_LEN + size);
    out.extend_from_slice(&((HEADER_LEN + size) as i32).to_le_bytes());
    out.extend_from_slice(&frame[4..12]);
    out.extend_from_slice(&original_op.to_le_bytes());
    out.extend_from_slice(&body);
    Ok((out, id))
}

/// Wraps an encoded message (a whole frame) in OP_COMPRESSED with the
/// compressor `id` (as [`id_of`] names them), request ids kept.
pub fn compress(message: &[u8], id: u8) -> Vec<u8> {
    let body = &message[HEADER_LEN..];
    let packed = match id {
        1 => snap::raw::Encoder::new()
            .compress_vec(body)
            .expect("snappy compresses any input"),
        2 => {
            let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
            z.write_all(body).expect("writing to a Vec");
            z.finish().expect("writing to a Vec")
        }
        3 => zstd::bulk::compress(body, 0).expect("zstd compresses any input"),
        _ => body.to_vec(),
    };
    let id = if id <= 3 { id } else { 0 };
    let mut out = Vec::with_capacity(HEADER_LEN + 9 + packed.len());
    out.extend_from_slice(&((HEADER_LEN + 9 + packed.len()) as i32).to_le_bytes());
    out.extend_from_slice(&message[4..12]);
    out.extend_from_slice(&OP_COMPRESSED.to_le_bytes());
    out.extend_from_slice(&message[12..16]);
    out.extend_from_slice(&(body.len() as i32).to_le_bytes());
    out.push(id);
    out.extend_from_slice(&packed);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn every_compressor_round_trips_a_message() {
        let mut msg = Vec::new();
        crate::wire::encode_msg(&mut msg, 7, 3, &doc! { "ok": 1, "pad": "x".repeat(5000) });
        for name in SUPPORTED.iter().chain(&["noop"]) {
            let id = id_of(name).unwrap();
            let packed = compress(&msg, id);
            assert_eq!(&packed[12..16], &OP_COMPRESSED.to_le_bytes(), "{name}");
            if *name != "noop" {
                assert!(packed.len() < msg.len() / 4, "{name} compresses padding");
            }
            let (back, got) = decompress(&packed).unwrap();
            assert_eq!((back, got), (msg.clone(), id), "{name}");
        }
    }

    #[test]
    fn bad_frames_are_refused() {
        let mut msg = Vec::new();
        crate::wire::encode_msg(&mut msg, 1, 0, &doc! { "ok": 1 });
        let mut packed = compress(&msg, 3);
        assert_eq!(decompress(&packed[..20]), Err(CompressError::Truncated));
        packed[HEADER_LEN + 8] = 9;
        assert_eq!(decompress(&packed), Err(CompressError::Unknown(9)));
        let mut lying = compress(&msg, 1);
        lying[HEADER_LEN + 4..HEADER_LEN + 8].copy_from_slice(&1000i32.to_le_bytes());
        assert!(matches!(decompress(&lying), Err(CompressError::Corrupt(_))));
    }

    #[test]
    fn negotiation_keeps_the_clients_order_and_drops_the_unknown() {
        let offered = vec![Bson::from("zstd"), Bson::from("lz4"), Bson::from("snappy")];
        assert_eq!(negotiate(&offered), vec!["zstd", "snappy"]);
        assert!(negotiate(&[]).is_empty());
    }
}
