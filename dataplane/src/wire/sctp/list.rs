//! Repeated wire elements without allocation: parameters, error causes, gap ack blocks,
//! duplicate TSNs, parameter type lists.

use core::fmt;

use super::Result;

/// An element of a [`List`]: something with a wire form that can be parsed from the front of a
/// buffer and emitted. Implemented for the element types of this module only.
pub trait ListElement<'a>: Copy + Sized {
    /// The size of every element when fixed (gap ack blocks, TSNs, type codes), 0 when each
    /// element carries its own length (parameters, error causes).
    const FIXED_LEN: usize;

    /// Parses the element at the front of `bytes` (not empty) and returns it with the number of
    /// bytes it occupies, padding included when present.
    fn parse_front(bytes: &'a [u8]) -> Result<(Self, usize)>;

    /// Bytes `emit` writes, padding included.
    fn buffer_len(&self) -> usize;

    /// Bytes of padding at the end of `buffer_len` (not counted in an enclosing length when the
    /// element is the last one, RFC 9260 §3.2).
    fn padding_len(&self) -> usize {
        0
    }

    /// Writes the element and its zero padding into `buf[..self.buffer_len()]`.
    ///
    /// # Panics
    /// If `buf` is shorter than `buffer_len()`.
    fn emit(&self, buf: &mut [u8]);
}

/// A list of wire elements: either bytes validated by [`List::parse`] (what a received chunk
/// holds) or a slice of element Reprs (what a sender builds). Both iterate as elements and
/// compare equal when their elements are equal, whichever form they are in.
pub struct List<'a, E> {
    inner: Inner<'a, E>,
}

enum Inner<'a, E> {
    /// Bytes in which every element parsed when the list was built.
    Wire(&'a [u8]),
    Items(&'a [E]),
}

impl<'a, E> Clone for List<'a, E> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<'a, E> Copy for List<'a, E> {}

impl<'a, E> Clone for Inner<'a, E> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<'a, E> Copy for Inner<'a, E> {}

impl<'a, E: ListElement<'a>> List<'a, E> {
    /// A list to emit, made of element Reprs.
    pub const fn new(items: &'a [E]) -> Self {
        List {
            inner: Inner::Items(items),
        }
    }

    /// The empty list.
    pub const fn empty() -> Self {
        Self::new(&[])
    }

    /// Validates every element of `bytes` and keeps the bytes; iteration then cannot fail.
    pub fn parse(bytes: &'a [u8]) -> Result<Self> {
        let mut rest = bytes;
        while !rest.is_empty() {
            let (_, used) = E::parse_front(rest)?;
            rest = rest.get(used..).unwrap_or_default();
        }
        Ok(Self::from_wire(bytes))
    }

    /// Keeps `bytes` as the list without looking at them; only for bytes already validated,
    /// or made of fixed-size elements whose length was checked to be a multiple.
    pub(super) const fn from_wire(bytes: &'a [u8]) -> Self {
        List {
            inner: Inner::Wire(bytes),
        }
    }

    /// The elements in order.
    pub fn iter(&self) -> ListIter<'a, E> {
        ListIter {
            inner: match self.inner {
                Inner::Wire(b) => IterInner::Wire(b),
                Inner::Items(items) => IterInner::Items(items.iter()),
            },
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self.inner {
            Inner::Wire(b) if E::FIXED_LEN != 0 => b.len() / E::FIXED_LEN,
            Inner::Wire(_) => self.iter().count(),
            Inner::Items(items) => items.len(),
        }
    }

    /// Whether there is no element.
    pub fn is_empty(&self) -> bool {
        match self.inner {
            Inner::Wire(b) => b.is_empty(),
            Inner::Items(items) => items.is_empty(),
        }
    }

    /// Bytes `emit` writes: every element with its padding.
    pub fn buffer_len(&self) -> usize {
        self.iter().map(|e| e.buffer_len()).sum()
    }

    /// The length an enclosing length field counts: `buffer_len` without the last element's
    /// padding (RFC 9260 §3.2).
    pub fn wire_len(&self) -> usize {
        let last_padding = self.iter().last().map_or(0, |e| e.padding_len());
        self.buffer_len() - last_padding
    }

    /// Writes every element with its zero padding into `buf[..self.buffer_len()]`.
    ///
    /// # Panics
    /// If `buf` is shorter than `buffer_len()`.
    pub fn emit(&self, buf: &mut [u8]) {
        let mut at = 0;
        for e in self.iter() {
            let n = e.buffer_len();
            e.emit(&mut buf[at..at + n]);
            at += n;
        }
    }
}

impl<'a, E: ListElement<'a>> IntoIterator for List<'a, E> {
    type Item = E;
    type IntoIter = ListIter<'a, E>;

    fn into_iter(self) -> ListIter<'a, E> {
        self.iter()
    }
}

impl<'a, E: ListElement<'a> + PartialEq> PartialEq for List<'a, E> {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl<'a, E: ListElement<'a> + Eq> Eq for List<'a, E> {}

impl<'a, E: ListElement<'a> + fmt::Debug> fmt::Debug for List<'a, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Iterator over the elements of a [`List`].
#[derive(Debug, Clone)]
pub struct ListIter<'a, E> {
    inner: IterInner<'a, E>,
}

#[derive(Debug, Clone)]
enum IterInner<'a, E> {
    Wire(&'a [u8]),
    Items(core::slice::Iter<'a, E>),
}

impl<'a, E: ListElement<'a>> Iterator for ListIter<'a, E> {
    type Item = E;

    fn next(&mut self) -> Option<E> {
        match &mut self.inner {
            IterInner::Items(items) => items.next().copied(),
            IterInner::Wire(rest) => {
                if rest.is_empty() {
                    return None;
                }
                match E::parse_front(rest) {
                    Ok((e, used)) => {
                        *rest = rest.get(used..).unwrap_or_default();
                        Some(e)
                    }
                    // Cannot happen: the bytes were validated when the list was made. Ending
                    // the iteration keeps the promise that nothing here panics.
                    Err(_) => {
                        *rest = &[];
                        None
                    }
                }
            }
        }
    }
}

impl<'a, E: ListElement<'a>> core::iter::FusedIterator for ListIter<'a, E> {}

/// Duplicate TSNs of a SACK and the TSN of No User Data are plain 32-bit values.
impl<'a> ListElement<'a> for u32 {
    const FIXED_LEN: usize = 4;

    fn parse_front(bytes: &'a [u8]) -> Result<(Self, usize)> {
        match bytes.get(..4) {
            Some(b) => Ok((super::read_u32(b), 4)),
            None => Err(super::Error::Truncated),
        }
    }

    fn buffer_len(&self) -> usize {
        4
    }

    fn emit(&self, buf: &mut [u8]) {
        super::write_u32(buf, *self);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test
mod tests {
    use super::super::{Error, ParamRepr};
    use super::*;

    #[test]
    fn wire_and_items_lists_with_the_same_elements_are_equal() {
        let items = [1u32, 0xdead_beef];
        let bytes = [0, 0, 0, 1, 0xde, 0xad, 0xbe, 0xef];
        let a = List::new(&items);
        let b = List::<u32>::parse(&bytes).unwrap();
        assert_eq!(a, b);
        assert_eq!((a.len(), b.len()), (2, 2));
        assert_eq!(b.iter().collect::<Vec<_>>(), items);
        assert_ne!(a, List::new(&items[..1]));
    }

    #[test]
    fn fixed_size_list_of_a_partial_element_is_truncated() {
        assert_eq!(List::<u32>::parse(&[0, 0, 0, 1, 2]), Err(Error::Truncated));
    }

    #[test]
    fn list_emit_writes_every_element_with_padding() {
        let params = [
            ParamRepr::SupportedExtensions(&[0xc0]),
            ParamRepr::ForwardTsnSupported,
        ];
        let list = List::new(&params);
        assert_eq!((list.buffer_len(), list.wire_len()), (12, 12));
        let mut buf = [0xa5; 12];
        list.emit(&mut buf);
        assert_eq!(buf, [0x80, 0x08, 0, 5, 0xc0, 0, 0, 0, 0xc0, 0, 0, 4]);
        // The last element's padding is not counted in the enclosing length.
        let list = List::new(&params[..1]);
        assert_eq!((list.buffer_len(), list.wire_len()), (8, 5));
    }

    #[test]
    fn empty_list_emits_nothing() {
        let list = List::<u32>::empty();
        assert!(list.is_empty());
        assert_eq!((list.len(), list.buffer_len(), list.wire_len()), (0, 0, 0));
        assert_eq!(List::<u32>::parse(&[]), Ok(list));
    }
}
