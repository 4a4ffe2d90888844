//! Percentile summaries of latency samples (milliseconds).

use serde::Serialize;

/// p50 / p90 / p99 / max (and friends) of one set of samples, in milliseconds.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Summary {
    /// Number of samples.
    pub n: usize,
    /// Smallest sample.
    pub min: f64,
    /// Median (nearest rank).
    pub p50: f64,
    /// 90th percentile (nearest rank).
    pub p90: f64,
    /// 99th percentile (nearest rank).
    pub p99: f64,
    /// Largest sample.
    pub max: f64,
    /// Arithmetic mean.
    pub mean: f64,
}

/// Nearest-rank percentile of an ascending slice: the smallest sample such that at least
/// `q` of the samples are ≤ it. `q` in `[0, 1]`; NaN for an empty slice.
#[must_use]
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let n = sorted.len();
    let rank = (q.clamp(0.0, 1.0) * n as f64).ceil() as usize;
    sorted[rank.clamp(1, n) - 1]
}

/// Sorts a copy of the samples ascending (NaNs last).
#[must_use]
pub fn sorted(samples: &[f64]) -> Vec<f64> {
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

impl Summary {
    /// Summarises `samples` (any order). `None` when there are none.
    #[must_use]
    pub fn of(samples: &[f64]) -> Option<Summary> {
        if samples.is_empty() {
            return None;
        }
        let s = sorted(samples);
        Some(Summary {
            n: s.len(),
            min: s[0],
            p50: percentile(&s, 0.50),
            p90: percentile(&s, 0.90),
            p99: percentile(&s, 0.99),
            max: s[s.len() - 1],
            mean: s.iter().sum::<f64>() / s.len() as f64,
        })
    }
}

/// Median of a slice (nearest rank), NaN when empty.
#[must_use]
pub fn median(samples: &[f64]) -> f64 {
    percentile(&sorted(samples), 0.5)
}

/// Rounds to 3 decimals (microsecond resolution for milliseconds) for reports.
#[must_use]
pub fn r3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// xorshift64*: a deterministic shuffle, seeded from the command line.
pub struct Rng(pub u64);

impl Rng {
    /// The next pseudo-random number.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Shuffles `v` in place (Fisher–Yates).
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = (self.next_u64() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), 50.0);
        assert_eq!(percentile(&v, 0.9), 90.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(percentile(&v, 1.0), 100.0);
        assert_eq!(percentile(&v, 0.0), 1.0);
        assert!(percentile(&[], 0.5).is_nan());
        assert_eq!(percentile(&[7.0], 0.99), 7.0);
    }

    #[test]
    fn summary_is_order_independent() {
        let a = Summary::of(&[3.0, 1.0, 2.0, 10.0]).unwrap();
        let b = Summary::of(&[10.0, 2.0, 1.0, 3.0]).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.min, 1.0);
        assert_eq!(a.max, 10.0);
        assert_eq!(a.p50, 2.0);
        assert_eq!(a.mean, 4.0);
        assert!(Summary::of(&[]).is_none());
    }

    #[test]
    fn rounding() {
        assert_eq!(r3(1.23456), 1.235);
        assert_eq!(median(&[5.0, 1.0, 3.0]), 3.0);
    }
}
