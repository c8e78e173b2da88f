//! placeholder: filled by the SCTP work
