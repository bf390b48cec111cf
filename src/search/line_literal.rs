//! A Grep's matcher: grep-regex's, with lines found first by the longest
//! literal every match holds.
//!
//! grep-searcher finds matching lines by asking the matcher for a candidate
//! line ([`Matcher::find_candidate_line`]) and running the whole regex on
//! that line alone. grep-regex's candidate finder searches for a literal it
//! extracts itself, which for `CONFIG_[A-Z_]+_DEBUG_FS\b` is the prefix
//! `CONFIG_`: on the kernel nearly every file the index selects has lines
//! holding it, and the regex ran from each of them (nearly half of that
//! Grep's CPU on State). [`GrepMatcher`] finds candidate lines by the longest
//! literal that every match holds, `_DEBUG_FS` there, as GNU grep's "must"
//! strings do (docs/performance.md § Candidate lines by the longest required
//! literal).
//!
//! Exactness: a match holds the literal on its own line (a Grep's regex never
//! matches a line terminator, and the literal holds none), so a line without
//! it cannot match; every candidate line is still confirmed by the regex, as
//! grep-searcher does with grep-regex's own candidates. `tests/fuzz.rs`
//! (`line_literal_finds_what_the_regex_finds`) compares both on random
//! patterns and haystacks.

use grep_matcher::{ByteSet, LineMatchKind, LineTerminator, Match, Matcher, NoError};
use grep_regex::{RegexCaptures, RegexMatcher};
use memchr::memmem::Finder;
use regex_syntax::hir::{Hir, HirKind};

/// The shortest literal worth a search of its own: shorter ones are common
/// in source (and grep-regex's own prefilter handles them as well).
const MIN_LITERAL_BYTES: usize = 4;

/// grep-regex's matcher, with candidate lines found by the longest literal
/// every match holds when grep-regex would not search for that one itself.
#[derive(Clone, Debug)]
pub struct GrepMatcher {
    regex: RegexMatcher,
    /// The longest required literal, when it is worth searching for
    /// (boxed: a finder is half a kilobyte, and a Grep's options are
    /// moved around in an enum with a Glob's).
    line_literal: Option<Box<Finder<'static>>>,
}

impl GrepMatcher {
    /// `regex`, compiled from the pattern `hir` parses to (`None`: the
    /// pattern was not parsed, and lines are found as grep-regex finds them).
    pub fn new(regex: RegexMatcher, hir: Option<&Hir>) -> GrepMatcher {
        let line_literal = hir
            .and_then(line_literal)
            .map(|literal| Box::new(Finder::new(&literal).into_owned()));
        GrepMatcher {
            regex,
            line_literal,
        }
    }

    /// The literal candidate lines are found by, if not grep-regex's own.
    pub fn line_literal(&self) -> Option<&[u8]> {
        self.line_literal.as_deref().map(Finder::needle)
    }
}

/// The longest literal every match of `hir` holds, when it is at least
/// [`MIN_LITERAL_BYTES`] long and grep-regex would not find lines by it
/// anyway: not the whole pattern (a literal is matched directly) and not
/// the pattern's first part (grep-regex's prefilter searches a required
/// prefix itself).
fn line_literal(hir: &Hir) -> Option<Vec<u8>> {
    let HirKind::Concat(parts) = hir.kind() else {
        return None;
    };
    let mut required = Vec::new();
    parts
        .iter()
        .for_each(|part| required_literals(part, &mut required));
    let longest = required.iter().max_by_key(|lit| lit.len())?;
    let first = match parts.first().map(Hir::kind) {
        Some(HirKind::Literal(lit)) => Some(&lit.0[..]),
        _ => None,
    };
    (longest.len() >= MIN_LITERAL_BYTES && Some(&longest[..]) != first && !longest.contains(&b'\n'))
        .then(|| longest.to_vec())
}

/// Adds the literals every match of `hir` holds whole: its own, those of
/// the parts of a concatenation, and those of a repetition of at least one
/// copy. An alternation's branches hold different ones, so none counts. A
/// case-insensitive letter is parsed into a class, never a literal, so a
/// literal is matched exactly as its bytes.
fn required_literals(hir: &Hir, found: &mut Vec<Vec<u8>>) {
    match hir.kind() {
        HirKind::Literal(lit) => found.push(lit.0.to_vec()),
        HirKind::Capture(cap) => required_literals(&cap.sub, found),
        HirKind::Repetition(rep) if rep.min > 0 => required_literals(&rep.sub, found),
        HirKind::Concat(parts) => parts.iter().for_each(|part| required_literals(part, found)),
        _ => {}
    }
}

/// Everything is grep-regex's but [`Matcher::find_candidate_line`].
impl Matcher for GrepMatcher {
    type Captures = RegexCaptures;
    type Error = NoError;

    fn find_at(&self, haystack: &[u8], at: usize) -> Result<Option<Match>, NoError> {
        self.regex.find_at(haystack, at)
    }

    fn new_captures(&self) -> Result<RegexCaptures, NoError> {
        self.regex.new_captures()
    }

    fn capture_count(&self) -> usize {
        self.regex.capture_count()
    }

    fn capture_index(&self, name: &str) -> Option<usize> {
        self.regex.capture_index(name)
    }

    fn try_find_iter<F, E>(&self, haystack: &[u8], matched: F) -> Result<Result<(), E>, NoError>
    where
        F: FnMut(Match) -> Result<bool, E>,
    {
        self.regex.try_find_iter(haystack, matched)
    }

    fn captures_at(
        &self,
        haystack: &[u8],
        at: usize,
        caps: &mut RegexCaptures,
    ) -> Result<bool, NoError> {
        self.regex.captures_at(haystack, at, caps)
    }

    fn shortest_match_at(&self, haystack: &[u8], at: usize) -> Result<Option<usize>, NoError> {
        self.regex.shortest_match_at(haystack, at)
    }

    fn non_matching_bytes(&self) -> Option<&ByteSet> {
        self.regex.non_matching_bytes()
    }

    fn line_terminator(&self) -> Option<LineTerminator> {
        self.regex.line_terminator()
    }

    /// The line holding the next occurrence of the required literal, for
    /// grep-searcher to confirm with the regex.
    fn find_candidate_line(&self, haystack: &[u8]) -> Result<Option<LineMatchKind>, NoError> {
        match &self.line_literal {
            Some(literal) => Ok(literal.find(haystack).map(LineMatchKind::Candidate)),
            None => self.regex.find_candidate_line(haystack),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::index::plan::parse;

    fn literal_of(pattern: &str, case_insensitive: bool) -> Option<Vec<u8>> {
        line_literal(&parse(pattern, false, case_insensitive)?)
    }

    #[test]
    fn the_longest_required_literal_past_the_prefix_is_chosen() {
        let of = |p| literal_of(p, false);
        assert_eq!(
            of(r"CONFIG_[A-Z_]+_DEBUG_FS\b"),
            Some(b"_DEBUG_FS".to_vec())
        );
        assert_eq!(
            of(r"(spin|mutex)_lock_irqsave_nested"),
            Some(b"_lock_irqsave_nested".to_vec())
        );
        assert_eq!(of(r"a+(?:_header)+\d"), Some(b"_header".to_vec()));
        // The prefix is grep-regex's own; a literal is matched directly.
        assert_eq!(of(r"kmalloc_array\([a-z_]+, sizeof"), None);
        assert_eq!(of("hello world"), None);
        // Too short, optional, or in one branch only.
        assert_eq!(of(r"0x[dD][eE][aA][dD]"), None);
        assert_eq!(of(r"\d+(?:_optional)?x"), None);
        assert_eq!(of(r"\d+(?:_branch|other)x"), None);
        assert_eq!(of(r"\d+(?:_starred)*x"), None);
        // Case-insensitive letters are classes: only caseless runs remain.
        assert_eq!(literal_of(r"\d+_debug_fs", true), None);
        assert_eq!(literal_of(r"\d+_1234_", true), Some(b"_1234_".to_vec()));
    }
}
