//! Benchmark scenarios (filled in below).
