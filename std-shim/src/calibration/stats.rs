//! What every calibration reports: signed percent errors, their mean
//! absolute value (MAPE), the worst point, an even subsample of a table,
//! and the progress callback the parallel runs call.

/// A progress callback: `(points done, points in all)`, called from worker
/// threads in completion order.
pub type ProgressFn<'a> = &'a (dyn Fn(usize, usize) + Sync);

/// Signed relative error in percent: `(simulated - measured) / measured * 100`.
pub fn error_percent(measured: f64, simulated: f64) -> f64 {
    (simulated - measured) / measured * 100.0
}

/// Mean absolute percentage error of signed percent errors; `None` when empty.
pub fn mape(errors: &[f64]) -> Option<f64> {
    if errors.is_empty() {
        None
    } else {
        Some(errors.iter().map(|e| e.abs()).sum::<f64>() / errors.len() as f64)
    }
}

/// Indices of `k` of `len` items spread evenly, always keeping the first
/// and the last (for `k >= 2`); all of them when `k >= len`; the first
/// alone for `k == 1`; none for `k == 0`.
pub fn subsample(len: usize, k: usize) -> Vec<usize> {
    if k >= len {
        return (0..len).collect();
    }
    match k {
        0 => Vec::new(),
        1 => vec![0],
        _ => (0..k)
            .map(|i| (i * (len - 1) + (k - 1) / 2) / (k - 1))
            .collect(),
    }
}

/// The first item with the largest absolute error; `items` is not empty.
pub(crate) fn worst_of<T>(items: &[T], err: impl Fn(&T) -> f64) -> &T {
    let mut best = &items[0];
    for it in &items[1..] {
        if err(it).abs() > err(best).abs() {
            best = it;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mape_math() {
        assert_eq!(error_percent(200.0, 250.0), 25.0);
        assert_eq!(error_percent(200.0, 150.0), -25.0);
        assert_eq!(mape(&[]), None);
        assert_eq!(mape(&[10.0, -20.0, 30.0]), Some(20.0));
        let pts = [1.0, -5.0, 5.0, 2.0];
        assert_eq!(*worst_of(&pts, |x| *x), -5.0);
    }

    #[test]
    fn subsampling() {
        assert_eq!(subsample(189, 5), vec![0, 47, 94, 141, 188]);
        assert_eq!(subsample(10, 2), vec![0, 9]);
        assert_eq!(subsample(10, 1), vec![0]);
        assert_eq!(subsample(10, 0), Vec::<usize>::new());
        assert_eq!(subsample(3, 10), vec![0, 1, 2]);
        for len in 2..40 {
            for k in 2..len {
                let s = subsample(len, k);
                assert_eq!(s.len(), k);
                assert_eq!((s[0], s[k - 1]), (0, len - 1));
                assert!(s.windows(2).all(|w| w[0] < w[1]), "{len} {k} {s:?}");
            }
        }
    }
}
