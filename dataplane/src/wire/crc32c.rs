//! placeholder: filled by the CRC32c work
