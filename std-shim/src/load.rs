//! Loading and saving kernels in either encoding.
