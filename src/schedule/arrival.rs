//! The arrival process of an open-loop stage: `uniform` (operation `i` at
//! the instant the rate's integral reaches `i`, evenly spaced) or
//! `poisson` (a Poisson process with the same rate: exponential gaps of
//! the same mean, bursts and lulls as independent clients make).
//!
//! A Poisson stage is one seeded draw of a (possibly non-homogeneous)
//! Poisson process, read by the operation's index without walking the
//! operations before it: in *mass* space (the rate's integral, where the
//! process has unit rate) the stage is `[0, M)` holding `N ~ Poisson(M)`
//! points; each interval is halved, its left half holding
//! `Binomial(n, 1/2)` of its `n` points, until at most [`LEAF`] remain,
//! which lie uniformly in their interval. Every draw comes from a
//! generator seeded by the stage's seed and the interval's place in the
//! tree, so the same seed gives the same arrivals in any order of asking,
//! and the offset of operation `i` costs about `log2(N / LEAF)` draws.
//! The engine maps a point's mass back to a time with the shape's inverse
//! integral (a hold's `x / rate`), as for uniform arrivals.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Binomial, Distribution, Poisson};

/// Points in an interval that are drawn directly instead of halving it.
pub(crate) const LEAF: u64 = 16;

/// Halvings at most (an interval of 2^-48 of the stage's mass).
const MAX_DEPTH: u32 = 48;

/// How an open-loop stage spaces its operations (`arrival` in the config).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Arrival {
    /// Evenly spaced at the scheduled rate (the default).
    #[default]
    Uniform,
    /// A Poisson process at the scheduled rate, drawn from this seed.
    Poisson { seed: u64 },
}

impl Arrival {
    /// The config's word: `uniform` or `poisson`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Arrival::Uniform => "uniform",
            Arrival::Poisson { .. } => "poisson",
        }
    }
}

/// One draw of a Poisson process with unit rate on `[0, mass)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PoissonPoints {
    seed: u64,
    mass: f64,
    count: u64,
}

/// One interval of the tree: `[lo, hi)` in mass, `n` points, its place.
#[derive(Clone, Copy)]
struct Node {
    lo: f64,
    hi: f64,
    n: u64,
    depth: u32,
    /// Heap numbering: the root is 1, the children of `k` are 2k, 2k + 1.
    id: u64,
}

impl PoissonPoints {
    /// Draws how many points `[0, mass)` holds (`mass` ≥ 0, finite).
    pub fn new(seed: u64, mass: f64) -> PoissonPoints {
        let count = if mass > 0.0 && mass.is_finite() {
            let mut rng = node_rng(seed, 0, 0);
            Poisson::new(mass).map_or(0, |p| p.sample(&mut rng) as u64)
        } else {
            0
        };
        PoissonPoints { seed, mass, count }
    }

    /// How many points the stage holds (its operations).
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The expected count: the stage's rate integrated over its duration.
    pub fn mass(&self) -> f64 {
        self.mass
    }

    /// The mass of point `i` (0-based, increasing in `i`), `None` past the
    /// last.
    pub fn position(&self, mut i: u64) -> Option<f64> {
        if i >= self.count {
            return None;
        }
        let mut node = self.root();
        while let Some((left, right)) = self.split(node) {
            if i < left.n {
                node = left;
            } else {
                i -= left.n;
                node = right;
            }
        }
        let mut leaf = self.leaf(node);
        let (_, p, _) = leaf.select_nth_unstable_by(i as usize, f64::total_cmp);
        Some(*p)
    }

    /// How many points lie at or below mass `x`.
    pub fn count_upto(&self, x: f64) -> u64 {
        let mut below = 0;
        let mut node = self.root();
        loop {
            if x < node.lo {
                return below;
            }
            if x >= node.hi {
                return below + node.n;
            }
            match self.split(node) {
                Some((left, right)) => {
                    if x < right.lo {
                        node = left;
                    } else {
                        below += left.n;
                        node = right;
                    }
                }
                None => return below + self.leaf(node).iter().filter(|&&p| p <= x).count() as u64,
            }
        }
    }

    fn root(&self) -> Node {
        Node {
            lo: 0.0,
            hi: self.mass,
            n: self.count,
            depth: 0,
            id: 1,
        }
    }

    /// The two halves of `node` with their counts, or `None` for a leaf.
    fn split(&self, node: Node) -> Option<(Node, Node)> {
        if node.n <= LEAF || node.depth >= MAX_DEPTH {
            return None;
        }
        let mid = node.lo + (node.hi - node.lo) / 2.0;
        let mut rng = node_rng(self.seed, node.depth + 1, node.id);
        let left_n = Binomial::new(node.n, 0.5).map_or(node.n / 2, |b| b.sample(&mut rng));
        let child = |lo, hi, n, id| Node {
            lo,
            hi,
            n,
            depth: node.depth + 1,
            id,
        };
        Some((
            child(node.lo, mid, left_n, node.id * 2),
            child(mid, node.hi, node.n - left_n, node.id * 2 + 1),
        ))
    }

    /// A leaf's points, uniform in its interval (unsorted).
    fn leaf(&self, node: Node) -> Vec<f64> {
        let mut rng = node_rng(self.seed ^ 0x6c65_6166, node.depth, node.id);
        (0..node.n)
            .map(|_| node.lo + (node.hi - node.lo) * rng.random::<f64>())
            .collect()
    }
}

/// The generator of one interval of the tree.
fn node_rng(seed: u64, depth: u32, id: u64) -> SmallRng {
    // SplitMix64's finaliser spreads neighbouring ids over the whole state.
    let mut z = seed ^ id.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (u64::from(depth) << 56);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    SmallRng::seed_from_u64(z ^ (z >> 31))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_increase_and_count_upto_inverts_them() {
        let p = PoissonPoints::new(3, 5000.0);
        let n = p.count();
        assert!(n > 4000 && n < 6000, "{n}");
        let all: Vec<f64> = (0..n).map(|i| p.position(i).unwrap()).collect();
        assert!(all.windows(2).all(|w| w[0] <= w[1]));
        assert!(all.iter().all(|&x| (0.0..5000.0).contains(&x)));
        assert_eq!(p.position(n), None);
        for (i, &x) in all.iter().enumerate().step_by(97) {
            assert!(p.count_upto(x) > i as u64);
            assert!(p.count_upto(x - 1e-9) <= i as u64);
        }
        assert_eq!(p.count_upto(-1.0), 0);
        assert_eq!(p.count_upto(5000.0), n);
    }

    #[test]
    fn the_same_seed_gives_the_same_points_another_seed_others() {
        let (a, b, c) = (
            PoissonPoints::new(1, 1e6),
            PoissonPoints::new(1, 1e6),
            PoissonPoints::new(2, 1e6),
        );
        assert_eq!(a, b);
        let first = |p: &PoissonPoints| (0..50).map(|i| p.position(i * 997)).collect::<Vec<_>>();
        assert_eq!(first(&a), first(&b));
        assert_ne!(first(&a), first(&c));
    }

    #[test]
    fn counts_over_many_seeds_are_poisson() {
        // Mean and variance both ≈ the mass (a fixed count would have
        // variance 0), and the count in the first tenth ≈ a tenth.
        let mass = 400.0;
        let seeds = 2000;
        let (counts, tenths): (Vec<f64>, Vec<f64>) = (0..seeds)
            .map(|s| {
                let p = PoissonPoints::new(s, mass);
                (p.count() as f64, p.count_upto(mass / 10.0) as f64)
            })
            .unzip();
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let var = |v: &[f64]| {
            let m = mean(v);
            v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (v.len() - 1) as f64
        };
        // Standard error of the mean: sqrt(400 / 2000) = 0.45.
        assert!((mean(&counts) - mass).abs() < 2.0, "{}", mean(&counts));
        assert!((var(&counts) / mass - 1.0).abs() < 0.12, "{}", var(&counts));
        assert!((mean(&tenths) - 40.0).abs() < 0.6, "{}", mean(&tenths));
        assert!((var(&tenths) / 40.0 - 1.0).abs() < 0.12, "{}", var(&tenths));
    }
}
