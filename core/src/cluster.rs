//! Thread block clusters: groups of CTAs that Hopper launches together on
//! distinct SMs, that can write each other's shared memory (a TMA load
//! multicast to several CTAs) and arrive on each other's barriers.
//!
//! A kernel's [`Cluster`] cuts its grid into blocks of `dims` CTAs (each
//! grid side a multiple of the cluster's). A CTA's *rank* in its cluster is
//! `x + dx * (y + dy * z)` over its coordinates modulo `dims`, as
//! `%cluster_ctarank` numbers them. Instructions address other CTAs of the
//! cluster with a *dimension mask* (bit 0 x, bit 1 y, bit 2 z): the CTAs
//! that differ from the issuing one only along the masked dimensions, the
//! issuer included ([`Cluster::peers`]). A load multicast along `y` in a
//! `1 x 2` cluster lands in both CTAs, as CUTLASS's multicast of the B
//! operand to the CTAs that share its column does.

use serde::{Deserialize, Serialize};

use crate::error::KernelError;

/// Most CTAs per cluster (Hopper's non-portable maximum).
pub const MAX_CLUSTER: usize = 16;
/// Every valid dimension mask has its bits within this.
pub const ALL_DIMS: u8 = 0b111;

/// The cluster shape of a kernel: CTAs per cluster along x, y and z.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Cluster {
    /// CTAs per cluster along each grid dimension (each >= 1).
    pub dims: [u8; 3],
}

impl Default for Cluster {
    fn default() -> Self {
        Cluster::NONE
    }
}

impl Cluster {
    /// No clusters: every CTA on its own.
    pub const NONE: Cluster = Cluster { dims: [1, 1, 1] };

    /// CTAs per cluster.
    pub fn size(&self) -> u32 {
        self.dims.iter().map(|&d| d as u32).product()
    }

    /// Whether the kernel is launched in clusters of more than one CTA.
    pub fn is_clustered(&self) -> bool {
        self.size() > 1
    }

    /// The coordinates within the cluster of the CTA of rank `rank`.
    pub fn rank_coords(&self, rank: u32) -> [u32; 3] {
        let [dx, dy, _] = self.dims.map(|d| d.max(1) as u32);
        [rank % dx, rank / dx % dy, rank / (dx * dy)]
    }

    /// The rank of the CTA at grid coordinates `c`.
    pub fn rank_of(&self, c: [u32; 3]) -> u32 {
        let [dx, dy, dz] = self.dims.map(|d| d.max(1) as u32);
        c[0] % dx + dx * (c[1] % dy + dy * (c[2] % dz))
    }

    /// The ranks, ascending, of the CTAs of `rank`'s cluster whose
    /// coordinates equal its own along every dimension not in `mask`
    /// (`rank` itself included).
    pub fn peers(&self, rank: u32, mask: u8) -> impl Iterator<Item = u32> + '_ {
        let me = self.rank_coords(rank);
        (0..self.size()).filter(move |&r| {
            let c = self.rank_coords(r);
            (0..3).all(|d| mask & (1 << d) != 0 || c[d] == me[d])
        })
    }

    /// Checks the shape against the grid: every side at least 1, at most
    /// [`MAX_CLUSTER`] CTAs, each grid side a multiple of the cluster's.
    pub fn validate(&self, grid: [u32; 3]) -> Result<(), KernelError> {
        let fits = self.dims.iter().all(|&d| d >= 1)
            && self.size() as usize <= MAX_CLUSTER
            && grid.iter().zip(self.dims).all(|(&g, d)| g % d as u32 == 0);
        if fits {
            Ok(())
        } else {
            Err(KernelError::BadCluster {
                dims: self.dims,
                grid,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_number_x_fastest_and_round_trip() {
        let c = Cluster { dims: [2, 3, 1] };
        assert_eq!(c.size(), 6);
        for r in 0..6 {
            let [x, y, z] = c.rank_coords(r);
            assert_eq!(c.rank_of([x + 4, y + 3, z]), r);
        }
        assert_eq!(c.rank_coords(3), [1, 1, 0]);
    }

    #[test]
    fn peers_share_the_unmasked_coordinates() {
        let c = Cluster { dims: [2, 2, 1] };
        let along = |r, m| c.peers(r, m).collect::<heapless::Vec<u32, 16>>();
        assert_eq!(along(1, 0), [1]);
        assert_eq!(along(1, 0b010), [1, 3]);
        assert_eq!(along(1, 0b001), [0, 1]);
        assert_eq!(along(2, 0b011), [0, 1, 2, 3]);
        // A mask along a side of one CTA adds nobody.
        assert_eq!(along(2, 0b100), [2]);
    }

    #[test]
    fn shapes_must_divide_the_grid_and_stay_small() {
        let ok = Cluster { dims: [2, 1, 1] };
        assert!(ok.validate([4, 3, 1]).is_ok());
        assert!(ok.validate([3, 3, 1]).is_err());
        assert!(Cluster { dims: [0, 1, 1] }.validate([4, 4, 1]).is_err());
        assert!(Cluster { dims: [4, 8, 1] }.validate([8, 8, 1]).is_err());
        assert!(Cluster { dims: [16, 1, 1] }.validate([16, 1, 1]).is_ok());
        assert!(Cluster::default().validate([7, 5, 3]).is_ok());
    }
}
