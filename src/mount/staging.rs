//! The bytes of one open file: its snapshot as read from the server and the
//! writes made through the handle, in memory up to a bound and then in an
//! unlinked temporary file of the cache directory (docs/mount.md § Memory).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Memory every handle's staging shares: a handle keeps its bytes in
/// memory while both its own bound and the mount's total allow, and spills
/// them to the cache directory otherwise.
#[derive(Debug)]
pub struct Budget {
    /// Bytes one handle may keep in memory.
    per_handle: u64,
    /// Bytes all handles together may keep in memory.
    total: u64,
    /// Bytes held in memory now.
    held: AtomicU64,
    /// Where spilled handles keep their bytes.
    dir: PathBuf,
    /// Names the temporary files.
    next: AtomicU64,
}

impl Budget {
    /// A budget of `per_handle` bytes per handle, `total` in all, spilling
    /// to files in `dir`.
    pub fn new(per_handle: u64, total: u64, dir: PathBuf) -> Budget {
        Budget {
            per_handle,
            total,
            held: AtomicU64::new(0),
            dir,
            next: AtomicU64::new(0),
        }
    }

    /// Takes `bytes` more of memory, or refuses when over the total.
    fn charge(&self, bytes: u64) -> bool {
        self.held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                let after = held.checked_add(bytes)?;
                (after <= self.total).then_some(after)
            })
            .is_ok()
    }

    /// Gives back `bytes` of memory.
    fn release(&self, bytes: u64) {
        self.held.fetch_sub(bytes, Ordering::AcqRel);
    }

    /// A new temporary file, already unlinked: it goes when its handle does.
    fn spill_file(&self) -> io::Result<File> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let path = self.dir.join(format!("staging-{}-{n}", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        std::fs::remove_file(&path)?;
        Ok(file)
    }
}

/// Where the bytes are.
#[derive(Debug)]
enum Place {
    /// In memory, charged to the budget by its capacity.
    Memory(Vec<u8>),
    /// In an unlinked temporary file.
    Spilled(File),
}

/// The content of one open file.
#[derive(Debug)]
pub struct Staging {
    place: Place,
    /// Length of the content.
    len: u64,
    /// Memory charged to the budget.
    charged: u64,
    budget: Arc<Budget>,
}

impl Staging {
    /// Empty content.
    pub fn new(budget: Arc<Budget>) -> Staging {
        Staging {
            place: Place::Memory(Vec::new()),
            len: 0,
            charged: 0,
            budget,
        }
    }

    /// Length of the content.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Makes room for content of `len` bytes: more memory when the bounds
    /// allow, else the content moves to a temporary file.
    fn reserve(&mut self, len: u64) -> io::Result<()> {
        let Place::Memory(bytes) = &mut self.place else {
            return Ok(());
        };
        if len <= self.charged {
            return Ok(());
        }
        // Grow by doubling, as a Vec would, but charged first.
        let want = len.max(self.charged.saturating_mul(2)).max(4096);
        let want = want.min(self.budget.per_handle.max(len));
        if len <= self.budget.per_handle && self.budget.charge(want - self.charged) {
            bytes.reserve_exact(want as usize - bytes.len());
            self.charged = want;
            return Ok(());
        }
        let file = self.budget.spill_file()?;
        file.write_all_at(bytes, 0)?;
        self.place = Place::Spilled(file);
        self.budget.release(self.charged);
        self.charged = 0;
        Ok(())
    }

    /// Writes `data` at `offset`, zero-filling any gap.
    pub fn write_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        let end = offset
            .checked_add(data.len() as u64)
            .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        self.reserve(end.max(self.len))?;
        match &mut self.place {
            Place::Memory(bytes) => {
                let end = end as usize;
                if bytes.len() < end {
                    bytes.resize(end, 0);
                }
                bytes[offset as usize..end].copy_from_slice(data);
            }
            Place::Spilled(file) => file.write_all_at(data, offset)?,
        }
        self.len = self.len.max(end);
        Ok(())
    }

    /// Appends `data`.
    pub fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.write_at(self.len, data)
    }

    /// Up to `size` bytes from `offset` (fewer at the end).
    pub fn read_at(&self, offset: u64, size: u64) -> io::Result<Vec<u8>> {
        let end = offset.saturating_add(size).min(self.len);
        if offset >= end {
            return Ok(Vec::new());
        }
        match &self.place {
            Place::Memory(bytes) => Ok(bytes[offset as usize..end as usize].to_vec()),
            Place::Spilled(file) => {
                let mut out = vec![0; (end - offset) as usize];
                file.read_exact_at(&mut out, offset)?;
                Ok(out)
            }
        }
    }

    /// Cuts or zero-extends the content to `len` bytes.
    pub fn set_len(&mut self, len: u64) -> io::Result<()> {
        if len > self.len {
            self.reserve(len)?;
        }
        match &mut self.place {
            Place::Memory(bytes) => bytes.resize(len as usize, 0),
            Place::Spilled(file) => file.set_len(len)?,
        }
        self.len = len;
        Ok(())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        self.budget.release(self.charged);
    }
}
