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

/// Fills `out` with the bytes a region offered to RDMA Reads holds from offset `from` on
/// (`ddpdk perf client --ddp-op read`): each 8-byte word of the region is a hash of its own
/// index, so a read of any span can be checked against where it asked to read from, and a
/// span from elsewhere, or left unplaced, fails.
pub fn fill_region(from: u64, out: &mut [u8]) {
    let word = |w: u64| {
        ((w ^ 0x5851_f42d_4c95_7f2d).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ w).to_le_bytes()
    };
    // The bytes up to the next word boundary, then whole words (one store each: a 64 MiB
    // region is filled in tens of milliseconds), then the start of the last word.
    let lead = ((8 - from % 8) % 8).min(out.len() as u64) as usize;
    let (head, body) = out.split_at_mut(lead);
    if lead > 0 {
        let at = (from % 8) as usize;
        head.copy_from_slice(&word(from / 8)[at..at + lead]);
    }
    let first = (from + lead as u64) / 8;
    let last = first + (body.len() / 8) as u64;
    let mut words = body.chunks_exact_mut(8);
    for (k, w) in (&mut words).enumerate() {
        w.copy_from_slice(&word(first + k as u64));
    }
    let tail = words.into_remainder();
    let n = tail.len();
    if n > 0 {
        tail.copy_from_slice(&word(last)[..n]);
    }
}

/// Messages shorter than this cannot be checked (their one block has no whole stamp).
pub const MIN_LEN: usize = STAMP;

/// Checks `msg`, a whole message as placed, against the messages that may own its bytes,
/// `candidates` (the message delivered, and those that may already be overwriting its slot):
/// every block must be that block of one candidate, or, where a newer message is being placed
/// over the slot, a head of one candidate's block and a tail of another's (a DDP segment is
/// longer than a block, so a block meets at most two). Returns how many blocks were split so.
/// A corrupted byte, a block at the wrong offset, or a block of a message not among the
/// candidates fails.
pub fn check(msg: &[u8], candidates: &[u64]) -> Result<usize, String> {
    let mut torn = 0;
    let mut want = [[0u8; BLOCK]; MAX_CANDIDATES];
    let candidates = &candidates[..candidates.len().min(MAX_CANDIDATES)];
    for (k, block) in msg.chunks(BLOCK).enumerate() {
        let at = (k * BLOCK) as u64;
        for (w, &wr) in want.iter_mut().zip(candidates) {
            fill_block(wr, at, &mut w[..block.len()]);
        }
        let want = &want[..candidates.len()];
        // How far each candidate's block matches from the start, and from the end.
        let head = |w: &[u8; BLOCK]| block.iter().zip(w).take_while(|(a, b)| a == b).count();
        let tail = |w: &[u8; BLOCK]| {
            block
                .iter()
                .rev()
                .zip(w[..block.len()].iter().rev())
                .take_while(|(a, b)| a == b)
                .count()
        };
        if want.iter().any(|w| head(w) == block.len()) {
            continue;
        }
        let split = want
            .iter()
            .any(|a| want.iter().any(|b| head(a) + tail(b) >= block.len()));
        if split {
            torn += 1;
            continue;
        }
        let (wr, stamped_at) = match block.get(..STAMP) {
            Some(st) => (
                u64::from_le_bytes(st[..8].try_into().unwrap_or_default()),
                u64::from_le_bytes(st[8..].try_into().unwrap_or_default()),
            ),
            None => (u64::MAX, at),
        };
        let best = want.iter().map(head).max().unwrap_or(0);
        return Err(format!(
            "the block at offset {at} is none of messages {candidates:?} (it says message \
             {wr} at offset {stamped_at}; the best match differs from byte {})",
            at + best as u64
        ));
    }
    Ok(torn)
}

/// Candidates [`check`] compares a block with, at most.
pub const MAX_CANDIDATES: usize = 6;

/// The bytes of message `wr`: distinct per message, so a misplaced one is noticed.
pub fn pattern(wr: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0; len];
    fill_pattern(wr, &mut v);
    v
}

/// Fills `out` with message `wr`'s bytes, a word of xorshift at a time: the loopback makes a
/// message per write in its timed loop, so the harness must not be what it measures.
pub fn fill_pattern(wr: u64, out: &mut [u8]) {
    let mut x = wr.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for word in out.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        word.copy_from_slice(&x.to_le_bytes()[..word.len()]);
    }
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
    fn a_message_checks_against_its_own_number_only() {
        for len in [16, 17, 512, 512 + 7, 1400, 65536 + 7] {
            assert_eq!(check(&msg(42, len), &[42]), Ok(0), "{len}");
            assert!(check(&msg(42, len), &[41, 43]).is_err(), "{len}");
        }
        assert_ne!(msg(1, 4096), msg(2, 4096), "messages differ");
    }

    #[test]
    fn one_flipped_bit_anywhere_is_found() {
        let good = msg(7, 3000);
        for at in [0, 9, 100, 511, 512, 2999] {
            let mut m = good.clone();
            m[at] ^= 0x10;
            assert!(check(&m, &[7, 7 + 64]).is_err(), "flip at {at}");
        }
    }

    #[test]
    fn a_segment_at_the_wrong_offset_is_found() {
        let mut m = msg(7, 4096);
        let block = m[1024..1536].to_vec();
        m[2048..2560].copy_from_slice(&block);
        let e = check(&m, &[7]).expect_err("a moved block");
        assert!(e.contains("offset 2048"), "{e}");
    }

    /// A slot being overwritten by a newer message holds blocks of both, one block split at a
    /// segment's edge: each part checks against its own message.
    #[test]
    fn a_slot_mid_overwrite_checks_with_its_torn_block() {
        let mut m = msg(3, 2048);
        m[..1000].copy_from_slice(&msg(67, 2048)[..1000]);
        assert_eq!(
            check(&m, &[3, 67]),
            Ok(1),
            "the block at 512 is split at 1000"
        );
        assert!(check(&m, &[3]).is_err(), "67 is not a candidate");
        // A flipped byte in the torn block is still found.
        m[700] ^= 1;
        assert!(check(&m, &[3, 67]).is_err());
    }

    /// A region's bytes depend on their offset alone: any span is the same bytes as the
    /// aligned fill it is part of, and two spans of the same length at different offsets
    /// differ (a Read Response placed from the wrong offset is caught).
    #[test]
    fn region_bytes_are_a_function_of_their_offset() {
        let mut whole = vec![0u8; 4096];
        fill_region(0, &mut whole);
        for (from, len) in [(0, 1), (5, 20), (7, 1), (8, 8), (13, 4000), (4095, 1)] {
            let mut span = vec![0u8; len];
            fill_region(from as u64, &mut span);
            assert_eq!(span, whole[from..from + len], "{len} bytes from {from}");
        }
        assert_ne!(whole[..64], whole[64..128]);
        assert_ne!(whole[..2048], whole[2048..4096]);
    }
}
