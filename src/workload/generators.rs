//! Key and value generators shared by the workloads, deterministic for a
//! seed: uniform, sequential, zipfian (YCSB's generator, theta 0.99, and its
//! scrambled variant), latest; and random ASCII padding.
//!
//! Generators hold no RNG: each worker owns a [`SmallRng`] (from
//! [`worker_rng`]) and passes it in, so workers share nothing on the hot
//! path.

use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};
use serde::Deserialize;

/// YCSB's default zipfian constant.
pub(crate) const ZIPFIAN_THETA: f64 = 0.99;

/// Item count of YCSB's scrambled zipfian, and its precomputed zeta for
/// theta 0.99 (`ScrambledZipfianGenerator.ZETAN`), so building one is O(1).
const SCRAMBLED_ITEMS: u64 = 10_000_000_000;
const SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;

/// A per-worker RNG: the same (seed, worker) always gives the same stream,
/// and different workers get unrelated streams.
pub(crate) fn worker_rng(seed: u64, worker_id: u32) -> SmallRng {
    SmallRng::seed_from_u64(splitmix64(seed ^ splitmix64(worker_id as u64 + 1)))
}

/// The RNG of loaded document number `i`: it depends only on (seed, i), so
/// a resumed prepare writes exactly what an uninterrupted one would have.
pub(crate) fn document_rng(seed: u64, i: u64) -> SmallRng {
    SmallRng::seed_from_u64(splitmix64(seed ^ i))
}

/// SplitMix64 finaliser: a cheap, well-mixed hash of a u64.
pub(crate) fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// 64-bit FNV-1a over the bytes of `v`, as YCSB scrambles keys.
pub(crate) fn fnv1a64(v: u64) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for b in v.to_le_bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    h
}

/// How keys are chosen among `n` existing ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeyDist {
    /// Every key equally likely.
    Uniform,
    /// 0, 1, 2, … wrapping at n (per worker).
    Sequential,
    /// Zipfian with theta 0.99: low keys are hot.
    Zipfian,
    /// Zipfian popularity spread over the key space by hashing (YCSB's
    /// default request distribution).
    ScrambledZipfian,
    /// Zipfian over recency: the newest keys are hot (YCSB workload D).
    Latest,
}

/// YCSB's `ZipfianGenerator`: item `i` (0-based) drawn with probability
/// ∝ 1/(i+1)^theta, in O(1) per draw after an O(n) zeta computation that is
/// extended incrementally when the item count grows.
#[derive(Debug, Clone)]
pub(crate) struct Zipfian {
    items: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    half_pow_theta: f64,
    zeta2: f64,
}

fn zeta_range(from: u64, to: u64, theta: f64) -> f64 {
    (from..to).map(|i| 1.0 / ((i + 1) as f64).powf(theta)).sum()
}

impl Zipfian {
    /// A zipfian over `items` (≥ 1) items with theta 0.99.
    pub(crate) fn new(items: u64) -> Zipfian {
        Zipfian::with_theta(items, ZIPFIAN_THETA)
    }

    /// A zipfian with another theta in (0, 1).
    pub(crate) fn with_theta(items: u64, theta: f64) -> Zipfian {
        let items = items.max(1);
        let zetan = zeta_range(0, items, theta);
        Zipfian::from_zeta(items, theta, zetan)
    }

    fn from_zeta(items: u64, theta: f64, zetan: f64) -> Zipfian {
        let zeta2 = zeta_range(0, 2, theta);
        let mut z = Zipfian {
            items,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta: 0.0,
            half_pow_theta: 0.5f64.powf(theta),
            zeta2,
        };
        z.eta = z.compute_eta();
        z
    }

    fn compute_eta(&self) -> f64 {
        (1.0 - (2.0 / self.items as f64).powf(1.0 - self.theta)) / (1.0 - self.zeta2 / self.zetan)
    }

    /// The number of items.
    #[cfg(test)]
    pub(crate) fn items(&self) -> u64 {
        self.items
    }

    /// Grows the item count, extending zeta incrementally (O(growth)).
    /// Shrinking is ignored: draws above a smaller bound are folded by the
    /// caller.
    pub(crate) fn grow_to(&mut self, items: u64) {
        if items > self.items {
            self.zetan += zeta_range(self.items, items, self.theta);
            self.items = items;
            self.eta = self.compute_eta();
        }
    }

    /// One draw in `[0, items)`; 0 is the most popular item.
    pub(crate) fn sample(&self, rng: &mut impl Rng) -> u64 {
        let u: f64 = rng.random();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + self.half_pow_theta {
            return 1.min(self.items - 1);
        }
        let v = self.items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha);
        (v as u64).min(self.items - 1)
    }
}

/// YCSB's `ScrambledZipfianGenerator`: zipfian popularity over 10¹⁰ items,
/// hashed into `[0, n)` so the hot keys are spread over the key space.
#[derive(Debug, Clone)]
pub(crate) struct ScrambledZipfian {
    inner: Zipfian,
}

impl Default for ScrambledZipfian {
    fn default() -> Self {
        ScrambledZipfian::new()
    }
}

impl ScrambledZipfian {
    /// Built in O(1) from YCSB's precomputed constant.
    pub(crate) fn new() -> ScrambledZipfian {
        ScrambledZipfian {
            inner: Zipfian::from_zeta(SCRAMBLED_ITEMS, ZIPFIAN_THETA, SCRAMBLED_ZETAN),
        }
    }

    /// One draw in `[0, n)` (n ≥ 1).
    pub(crate) fn sample(&self, rng: &mut impl Rng, n: u64) -> u64 {
        fnv1a64(self.inner.sample(rng)) % n.max(1)
    }
}

/// A key chooser over a key space `[0, n)` that may grow between calls
/// (inserts add keys). One per worker.
#[derive(Debug, Clone)]
pub(crate) enum KeyGen {
    /// Uniform over `[0, n)`.
    Uniform,
    /// The next key in order, wrapping at `n`.
    Sequential { next: u64 },
    /// Zipfian: key 0 hottest.
    Zipfian(Zipfian),
    /// Zipfian spread by hashing.
    ScrambledZipfian(ScrambledZipfian),
    /// Zipfian over recency: `n - 1` hottest.
    Latest(Zipfian),
}

impl KeyGen {
    /// A chooser for `dist` over an initial key space of `n` keys. Zipfian
    /// kinds compute zeta(n) here (O(n)); build once and clone per worker.
    pub(crate) fn new(dist: KeyDist, n: u64) -> KeyGen {
        match dist {
            KeyDist::Uniform => KeyGen::Uniform,
            KeyDist::Sequential => KeyGen::Sequential { next: 0 },
            KeyDist::Zipfian => KeyGen::Zipfian(Zipfian::new(n)),
            KeyDist::ScrambledZipfian => KeyGen::ScrambledZipfian(ScrambledZipfian::new()),
            KeyDist::Latest => KeyGen::Latest(Zipfian::new(n)),
        }
    }

    /// A key in `[0, n)`; 0 when `n` is 0.
    pub(crate) fn next_key(&mut self, rng: &mut impl Rng, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        match self {
            KeyGen::Uniform => rng.random_range(0..n),
            KeyGen::Sequential { next } => {
                let k = *next % n;
                *next = k + 1;
                k
            }
            KeyGen::Zipfian(z) => {
                z.grow_to(n);
                z.sample(rng) % n
            }
            KeyGen::ScrambledZipfian(z) => z.sample(rng, n),
            KeyGen::Latest(z) => {
                z.grow_to(n);
                n - 1 - (z.sample(rng) % n)
            }
        }
    }
}

/// Alphabet of random padding: 64 URL-safe characters, so 6 random bits per
/// byte and one `u64` gives 10 bytes.
const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Appends `len` random ASCII characters to `buf`.
pub(crate) fn fill_ascii(rng: &mut impl RngCore, buf: &mut Vec<u8>, len: usize) {
    buf.reserve(len);
    let mut left = len;
    while left > 0 {
        let mut bits = rng.next_u64();
        let take = left.min(10);
        for _ in 0..take {
            buf.push(ALPHABET[(bits & 63) as usize]);
            bits >>= 6;
        }
        left -= take;
    }
}

/// A random ASCII string of `len` characters.
pub(crate) fn random_ascii(rng: &mut impl RngCore, len: usize) -> String {
    let mut v = Vec::with_capacity(len);
    fill_ascii(rng, &mut v, len);
    // Only ALPHABET bytes were pushed: always valid UTF-8.
    String::from_utf8(v).unwrap_or_default()
}

/// A shared pool of random ASCII from which padding is cut at a random
/// offset: one `memcpy` per document instead of drawing every byte, and no
/// per-worker buffer. Padding from one pool repeats across documents only
/// at the pool's scale (1 MiB by default), far beyond a compressor's window
/// for documents up to a few hundred KB.
#[derive(Debug, Clone)]
pub(crate) struct PadPool {
    bytes: Arc<str>,
}

impl PadPool {
    /// Default pool size.
    pub(crate) const DEFAULT_SIZE: usize = 1 << 20;

    /// A pool of `size` random characters drawn from `seed`.
    pub(crate) fn new(seed: u64, size: usize) -> PadPool {
        let mut rng = SmallRng::seed_from_u64(splitmix64(seed ^ 0x5041_4450_4f4f_4c00));
        PadPool {
            bytes: Arc::from(random_ascii(&mut rng, size.max(1))),
        }
    }

    /// `len` characters starting at a random offset (wrapping around the
    /// pool, repeating it when `len` exceeds its size).
    pub(crate) fn pad(&self, rng: &mut impl Rng, len: usize) -> String {
        let pool = &*self.bytes;
        let mut out = String::with_capacity(len);
        let mut at = rng.random_range(0..pool.len());
        while out.len() < len {
            let take = (len - out.len()).min(pool.len() - at);
            out.push_str(&pool[at..at + take]);
            at = 0;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream() {
        let a: Vec<u64> = (0..5).map(|_| worker_rng(7, 3).next_u64()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        let mut r1 = worker_rng(7, 3);
        let mut r2 = worker_rng(7, 4);
        assert_ne!(r1.next_u64(), r2.next_u64());
    }

    #[test]
    fn uniform_spreads_evenly() {
        let mut rng = worker_rng(1, 0);
        let mut g = KeyGen::new(KeyDist::Uniform, 100);
        let mut counts = [0u32; 10];
        let draws = 100_000;
        for _ in 0..draws {
            let k = g.next_key(&mut rng, 100);
            assert!(k < 100);
            counts[(k / 10) as usize] += 1;
        }
        // Each decile within 5 % of its expected 10 000.
        for c in counts {
            assert!((9_500..=10_500).contains(&c), "{counts:?}");
        }
    }

    #[test]
    fn sequential_wraps() {
        let mut rng = worker_rng(1, 0);
        let mut g = KeyGen::new(KeyDist::Sequential, 3);
        let ks: Vec<u64> = (0..7).map(|_| g.next_key(&mut rng, 3)).collect();
        assert_eq!(ks, vec![0, 1, 2, 0, 1, 2, 0]);
    }

    /// Share of draws that hit the hottest 1 % of `n` keys.
    fn top_share(z: &Zipfian, n: u64, draws: u32) -> f64 {
        let mut rng = worker_rng(2, 0);
        let top = n / 100;
        let hits = (0..draws).filter(|_| z.sample(&mut rng) < top).count();
        hits as f64 / draws as f64
    }

    #[test]
    fn zipfian_is_skewed_as_theory_says() {
        let n = 100_000;
        let z = Zipfian::new(n);
        // Expected share of the top 1 %: zeta(1000) / zeta(100 000).
        let expect = zeta_range(0, n / 100, ZIPFIAN_THETA) / zeta_range(0, n, ZIPFIAN_THETA);
        let got = top_share(&z, n, 200_000);
        assert!(
            expect > 0.5,
            "theta 0.99 puts most weight on the top 1 %: {expect}"
        );
        assert!((got - expect).abs() < 0.02, "got {got}, expected {expect}");
        // Item 0 is the single most popular: p = 1 / zeta(n).
        let mut rng = worker_rng(3, 0);
        let zeros = (0..200_000).filter(|_| z.sample(&mut rng) == 0).count() as f64 / 200_000.0;
        let p0 = 1.0 / zeta_range(0, n, ZIPFIAN_THETA);
        assert!((zeros - p0).abs() < 0.01, "p0 {zeros} vs {p0}");
    }

    #[test]
    fn zipfian_grows_incrementally_like_a_fresh_one() {
        let mut z = Zipfian::new(1_000);
        z.grow_to(50_000);
        let fresh = Zipfian::new(50_000);
        assert!((z.zetan - fresh.zetan).abs() < 1e-9);
        assert!((z.eta - fresh.eta).abs() < 1e-12);
        assert_eq!(z.items(), 50_000);
    }

    #[test]
    fn scrambled_zipfian_spreads_the_hot_keys() {
        let z = ScrambledZipfian::new();
        let mut rng = worker_rng(4, 0);
        let n = 10_000u64;
        let mut counts = vec![0u32; n as usize];
        for _ in 0..200_000 {
            counts[z.sample(&mut rng, n) as usize] += 1;
        }
        // Skewed: the hottest 1 % of keys take far more than 1 % of draws…
        let mut sorted = counts.clone();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        let top: u32 = sorted[..100].iter().sum();
        assert!(
            top as f64 / 200_000.0 > 0.2,
            "top 1 % share {}",
            top as f64 / 200_000.0
        );
        // …but they are not the low keys.
        let low: u32 = counts[..100].iter().sum();
        assert!((low as f64 / 200_000.0) < 0.1);
    }

    #[test]
    fn latest_favours_recent_keys() {
        let mut g = KeyGen::new(KeyDist::Latest, 1_000);
        let mut rng = worker_rng(5, 0);
        let n = 2_000;
        let recent = (0..50_000)
            .filter(|_| g.next_key(&mut rng, n) >= n - 20)
            .count();
        // The newest 1 % take what the hottest 1 % of a zipfian take.
        let share = recent as f64 / 50_000.0;
        let expect = zeta_range(0, 20, ZIPFIAN_THETA) / zeta_range(0, n, ZIPFIAN_THETA);
        assert!((share - expect).abs() < 0.02, "{share} vs {expect}");
    }

    #[test]
    fn ascii_padding_has_the_length_and_alphabet() {
        let mut rng = worker_rng(6, 0);
        let s = random_ascii(&mut rng, 1_003);
        assert_eq!(s.len(), 1_003);
        assert!(s.bytes().all(|b| ALPHABET.contains(&b)));
        // All 64 characters show up: the bits are really random.
        let distinct: std::collections::HashSet<u8> = s.bytes().collect();
        assert_eq!(distinct.len(), 64);

        let pool = PadPool::new(9, 4096);
        for len in [0, 1, 100, 4096, 10_000] {
            let p = pool.pad(&mut rng, len);
            assert_eq!(p.len(), len);
        }
        assert_ne!(pool.pad(&mut rng, 64), pool.pad(&mut rng, 64));
    }
}
