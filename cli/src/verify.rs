//! Self-checking message bytes for `--ddp-verify` (the soak, issue 12 item 4): every message
//! is distinct, and every block of it says which message and which offset it belongs to, so
//! the receiver can check what it was handed without being told what to expect, even while a
//! newer message overwrites the same slot.
//!
//! A message is cut into blocks of [`BLOCK`] bytes; each starts with its message's number and
//! its own offset in the message (8 bytes each, little-endian), and the rest is an xorshift
//! stream seeded by both. A block shorter than its stamp (a message's tail) holds the start of
//! the stamp it would have had. A corrupted byte, a segment placed at the wrong offset, or a
//! segment of a message left half-placed breaks a block's stamp or its stream.

/// Block length: shorter than the smallest DDP segment (MULPDU) ddpdk uses, so every segment
/// carries at least one stamp.
pub const BLOCK: usize = 512;
const STAMP: usize = 16;

/// Fills `out` with message `wr`'s bytes.
pub fn fill(wr: u64, out: &mut [u8]) {
    for (k, block) in out.chunks_mut(BLOCK).enumerate() {
        fill_block(wr, (k * BLOCK) as u64, block);
    }
}

fn fill_block(wr: u64, at: u64, block: &mut [u8]) {
    let mut stamp = [0u8; STAMP];
    stamp[..8].copy_from_slice(&wr.to_le_bytes());
    stamp[8..].copy_from_slice(&at.to_le_bytes());
    let n = STAMP.min(block.len());
    block[..n].copy_from_slice(&stamp[..n]);
    let mut x = (wr ^ at.rotate_left(32)).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for word in block[n..].chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        word.copy_from_slice(&x.to_le_bytes()[..word.len()]);
    }
}

/// Messages shorter than this cannot be checked (their one block has no whole stamp).
pub const MIN_LEN: usize = STAMP;

/// Checks `msg`, a whole message as placed: every block must be a block of one message
/// written by [`fill`], at its own offset, and `accept` must agree with each message number
/// found (a slot's owner, say). Returns the message numbers of the first and last block.
pub fn check(msg: &[u8], accept: impl Fn(u64) -> bool) -> Result<(u64, u64), String> {
    let mut first = None;
    let mut last = 0;
    let mut expect = [0u8; BLOCK];
    for (k, block) in msg.chunks(BLOCK).enumerate() {
        let at = (k * BLOCK) as u64;
        let wr = if block.len() >= STAMP {
            let wr = u64::from_le_bytes(block[..8].try_into().unwrap_or_default());
            let stamped_at = u64::from_le_bytes(block[8..16].try_into().unwrap_or_default());
            if stamped_at != at {
                return Err(format!(
                    "the block at offset {at} says it belongs at {stamped_at} (message {wr})"
                ));
            }
            wr
        } else {
            // A short tail: it belongs to the message before it.
            last
        };
        if !accept(wr) {
            return Err(format!(
                "the block at offset {at} is of message {wr}, not expected here"
            ));
        }
        let expect = &mut expect[..block.len()];
        fill_block(wr, at, expect);
        if let Some(i) = block.iter().zip(expect.iter()).position(|(a, b)| a != b) {
            return Err(format!(
                "byte {} of message {wr} differs: {:#04x} placed, {:#04x} written",
                at + i as u64,
                block[i],
                expect[i]
            ));
        }
        first.get_or_insert(wr);
        last = wr;
    }
    Ok((first.unwrap_or(0), last))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(wr: u64, len: usize) -> Vec<u8> {
        let mut v = vec![0; len];
        fill(wr, &mut v);
        v
    }

    #[test]
    fn a_message_checks_and_says_whose_it_is() {
        for len in [16, 17, 512, 512 + 7, 1400, 65536 + 7] {
            assert_eq!(check(&msg(42, len), |_| true), Ok((42, 42)), "{len}");
        }
        assert_ne!(msg(1, 4096), msg(2, 4096), "messages differ");
    }

    #[test]
    fn one_flipped_bit_anywhere_is_found() {
        let good = msg(7, 3000);
        for at in [0, 9, 100, 511, 512, 2999] {
            let mut m = good.clone();
            m[at] ^= 0x10;
            assert!(check(&m, |_| true).is_err(), "flip at {at}");
        }
    }

    #[test]
    fn a_segment_at_the_wrong_offset_is_found() {
        let mut m = msg(7, 4096);
        let block = m[1024..1536].to_vec();
        m[2048..2560].copy_from_slice(&block);
        let e = check(&m, |_| true).expect_err("a moved block");
        assert!(e.contains("belongs at 1024"), "{e}");
    }

    /// A slot being overwritten by a newer message holds blocks of both: each block checks,
    /// and the caller's rule decides whether the owners are right.
    #[test]
    fn a_slot_mid_overwrite_checks_block_by_block() {
        let mut m = msg(3, 2048);
        m[..1024].copy_from_slice(&msg(67, 2048)[..1024]);
        assert_eq!(check(&m, |wr| wr % 64 == 3), Ok((67, 3)));
        assert!(check(&m, |wr| wr == 3).is_err());
    }
}
