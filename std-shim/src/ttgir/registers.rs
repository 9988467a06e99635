//! How Triton splits the register file between a `ttg.warp_specialize`'s
//! partitions (its `AllocateWarpGroups` pass, then `setmaxnreg` on Hopper).
//!
//! The kernel launches with `maxnreg` registers per thread for every warp:
//! the ptxas count of the launch's `regs`, or 64 K spread over all the
//! CTA's warps (rounded down to 8). With `requestedRegisters`, partitions
//! are padded to whole WarpGroups (with idle partitions that ask for 16),
//! laid out largest first after the default warps, and grouped by
//! WarpGroup; a WarpGroup raises its registers to the most any of its
//! partitions asks for (rounded up to 8). What the raises take from the
//! budget of `maxnreg` for every warp, the default WarpGroups give up:
//! they keep what is left per thread, rounded down to 8, at least 24.
//! When nothing would be left, nobody moves and every warp keeps
//! `maxnreg`.

/// The fewest registers Triton leaves the default partition.
const MIN_DEFAULT: i64 = 24;

/// One partition: its warps and the registers it asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Partition {
    /// Its `num_warps(W)`.
    pub warps: u32,
    /// Its entry of `requestedRegisters`, if any.
    pub requested: Option<i64>,
}

/// Registers per thread of the default partition (`base_warps` warps) and
/// of each partition, from the launch's ptxas count `regs` when given.
pub(super) fn split(regs: Option<u32>, base_warps: u32, parts: &[Partition]) -> (u32, Vec<u32>) {
    let part_warps: u32 = parts.iter().map(|p| p.warps).sum();
    let extra = part_warps.div_ceil(4) * 4;
    let maxnreg = regs.unwrap_or_else(|| {
        let total = (base_warps + extra).max(1);
        65536 / total / 32 / 8 * 8
    });
    let unchanged = (maxnreg, vec![maxnreg; parts.len()]);
    let Some(requested) = parts
        .iter()
        .map(|p| p.requested)
        .collect::<Option<Vec<i64>>>()
    else {
        return unchanged;
    };
    // Padding: idle partitions of the largest powers of two that fill the
    // last WarpGroup, asking for 16 registers.
    let mut all: Vec<(usize, u32, i64)> = parts
        .iter()
        .zip(&requested)
        .enumerate()
        .map(|(i, (p, &r))| (i, p.warps, r))
        .collect();
    let mut pad = extra - part_warps;
    while pad > 0 {
        let size = 1 << (31 - pad.leading_zeros());
        all.push((usize::MAX, size, 16));
        pad -= size;
    }
    // Largest partitions first (stable), from warp `base_warps` on.
    all.sort_by_key(|p| std::cmp::Reverse(p.1));
    let mut start = base_warps;
    let mut groups: Vec<(i64, u32, Vec<usize>)> = Vec::new();
    for &(i, warps, req) in &all {
        if start % 4 == 0 || groups.is_empty() {
            groups.push((0, 0, Vec::new()));
        }
        let g = groups.last_mut().expect("a group");
        g.0 = g.0.max((req + 7) / 8 * 8);
        g.1 += warps;
        g.2.push(i);
        start += warps;
    }
    let m = maxnreg as i64;
    let budget = m * base_warps as i64 * 32
        + groups
            .iter()
            .map(|(most, warps, _)| (m - most) * *warps as i64 * 32)
            .sum::<i64>();
    if budget <= 0 || base_warps == 0 {
        return unchanged;
    }
    // setmaxnreg takes at most 256; the SM gives a thread at most 255.
    let left = (budget / (base_warps as i64 * 32) / 8 * 8).min(255);
    if left < MIN_DEFAULT {
        return unchanged;
    }
    let mut out = vec![maxnreg; parts.len()];
    for (most, _, members) in &groups {
        for &i in members {
            if let Some(r) = out.get_mut(i) {
                *r = (*most).clamp(0, 255) as u32;
            }
        }
    }
    (left as u32, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(warps: u32, requested: i64) -> Partition {
        Partition {
            warps,
            requested: Some(requested),
        }
    }

    /// Triton's persistent GEMM with warp specialisation on Hopper: two
    /// four-warp partitions ask for 232 registers out of a launch at 168
    /// for 12 warps; the default WarpGroup keeps the 40 left, so the CTA
    /// fits in the SM's 64 K (40 x 128 + 2 x 232 x 128 = 64 512).
    #[test]
    fn raises_are_paid_for_by_the_default_partition() {
        let (body, parts) = split(Some(168), 4, &[p(4, 232), p(4, 232)]);
        assert_eq!((body, parts.clone()), (40, vec![232, 232]));
        assert!(body * 128 + parts.iter().map(|r| r * 128).sum::<u32>() <= 65536);
        // Without the ptxas count, maxnreg is 64 K over the 12 warps.
        assert_eq!(split(None, 4, &[p(4, 232), p(4, 232)]).0, 40);
        // A producer lowered to 24 frees registers for 8 default warps:
        // (168 x 256 + 144 x 128) / 256 = 240.
        assert_eq!(split(Some(168), 8, &[p(4, 24)]), (240, vec![24]));
    }

    /// A one-warp partition shares its WarpGroup with the padding (two
    /// warps, then one, asking for 16); a request rounds up to 8.
    #[test]
    fn small_partitions_are_padded_to_a_warp_group() {
        let (body, parts) = split(Some(168), 8, &[p(1, 30)]);
        // The WarpGroup raises to 32: (168 x 256 + 136 x 128) / 256 = 236,
        // rounded down to 232.
        assert_eq!((body, parts), (232, vec![32]));
    }

    /// No request, or raises too large to pay for: every warp keeps the
    /// launch's count.
    #[test]
    fn unpaid_raises_change_nothing() {
        let none = Partition {
            warps: 4,
            requested: None,
        };
        assert_eq!(split(Some(168), 4, &[none]), (168, vec![168]));
        assert_eq!(
            split(Some(168), 4, &[p(4, 255), p(4, 255)]),
            (168, vec![168, 168])
        );
        // 16 left per thread is under the default partition's 24.
        assert_eq!(
            split(Some(128), 4, &[p(4, 184), p(4, 184)]),
            (128, vec![128, 128])
        );
    }
}
