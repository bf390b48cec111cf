//! The integers and byte strings a persisted index is written in
//! (`persist`), which the segment and the path table encode their parts
//! with.

/// Appending the persisted format's integers and byte strings.
pub trait Bytes {
    /// Appends `v`, 8 bytes little-endian.
    fn put_u64(&mut self, v: u64);
    /// Appends the length of `b`, then `b`.
    fn put_bytes(&mut self, b: &[u8]);
}

impl Bytes for Vec<u8> {
    fn put_u64(&mut self, v: u64) {
        self.extend_from_slice(&v.to_le_bytes());
    }

    fn put_bytes(&mut self, b: &[u8]) {
        self.put_u64(b.len() as u64);
        self.extend_from_slice(b);
    }
}

/// Reads what [`Bytes`] wrote; `None` when the input runs short.
pub struct Reader<'b> {
    rest: &'b [u8],
}

impl<'b> Reader<'b> {
    /// A reader of `bytes` from their start.
    pub fn new(bytes: &'b [u8]) -> Reader<'b> {
        Reader { rest: bytes }
    }

    /// Bytes not read yet (bounds what a length read from the input may
    /// reserve).
    pub fn left(&self) -> usize {
        self.rest.len()
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Option<&'b [u8]> {
        if n > self.rest.len() {
            return None;
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Some(head)
    }

    /// The next 8-byte integer.
    pub fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    /// The next byte string.
    pub fn bytes(&mut self) -> Option<&'b [u8]> {
        let n = usize::try_from(self.u64()?).ok()?;
        self.take(n)
    }
}
