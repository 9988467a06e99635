//! Running a kernel with a heap-allocated arena.
