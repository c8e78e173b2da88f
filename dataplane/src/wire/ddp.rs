//! placeholder: filled by the DDP work
