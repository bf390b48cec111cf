//! ReadRe's answer: every match of a regular expression in one file, with
//! optional overlap, bounded in count and bytes before it is built.

use crate::error::{Error, Result};
use regex::Regex;

/// Most matches ReadRe returns; beyond it the call fails and asks for a
/// narrower pattern instead of silently dropping matches.
pub const MAX_READ_RE_MATCHES: usize = 10_000;

/// Most bytes of matches ReadRe returns in one answer (16 MiB, far below the
/// largest message): whole files are Read's job.
pub const MAX_READ_RE_BYTES: usize = 16 << 20;

/// Every match of `re` in `text` (ReadRe). `overlap` lets the next match
/// reuse up to that many bytes of the previous one; 0 gives plain
/// non-overlapping matches.
///
/// The answer is bounded before it grows: more than [`MAX_READ_RE_MATCHES`]
/// matches or [`MAX_READ_RE_BYTES`] of them is RESOURCE_EXHAUSTED. (With a
/// large `overlap`, a pattern such as `[\s\S]*z` matches from every position
/// to the end of the file: 10,000 such matches of a 3 MiB file would be 30 GB.)
pub fn regex_windows(text: &str, re: &Regex, overlap: u64) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut bytes = 0;
    let mut from = 0;
    while from <= text.len() {
        let Some(m) = re.find_at(text, from) else {
            break;
        };
        if out.len() == MAX_READ_RE_MATCHES {
            return Err(Error::TooLarge(format!(
                "more than {MAX_READ_RE_MATCHES} matches; narrow the pattern"
            )));
        }
        bytes += m.len();
        if bytes > MAX_READ_RE_BYTES {
            return Err(Error::TooLarge(format!(
                "the matches add up to more than {MAX_READ_RE_BYTES} bytes; narrow the pattern \
                 or lower overlap"
            )));
        }
        out.push(m.as_str().to_owned());
        let reuse = usize::try_from(overlap).unwrap_or(usize::MAX);
        let mut next = m.end().saturating_sub(reuse).max(m.start() + 1);
        if m.start() == m.end() {
            next = m.end() + 1;
        }
        while next < text.len() && !text.is_char_boundary(next) {
            next += 1;
        }
        from = next;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regex_windows_overlap() {
        let re = |p: &str| Regex::new(p).unwrap();
        assert_eq!(
            regex_windows("aaaa", &re("aa"), 0).unwrap(),
            vec!["aa", "aa"]
        );
        assert_eq!(
            regex_windows("aaaa", &re("aa"), 1).unwrap(),
            vec!["aa", "aa", "aa"]
        );
        assert_eq!(
            regex_windows("é1é2", &re(r"\d"), 0).unwrap(),
            vec!["1", "2"]
        );
    }

    #[test]
    fn regex_windows_bound_the_answer_before_building_it() {
        // Every position to the end: about 3 MiB per match.
        let text = "x".repeat(3 << 20) + "z";
        let err = regex_windows(&text, &Regex::new(r"[\s\S]*z").unwrap(), u64::MAX).unwrap_err();
        assert_eq!(err.code(), "INVALID_PARAM");
        assert!(
            err.to_string().contains("more than 16777216 bytes"),
            "{err}"
        );
    }
}
