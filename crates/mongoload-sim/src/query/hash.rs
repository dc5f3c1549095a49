//! The hash of a hashed index and of a hashed shard key.

use bson::{Bson, Document};

/// The 64-bit hash of a value, as a hashed index and a hashed shard key
/// hold it: MongoDB's construction (MD5 of the value's type and bytes, the
/// first 8 bytes as a little-endian integer; numbers hashed by integer
/// value so 1, 1L and 1.0 agree), though not bit-identical to MongoDB's
/// values.
pub fn hash(v: &Bson) -> i64 {
    use md5::{Digest, Md5};
    let mut h = Md5::new();
    h.update(0i32.to_le_bytes());
    let integral = match v {
        Bson::Int32(i) => Some(i64::from(*i)),
        Bson::Int64(i) => Some(*i),
        Bson::Double(f) if f.fract() == 0.0 && f.abs() < 9.2e18 => Some(*f as i64),
        _ => None,
    };
    match integral {
        Some(i) => {
            h.update([0x12u8]);
            h.update(i.to_le_bytes());
        }
        None => {
            h.update([v.element_type() as u8]);
            let mut d = Document::new();
            d.insert("", v.clone());
            let mut bytes = Vec::new();
            d.to_writer(&mut bytes).expect("BSON to a Vec");
            h.update(&bytes);
        }
    }
    let out = h.finalize();
    i64::from_le_bytes(out[..8].try_into().expect("8 bytes"))
}
