//! Read and ReadRe for every front end that answers with text: the grant,
//! the memory the answer will hold, then the window of lines or the regex
//! matches, on a blocking thread.

use super::{Caller, Service};
use crate::access::Op;
use crate::entry::Entry;
use crate::error::Result;
use crate::path::VfsPath;
use crate::search::compile_regex;
use crate::text::{self, Window};

/// Which lines of which version a Read returns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadText {
    /// A retained version; `None`: the current file.
    pub version: Option<u64>,
    /// Lines skipped before the window.
    pub offset: u64,
    /// Lines in the window; 0: to the end.
    pub limit: u64,
    /// Numbered `cat -n` style rather than verbatim.
    pub numbered: bool,
}

impl Service {
    /// A window of lines of the file at `path` (`read_file` grant) and the
    /// file's metadata; an answer over `max_answer` bytes (what the front
    /// end can send) is refused before it is built (docs/contract.md § Text
    /// formats).
    pub async fn read_text(
        &self,
        caller: &Caller,
        path: VfsPath,
        read: ReadText,
        max_answer: usize,
    ) -> Result<(Window, Entry)> {
        self.run(caller, move |files| {
            let (data, entry) = match read.version {
                None => files.read(&path, Op::ReadFile)?,
                Some(version) => {
                    let (data, found) = files.read_version(&path, version, Op::ReadFile)?;
                    (data, found.entry(path.clone()))
                }
            };
            // The answer (numbered: up to about twice the text) and its
            // encoding, before it is built.
            files.charge(2 * data.len() as u64, "the Read answer")?;
            let window = text::read_window(
                path.as_str(),
                &data,
                read.offset,
                read.limit,
                read.numbered,
                max_answer,
            )?;
            Ok((window, entry))
        })
        .await
    }

    /// The matches of `pattern` in the file at `path` (`read_re` grant),
    /// the next match may reuse up to `overlap` bytes of the previous one
    /// (docs/contract.md § Grants).
    pub async fn read_re(
        &self,
        caller: &Caller,
        path: VfsPath,
        pattern: String,
        overlap: u64,
    ) -> Result<Vec<String>> {
        self.run_asked(caller, move |files| {
            files.check(&path, Op::ReadRe)?;
            // Compiled here, off the runtime, and before the read: a bad
            // pattern is INVALID_ARGUMENT even for a missing file
            // (docs/contract.md § Grants).
            let re = compile_regex(&pattern)?;
            let (data, _) = files.read(&path, Op::ReadRe)?;
            // The matches (their size is capped) and their encoding.
            let answer = data.len().min(text::MAX_READ_RE_BYTES) as u64;
            files.charge(2 * answer, "the ReadRe answer")?;
            let decoded = text::decode(path.as_str(), &data)?;
            text::regex_windows(&decoded.text, &re, overlap)
        })
        .await
    }
}
