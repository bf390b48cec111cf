//! The search walk's view of an ordered tier: [`SortedFiles`] over a
//! [`Frozen`] scope, translating the walk's full-path order keys into the
//! tier's relative keys.

use super::keys::{MountKeys, Seek};
use super::tier::{file_entry, path_of};
use super::{Cursor, Frozen};
use crate::entry::Entry;
use crate::error::Result;
use crate::search::sorted::SortedFiles;

/// One scan over a frozen scope, fed to `search::sorted`.
pub struct Walk<'a, F: Frozen + 'a> {
    keys: &'a MountKeys,
    files: &'a F,
    cursor: F::Cursor<'a>,
    /// The full order key of the entry `seek` returned last.
    last: Option<Vec<u8>>,
}

impl<'a, F: Frozen> Walk<'a, F> {
    /// A walk over all of `files`.
    pub fn new(keys: &'a MountKeys, files: &'a F) -> Result<Walk<'a, F>> {
        Ok(Walk {
            keys,
            files,
            cursor: files.scan(b"", true)?,
            last: None,
        })
    }
}

impl<F: Frozen> SortedFiles for Walk<'_, F> {
    type Data = F::Data;

    fn seek(&mut self, from: &[u8]) -> Option<Result<Entry>> {
        // The walk asks for "the key right after the last one" for every
        // file; a `next` is far cheaper than a fresh seek.
        let successor = self.last.as_ref().is_some_and(|last| {
            from.len() == last.len() + 1 && from.starts_with(last) && from.ends_with(&[0])
        });
        if successor {
            self.cursor.next();
        } else {
            match self.keys.seek(from) {
                Seek::Start => self.cursor.seek(b""),
                Seek::At(rel) => self.cursor.seek(&rel),
                Seek::End => return None,
            }
        }
        let entry = self
            .cursor
            .current()?
            .and_then(|(key, file)| Ok(file_entry(path_of(self.keys, key, &file)?, &file)));
        if let Ok(entry) = &entry {
            self.last = Some(entry.path.order_key());
        }
        Some(entry)
    }

    fn load(&mut self, entry: &Entry) -> Result<F::Data> {
        let rel = self.keys.rel(&entry.path)?;
        self.files.load(&self.cursor, &entry.path, &rel)
    }
}
