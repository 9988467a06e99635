//! Building blocks of the calibrated L2 / TMA memory hierarchy.

pub mod calendar;
pub mod config;
pub mod dram;
pub mod hash;
pub mod lines;
pub mod system;
pub mod table;
pub mod tags;
pub mod txn;
