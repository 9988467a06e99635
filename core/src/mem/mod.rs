//! Building blocks of the calibrated L2 / TMA memory hierarchy.

pub mod hash;
pub mod lines;
pub mod table;
pub mod tags;
