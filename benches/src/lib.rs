//! ddpdk benchmarks.
#![forbid(unsafe_code)]
