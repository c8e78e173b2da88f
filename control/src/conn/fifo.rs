//! The queue of indications and completions a connection owes its ULP.
//!
//! `VecDeque::push_back` is not inlined for a 64-byte `Indication`: the caller builds the value
//! on its stack with narrow stores (a u64 tag, a u32, a u16, a u8) and the out-of-line push
//! reads it back 16 bytes at a time. Such a load cannot be forwarded from the smaller stores, so
//! it waits until they reach the cache, behind every older store in the store buffer: on the
//! receive path those are the placement's stores into a region that is not in cache. On a Xeon
//! it was 46 % of `ddp-rx-bench`'s `conn` path at 64-byte segments, which fell from ~21.5 to
//! ~13.5 M segments a second whenever the placement's stores missed (benches/README.md,
//! "Session 65"). Here the push is inlined and writes the value straight into its slot.

/// A FIFO over a ring of slots that grows by doubling and never shrinks (as `VecDeque` did).
#[derive(Debug)]
pub(crate) struct Fifo<T> {
    slots: Vec<Option<T>>,
    /// The slot of the oldest entry.
    head: usize,
    len: usize,
}

impl<T> Default for Fifo<T> {
    fn default() -> Self {
        Self {
            slots: Vec::new(),
            head: 0,
            len: 0,
        }
    }
}

impl<T> Fifo<T> {
    #[inline(always)]
    pub(crate) fn push_back(&mut self, value: T) {
        if self.len == self.slots.len() {
            self.grow();
        }
        let i = self.slot(self.len);
        self.slots[i] = Some(value);
        self.len += 1;
    }

    #[inline]
    pub(crate) fn pop_front(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let value = self.slots[self.head].take();
        self.head = self.slot(1);
        self.len -= 1;
        value
    }

    pub(crate) fn back_mut(&mut self) -> Option<&mut T> {
        let last = self.len.checked_sub(1)?;
        let i = self.slot(last);
        self.slots[i].as_mut()
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The slot `k` entries after the head (`k <= len`, `len <= slots`).
    #[inline(always)]
    fn slot(&self, k: usize) -> usize {
        let i = self.head + k;
        if i >= self.slots.len() {
            i - self.slots.len()
        } else {
            i
        }
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let old = self.slots.len();
        let mut slots = Vec::with_capacity((old * 2).max(16));
        for k in 0..self.len {
            let i = self.slot(k);
            slots.push(self.slots[i].take());
        }
        slots.resize_with(slots.capacity(), || None);
        self.slots = slots;
        self.head = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::Fifo;
    use std::collections::VecDeque;

    /// The same answers as `VecDeque` for any mix of pushes and pops, across growth and the
    /// ring's wrap.
    #[test]
    fn a_fifo_answers_as_a_vecdeque_does() {
        let mut fifo = Fifo::default();
        let mut model = VecDeque::new();
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        for n in 0..20_000u32 {
            // xorshift: pushes a little more often than pops, so the ring grows and wraps.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if x % 5 < 3 {
                fifo.push_back(n);
                model.push_back(n);
            } else {
                assert_eq!(fifo.pop_front(), model.pop_front());
            }
            if x.is_multiple_of(7) {
                if let (Some(a), Some(b)) = (fifo.back_mut(), model.back_mut()) {
                    *a += 1;
                    *b += 1;
                }
            }
            assert_eq!(fifo.len(), model.len());
            assert_eq!(fifo.is_empty(), model.is_empty());
            assert_eq!(fifo.back_mut().copied(), model.back().copied());
        }
        while let Some(v) = model.pop_front() {
            assert_eq!(fifo.pop_front(), Some(v));
        }
        assert_eq!(fifo.pop_front(), None);
    }
}
