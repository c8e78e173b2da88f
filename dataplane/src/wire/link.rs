//! placeholder: filled by the link-layer work
