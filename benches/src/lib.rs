//! ddpdk benchmarks.
