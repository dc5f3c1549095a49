//! Weighted choice, the one way every kind draws what an operation does:
//! [`WeightedPick`] draws an index by relative weights with one `u32`
//! draw; [`Mix`] pairs it with what each index stands for.

use rand::Rng;

/// Picks an index by relative weights with one `u32` draw: the mix of
/// operations of a workload. Zero weights are never picked.
#[derive(Debug, Clone)]
pub struct WeightedPick {
    /// Cumulative thresholds over `u32` draws, one per weight.
    thresholds: Vec<u64>,
}

impl WeightedPick {
    /// `None` when no weight is positive (or one is negative or not finite).
    pub fn new(weights: &[f64]) -> Option<WeightedPick> {
        if weights.iter().any(|w| !(w.is_finite() && *w >= 0.0)) {
            return None;
        }
        let sum: f64 = weights.iter().sum();
        if sum <= 0.0 {
            return None;
        }
        let mut acc = 0.0;
        let mut thresholds: Vec<u64> = weights
            .iter()
            .map(|w| {
                acc += w;
                ((acc / sum) * (1u64 << 32) as f64) as u64
            })
            .collect();
        // Rounding must not leave a gap at the top (nor pick a trailing
        // zero weight).
        if let Some(last) = weights.iter().rposition(|w| *w > 0.0) {
            for t in &mut thresholds[last..] {
                *t = 1u64 << 32;
            }
        }
        Some(WeightedPick { thresholds })
    }

    /// An index in `0..weights.len()` with probability ∝ its weight.
    pub fn pick(&self, rng: &mut impl Rng) -> usize {
        let draw = rng.random::<u32>() as u64;
        self.thresholds
            .iter()
            .position(|&t| draw < t)
            .unwrap_or(self.thresholds.len() - 1)
    }
}

/// A weighted choice among items (what an operation of each `op` index
/// does). An item of weight 0 is never drawn.
#[derive(Debug, Clone)]
pub struct Mix<T> {
    items: Vec<T>,
    pick: WeightedPick,
}

impl<T> Mix<T> {
    /// Every item, drawn by its weight; `None` when no weight is positive
    /// (or one is negative or not finite).
    pub fn new(weighted: impl IntoIterator<Item = (T, f64)>) -> Option<Mix<T>> {
        let (items, weights): (Vec<T>, Vec<f64>) = weighted.into_iter().unzip();
        Some(Mix {
            pick: WeightedPick::new(&weights)?,
            items,
        })
    }

    /// Only the items of positive weight, in order: an op list without
    /// the operations a workload never runs.
    pub fn positive(weighted: impl IntoIterator<Item = (T, f64)>) -> Option<Mix<T>> {
        Mix::new(weighted.into_iter().filter(|(_, w)| *w > 0.0))
    }

    /// The items, in index order.
    pub fn items(&self) -> &[T] {
        &self.items
    }

    /// Draws an item: its index (the operation's `op`) and the item.
    #[inline]
    pub fn draw(&self, rng: &mut impl Rng) -> (usize, &T) {
        let i = self.pick.pick(rng);
        (i, &self.items[i])
    }

    /// As [`Mix::draw`], for items that change as they are used.
    #[inline]
    pub fn draw_mut(&mut self, rng: &mut impl Rng) -> (usize, &mut T) {
        let i = self.pick.pick(rng);
        (i, &mut self.items[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::generators;

    #[test]
    fn weighted_pick_follows_the_weights_and_skips_zeros() {
        let p = WeightedPick::new(&[1.0, 0.0, 3.0, 0.0]).unwrap();
        let mut rng = generators::worker_rng(1, 0);
        let mut counts = [0u32; 4];
        for _ in 0..40_000 {
            counts[p.pick(&mut rng)] += 1;
        }
        assert_eq!((counts[1], counts[3]), (0, 0), "{counts:?}");
        let share = counts[2] as f64 / 40_000.0;
        assert!((share - 0.75).abs() < 0.02, "{counts:?}");
        assert!(WeightedPick::new(&[0.0, 0.0]).is_none());
        assert!(WeightedPick::new(&[1.0, f64::NAN]).is_none());
        assert!(WeightedPick::new(&[-1.0, 2.0]).is_none());
    }

    #[test]
    fn a_mix_of_positive_weights_drops_the_zeros() {
        let m = Mix::positive([("a", 0.0), ("b", 1.0), ("c", 0.0), ("d", 1.0)]).unwrap();
        assert_eq!(m.items(), ["b", "d"]);
        let mut rng = generators::worker_rng(1, 0);
        let (i, item) = m.draw(&mut rng);
        assert_eq!(m.items()[i], *item);
        assert!(Mix::positive([("a", 0.0)]).is_none());
        assert_eq!(Mix::new([("a", 0.0), ("b", 2.0)]).unwrap().items().len(), 2);
    }
}
