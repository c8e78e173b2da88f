//! ddpdk data plane.
