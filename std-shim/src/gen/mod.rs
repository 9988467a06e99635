//! Workload generators.
