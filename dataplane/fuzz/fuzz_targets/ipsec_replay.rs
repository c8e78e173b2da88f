//! The anti-replay window of an inbound SA (RFC 4303 §3.4.3) against a model, for any
//! sequence of sequence numbers a peer may send (and authenticate): a number is accepted
//! exactly when it is not 0, was not accepted before, and is right of the window's left edge
//! (within `size` of the highest accepted); `check` says beforehand what `accept` will do; and
//! under ESN the inferred number keeps the 32 bits the packet carried (Appendix A2.2).
//!
//! Input: one byte for the window (64 << (b % 7) packets), then 9-byte steps: a kind byte (even:
//! a full 64-bit number; odd: 32 low bits through `infer_esn`) and 8 bytes.
#![no_main]

use std::collections::HashSet;

use ddpdk_dataplane::ipsec::ReplayWindow;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&w, steps)) = data.split_first() else {
        return;
    };
    let mut window = ReplayWindow::new(64 << (w % 7));
    let size = window.size();
    let mut seen = HashSet::new();
    let mut top = 0u64;
    for step in steps.chunks_exact(9) {
        let mut b = [0u8; 8];
        b.copy_from_slice(&step[1..]);
        let seq = if step[0] % 2 == 0 {
            // Far numbers make the window slide by huge steps; keep most near the top.
            let v = u64::from_le_bytes(b);
            if step[0] % 4 == 0 {
                top.wrapping_add(v % (4 * size)).wrapping_sub(2 * size)
            } else {
                v
            }
        } else {
            let low = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            let s = window.infer_esn(low);
            assert_eq!(s as u32, low, "ESN keeps the low 32 bits");
            s
        };
        let fresh = seq != 0 && !seen.contains(&seq) && seq.saturating_add(size) > top;
        assert_eq!(
            window.check(seq),
            fresh,
            "check {seq} (top {top}, size {size})"
        );
        assert_eq!(
            window.accept(seq),
            fresh,
            "accept {seq} (top {top}, size {size})"
        );
        if fresh {
            seen.insert(seq);
            top = top.max(seq);
            // The model forgets what has left the window, as the window does.
            if seen.len() > 4096 {
                seen.retain(|&s| s.saturating_add(size) > top);
            }
        }
        assert_eq!(window.top(), top);
    }
});
