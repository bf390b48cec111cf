//! Grep pattern -> trigram query: which trigrams every file holding a match
//! must contain.
//!
//! The approach of Russ Cox's `google/codesearch` (`index/regexp.go`), built
//! on `regex-syntax`'s HIR: each node of the pattern is summarised by what
//! any string it matches looks like ([`Info`]): its exact strings when there
//! are few, else sets of possible prefixes and suffixes, plus a query every
//! match satisfies. Concatenation crosses the sets, alternation unites them,
//! and a set grown too large is turned into trigrams and cut down. Every step
//! only weakens what is known, never strengthens it, so the final query holds
//! for every string the pattern matches (docs/search-index.md § Exactness;
//! `tests/fuzz.rs` checks it on random patterns).
//!
//! Strings are ASCII-folded as the index's trigrams are (see `trigram`), and
//! the pattern is parsed as grep-regex parses it (case-insensitivity in the
//! HIR's classes: `(?i)k` is `[Kk\u{212A}]`), so `-i` needs no special case.

use super::trigram::{Pieces, Trigram, fold, mixed_case, pack};
use regex_syntax::hir::{Class, Hir, HirKind};
use std::collections::{BTreeSet, HashSet};

/// Most exact strings a node keeps before they become trigrams.
const MAX_EXACT: usize = 16;
/// Most strings of a prefix or suffix set.
const MAX_SET: usize = 32;
/// Largest character class expanded into its members.
const MAX_CLASS: u32 = 16;
/// Largest character class whose members' first and last bytes are
/// gathered (larger ones, such as `\w` or `[^x]`, match any character).
const MAX_EDGE_CLASS: u32 = 1024;
/// Copies of a repeated node analysed; more only repeat what these say.
const MAX_REPEAT: u32 = 3;
/// Most strings whose trigrams a query ORs; a larger set constrains nothing.
///
/// Performance: a seam between two classes' edges (`[a-z_]+x[a-z_]`) crosses
/// up to [`MAX_SET`]² strings, which match nearly every file anyway; each
/// such seam would add an OR of up to 1,024 trigrams to plan and select.
const MAX_ANY_OF: usize = MAX_EXACT * MAX_EXACT;
/// Most nodes of a pattern planned; a larger one is scanned.
///
/// Performance: analysing a node crosses sets of up to [`MAX_EXACT`]²
/// strings and gathers the query so far, about 100 µs for the worst found
/// (170 copies of `[0-9a-f][0-9a-f]x`, 510 nodes); this bounds planning
/// near 50 ms of CPU. Patterns people write have tens of nodes.
const MAX_PLANNED_NODES: usize = 512;
/// Most trigrams an AND names; a part that would take it past them is
/// dropped, which only weakens it.
///
/// Performance: each step of the analysis copies the query so far, so an
/// unbounded query made planning quadratic in the pattern: 300 copies of
/// `[0-9a-f][0-9a-f]x` named 305,920 trigrams and took 0.9 s to plan.
const MAX_LEAVES: usize = 1024;

/// A condition on a file's trigram set.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Query {
    /// Every file (no constraint).
    All,
    /// No file.
    Nothing,
    /// Files holding this trigram.
    Trigram(Trigram),
    /// Files satisfying every part.
    And(Vec<Query>),
    /// Files satisfying some part.
    Or(Vec<Query>),
}

impl Query {
    /// `self AND other`, simplified.
    pub fn and(self, other: Query) -> Query {
        self.join(other, true)
    }

    /// `self OR other`, simplified.
    pub fn or(self, other: Query) -> Query {
        self.join(other, false)
    }

    /// AND (`and`) or OR of two queries, gathered as [`Query::and_of`] and
    /// [`Query::or_of`] do; of an AND that would name more than
    /// [`MAX_LEAVES`] trigrams, only a part that fits.
    fn join(self, other: Query, and: bool) -> Query {
        if and && self.leaves_up_to(MAX_LEAVES) + other.leaves_up_to(MAX_LEAVES) > MAX_LEAVES {
            // Dropping a part of an AND only weakens it.
            return [self, other]
                .into_iter()
                .find(|q| q.leaves_up_to(MAX_LEAVES) <= MAX_LEAVES)
                .unwrap_or(Query::All);
        }
        Query::gather([self, other], and)
    }

    /// The trigrams the query names, counted up to just past `limit`.
    fn leaves_up_to(&self, limit: usize) -> usize {
        match self {
            Query::All | Query::Nothing => 0,
            Query::Trigram(_) => 1,
            Query::And(parts) | Query::Or(parts) => {
                let mut n = 0;
                for part in parts {
                    n += part.leaves_up_to(limit - n.min(limit));
                    if n > limit {
                        break;
                    }
                }
                n
            }
        }
    }

    /// The same query, smaller and cheaper to select: nested parts of the
    /// same kind flattened, repeated parts kept once (`a AND a` would only be
    /// selected again), and the parts every branch of an OR shares taken
    /// out of it: `(a AND x) OR (a AND y)` is `a AND (x OR y)`.
    ///
    /// Performance: crossing a literal with a class's edges gives an OR of
    /// 27 branches that each repeat the literal's trigrams
    /// (`kmalloc_array\([a-z_]+`): selected as planned, each of its
    /// candidates was looked up 27 times in each of 13 lists, and the query
    /// took twice as long (docs/performance.md § Large classes).
    fn simplified(self) -> Query {
        match self {
            Query::And(parts) => Query::and_of(parts.into_iter().map(Query::simplified)),
            Query::Or(parts) => {
                let branches = match Query::or_of(parts.into_iter().map(Query::simplified)) {
                    Query::Or(branches) => branches,
                    q => return q,
                };
                let conjuncts = |q: &Query| match q {
                    Query::And(parts) => parts.clone(),
                    q => vec![q.clone()],
                };
                let mut shared = conjuncts(&branches[0]);
                for branch in &branches[1..] {
                    let theirs = conjuncts(branch);
                    shared.retain(|part| theirs.contains(part));
                }
                if shared.is_empty() {
                    return Query::Or(branches);
                }
                let rest = branches.iter().map(|branch| {
                    Query::and_of(
                        conjuncts(branch)
                            .into_iter()
                            .filter(|p| !shared.contains(p)),
                    )
                });
                let rest = Query::or_of(rest);
                Query::and_of(shared.into_iter().chain([rest]))
            }
            q => q,
        }
    }

    /// The AND of `parts`: nested ANDs flattened, `All` dropped, repeats
    /// kept once; `Nothing` if a part is.
    fn and_of(parts: impl IntoIterator<Item = Query>) -> Query {
        Query::gather(parts, true)
    }

    /// The OR of `parts`: nested ORs flattened, `Nothing` dropped, repeats
    /// kept once; `All` if a part is.
    fn or_of(parts: impl IntoIterator<Item = Query>) -> Query {
        Query::gather(parts, false)
    }

    /// [`Query::and_of`] (`and`) or [`Query::or_of`].
    fn gather(parts: impl IntoIterator<Item = Query>, and: bool) -> Query {
        let (identity, absorbing) = if and {
            (Query::All, Query::Nothing)
        } else {
            (Query::Nothing, Query::All)
        };
        let mut flat = Vec::new();
        for part in parts {
            match part {
                Query::And(p) if and => flat.extend(p),
                Query::Or(p) if !and => flat.extend(p),
                q if q == absorbing => return absorbing,
                q if q == identity => {}
                q => flat.push(q),
            }
        }
        let first: Vec<bool> = {
            let mut seen = HashSet::new();
            flat.iter().map(|q| seen.insert(q)).collect()
        };
        let mut out: Vec<Query> = flat
            .into_iter()
            .zip(first)
            .filter_map(|(q, first)| first.then_some(q))
            .collect();
        match out.len() {
            0 => identity,
            1 => out.pop().unwrap_or(identity),
            _ if and => Query::And(out),
            _ => Query::Or(out),
        }
    }

    /// True when one of a file's pieces satisfies the query: a match lies
    /// in one line, so in one piece ([`super::trigram`]).
    pub fn matches_file(&self, file: &Pieces) -> bool {
        file.iter().any(|piece| self.matches(piece))
    }

    /// True when a piece with these (sorted) trigrams satisfies the query.
    pub fn matches(&self, trigrams: &[Trigram]) -> bool {
        match self {
            Query::All => true,
            Query::Nothing => false,
            Query::Trigram(t) => trigrams.binary_search(t).is_ok(),
            Query::And(parts) => parts.iter().all(|q| q.matches(trigrams)),
            Query::Or(parts) => parts.iter().any(|q| q.matches(trigrams)),
        }
    }

    /// The query every string in `set` satisfies: for each string, all its
    /// trigrams; no constraint when a string is shorter than 3 bytes, or when
    /// the set has more than [`MAX_ANY_OF`] strings.
    fn any_of(set: &BTreeSet<Vec<u8>>) -> Query {
        if set.len() > MAX_ANY_OF || set.iter().any(|s| s.len() < 3) {
            return Query::All;
        }
        let strings = set
            .iter()
            .map(|s| Query::and_of(s.windows(3).map(|w| Query::Trigram(pack(w[0], w[1], w[2])))));
        match set.len() {
            0 => Query::Nothing,
            _ => Query::or_of(strings),
        }
    }
}

/// The trigram query every match of Grep's `pattern` satisfies, parsed as
/// grep-regex parses it (`literal`: a fixed string). `Query::All` when the
/// pattern cannot be planned.
pub fn plan(pattern: &str, literal: bool, case_insensitive: bool) -> Query {
    parse(pattern, literal, case_insensitive).map_or(Query::All, |hir| plan_hir(&hir))
}

/// The Grep pattern parsed as grep-regex parses it (a fixed string
/// escaped, `-i` in the HIR's classes), or `None` when it does not parse or
/// has more than `MAX_PLANNED_NODES` nodes (nothing is planned for it).
pub fn parse(pattern: &str, literal: bool, case_insensitive: bool) -> Option<Hir> {
    let escaped;
    let pattern = if literal {
        escaped = regex_syntax::escape(pattern);
        escaped.as_str()
    } else {
        pattern
    };
    let parsed = regex_syntax::ParserBuilder::new()
        .nest_limit(250)
        .utf8(false)
        .case_insensitive(case_insensitive)
        .build()
        .parse(pattern);
    parsed
        .ok()
        .filter(|hir| nodes_up_to(hir, MAX_PLANNED_NODES) <= MAX_PLANNED_NODES)
}

/// The nodes of `hir`, counted up to just past `limit`.
fn nodes_up_to(hir: &Hir, limit: usize) -> usize {
    let subs: &[Hir] = match hir.kind() {
        HirKind::Concat(parts) | HirKind::Alternation(parts) => parts,
        HirKind::Capture(cap) => std::slice::from_ref(&cap.sub),
        HirKind::Repetition(rep) => std::slice::from_ref(&rep.sub),
        _ => &[],
    };
    let mut n = 1;
    for sub in subs {
        n += nodes_up_to(sub, limit - n.min(limit));
        if n > limit {
            break;
        }
    }
    n
}

/// The trigram query every match of `hir` satisfies.
pub fn plan_hir(hir: &Hir) -> Query {
    let mut info = analyze(hir);
    info.simplify(true);
    info.add_exact();
    info.query.and(written_case(hir)).simplified()
}

/// The mixed-case trigrams (`trigram::mixed_case`) of the literals every
/// match of `hir` holds as written.
///
/// The folded analysis cannot keep them: its sets fold every string, so
/// that `-i`'s classes (`[Dd]`) do not multiply them. A HIR literal,
/// though, matches exactly its bytes, case included: a case-insensitive
/// letter is parsed into a class, never a literal. So a literal's mixed-case
/// windows are in every match of it, recorded as written in the piece that
/// holds the match. Only literals every match passes through count: those
/// of a concatenation, of a repetition of at least one copy, and of every
/// branch of an alternation (an OR). Anything else adds nothing.
fn written_case(hir: &Hir) -> Query {
    match hir.kind() {
        HirKind::Literal(lit) => lit
            .0
            .windows(3)
            .filter(|w| !w.contains(&b'\n'))
            .filter_map(|w| mixed_case(pack(w[0], w[1], w[2])))
            .map(Query::Trigram)
            .fold(Query::All, Query::and),
        HirKind::Capture(cap) => written_case(&cap.sub),
        HirKind::Repetition(rep) if rep.min > 0 => written_case(&rep.sub),
        HirKind::Concat(parts) => parts.iter().map(written_case).fold(Query::All, Query::and),
        HirKind::Alternation(parts) => parts
            .iter()
            .map(written_case)
            .fold(Query::Nothing, Query::or),
        _ => Query::All,
    }
}

type Set = BTreeSet<Vec<u8>>;

/// What is known of every string a node matches.
#[derive(Clone, Debug)]
struct Info {
    /// It may match the empty string.
    can_empty: bool,
    /// All the strings it matches, when few (folded).
    exact: Option<Set>,
    /// Without `exact`: every match starts with one of these.
    prefix: Set,
    /// Without `exact`: every match ends with one of these.
    suffix: Set,
    /// Every match's trigrams satisfy this.
    query: Query,
}

fn set_of(s: &[u8]) -> Set {
    BTreeSet::from([s.to_vec()])
}

fn min_len(set: &Set) -> usize {
    set.iter().map(Vec::len).min().unwrap_or(0)
}

fn cross(a: &Set, b: &Set) -> Set {
    let mut out = Set::new();
    for x in a {
        for y in b {
            let mut s = x.clone();
            s.extend_from_slice(y);
            out.insert(s);
        }
    }
    out
}

impl Info {
    /// Matches exactly the strings in `set`.
    fn exact(set: Set) -> Info {
        Info {
            can_empty: set.contains(&Vec::new()),
            exact: Some(set),
            prefix: Set::new(),
            suffix: Set::new(),
            query: Query::All,
        }
    }

    /// Matches any string, the empty one included when `can_empty`.
    fn any(can_empty: bool) -> Info {
        Info {
            can_empty,
            exact: None,
            prefix: set_of(b""),
            suffix: set_of(b""),
            query: Query::All,
        }
    }

    /// Adds the trigrams of the exact strings to the query.
    fn add_exact(&mut self) {
        if let Some(exact) = &self.exact {
            self.query = std::mem::replace(&mut self.query, Query::All).and(Query::any_of(exact));
        }
    }

    /// Keeps the sets small: too many (or long enough) exact strings become
    /// trigrams plus short prefixes and suffixes; long prefix and suffix sets
    /// become trigrams and are cut to two bytes, then shorter while too many.
    fn simplify(&mut self, force: bool) {
        if let Some(exact) = &self.exact {
            let shortest = min_len(exact);
            if exact.len() > MAX_EXACT || (force && shortest >= 3) {
                self.add_exact();
                let exact = self.exact.take().unwrap_or_default();
                for s in exact {
                    let n = s.len();
                    if n < 3 {
                        self.prefix.insert(s.clone());
                        self.suffix.insert(s);
                    } else {
                        self.prefix.insert(s[..2].to_vec());
                        self.suffix.insert(s[n - 2..].to_vec());
                    }
                }
            }
        }
        if self.exact.is_none() {
            let prefix = std::mem::take(&mut self.prefix);
            self.prefix = self.cut_set(prefix, false);
            let suffix = std::mem::take(&mut self.suffix);
            self.suffix = self.cut_set(suffix, true);
        }
    }

    /// Adds the trigrams of `set` to the query and returns it cut to strings
    /// of at most two bytes (fewer while it has more than [`MAX_SET`]).
    /// Cutting a prefix keeps its start, a suffix its end: every match still
    /// starts (ends) with one of the cut strings.
    fn cut_set(&mut self, set: Set, suffix: bool) -> Set {
        self.query = std::mem::replace(&mut self.query, Query::All).and(Query::any_of(&set));
        let mut set = set;
        let mut keep = 2;
        loop {
            set = set
                .into_iter()
                .map(|s| {
                    if s.len() <= keep {
                        s
                    } else if suffix {
                        s[s.len() - keep..].to_vec()
                    } else {
                        s[..keep].to_vec()
                    }
                })
                .collect();
            if set.len() <= MAX_SET || keep == 0 {
                return set;
            }
            keep -= 1;
        }
    }
}

fn analyze(hir: &Hir) -> Info {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => Info::exact(set_of(b"")),
        HirKind::Literal(lit) => {
            Info::exact(set_of(&lit.0.iter().map(|&b| fold(b)).collect::<Vec<_>>()))
        }
        HirKind::Class(class) => class_info(class),
        HirKind::Capture(cap) => analyze(&cap.sub),
        HirKind::Repetition(rep) => {
            let sub = analyze(&rep.sub);
            if rep.min == 0 {
                return match (&sub.exact, rep.max) {
                    (Some(exact), Some(1)) => {
                        let mut set = exact.clone();
                        set.insert(Vec::new());
                        Info::exact(set)
                    }
                    _ => Info::any(true),
                };
            }
            let copies = rep.min.min(MAX_REPEAT);
            let mut info = sub.clone();
            for _ in 1..copies {
                info = concat(info, sub.clone());
            }
            if rep.max != Some(copies) {
                info = concat(info, Info::any(true));
                // Every match still ends with a match of the repeated node:
                // `[a-z]+,` needs a letter before the comma.
                if info.exact.is_none() {
                    info.suffix = sub.edges().0;
                    info.simplify(false);
                }
            }
            info
        }
        HirKind::Concat(parts) => parts
            .iter()
            .fold(Info::exact(set_of(b"")), |acc, p| concat(acc, analyze(p))),
        HirKind::Alternation(parts) => {
            let mut parts = parts.iter().map(analyze);
            let first = parts.next().unwrap_or_else(|| Info::exact(Set::new()));
            parts.fold(first, alternate)
        }
    }
}

/// A class is its members when few; else one character that starts with
/// one of its members' first bytes and ends with one of their last bytes,
/// when those are few (`\s`, `[a-z_]`); else any single character.
fn class_info(class: &Class) -> Info {
    // (first, last) code of each range: characters, or bytes.
    let ranges: Vec<(u32, u32)> = match class {
        Class::Unicode(c) => c
            .ranges()
            .iter()
            .map(|r| (u32::from(r.start()), u32::from(r.end())))
            .collect(),
        Class::Bytes(c) => c
            .ranges()
            .iter()
            .map(|r| (u32::from(r.start()), u32::from(r.end())))
            .collect(),
    };
    let count: u32 = ranges.iter().map(|(lo, hi)| hi - lo + 1).sum();
    if count > MAX_EDGE_CLASS {
        return Info::any(false);
    }
    let members = ranges
        .into_iter()
        .flat_map(|(lo, hi)| lo..=hi)
        .filter_map(|code| {
            let bytes = match class {
                Class::Unicode(_) => char::from_u32(code)?.to_string().into_bytes(),
                Class::Bytes(_) => vec![code as u8],
            };
            Some(bytes.into_iter().map(fold).collect::<Vec<u8>>())
        });
    if count <= MAX_CLASS {
        return Info::exact(members.collect());
    }
    let (mut first, mut last) = (Set::new(), Set::new());
    for member in members {
        first.insert(member[..1].to_vec());
        last.insert(member[member.len() - 1..].to_vec());
    }
    let few_or_any = |set: Set| {
        if set.len() <= MAX_SET {
            set
        } else {
            set_of(b"")
        }
    };
    Info {
        can_empty: false,
        exact: None,
        prefix: few_or_any(first),
        suffix: few_or_any(last),
        query: Query::All,
    }
}

fn concat(x: Info, y: Info) -> Info {
    let mut xy = Info {
        can_empty: x.can_empty && y.can_empty,
        exact: None,
        prefix: Set::new(),
        suffix: Set::new(),
        query: x.query.clone().and(y.query.clone()),
    };
    match (&x.exact, &y.exact) {
        (Some(xe), Some(ye)) if xe.len() * ye.len() <= MAX_EXACT * MAX_EXACT => {
            xy.exact = Some(cross(xe, ye));
        }
        _ => {
            // A match is u v (u matches x, v matches y).
            let (xs, xp) = x.edges();
            let (ys, yp) = y.edges();
            xy.query = xy.query.and(x.exact_query()).and(y.exact_query());
            xy.prefix = match &x.exact {
                Some(xe) => cross(xe, &yp),
                None if x.can_empty => xp.union(&yp).cloned().collect(),
                None => xp,
            };
            xy.suffix = match &y.exact {
                Some(ye) => cross(&xs, ye),
                None if y.can_empty => ys.union(&xs).cloned().collect(),
                None => ys,
            };
            // The bytes around the seam: u ends with a string of xs, v
            // starts with one of yp.
            if xs.len() <= MAX_SET && yp.len() <= MAX_SET && min_len(&xs) + min_len(&yp) >= 3 {
                xy.query = xy.query.and(Query::any_of(&cross(&xs, &yp)));
            }
        }
    }
    xy.simplify(false);
    xy
}

impl Info {
    /// (suffix set, prefix set): the exact strings when known.
    fn edges(&self) -> (Set, Set) {
        match &self.exact {
            Some(exact) => (exact.clone(), exact.clone()),
            None => (self.suffix.clone(), self.prefix.clone()),
        }
    }

    /// The trigrams of the exact strings (no constraint without them).
    fn exact_query(&self) -> Query {
        self.exact.as_ref().map_or(Query::All, Query::any_of)
    }
}

fn alternate(x: Info, y: Info) -> Info {
    let can_empty = x.can_empty || y.can_empty;
    if let (Some(xe), Some(ye)) = (&x.exact, &y.exact) {
        let mut info = Info::exact(xe.union(ye).cloned().collect());
        info.query = x.query.or(y.query);
        info.can_empty = can_empty;
        info.simplify(false);
        return info;
    }
    let (_, xp) = x.edges();
    let (_, yp) = y.edges();
    let (xs, _) = x.edges();
    let (ys, _) = y.edges();
    let xq = x.query.clone().and(x.exact_query());
    let yq = y.query.clone().and(y.exact_query());
    let mut info = Info {
        can_empty,
        exact: None,
        prefix: xp.union(&yp).cloned().collect(),
        suffix: xs.union(&ys).cloned().collect(),
        query: xq.or(yq),
    };
    info.simplify(false);
    info
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn t(s: &str) -> Query {
        let b = s.as_bytes();
        Query::Trigram(pack(b[0], b[1], b[2]))
    }

    fn file(text: &str) -> Vec<Trigram> {
        let pieces = super::super::trigram::extract(text.as_bytes()).unwrap();
        pieces.iter().next().unwrap().to_vec()
    }

    #[test]
    fn a_literal_needs_all_its_trigrams() {
        let q = plan("hello", false, false);
        for tri in ["hel", "ell", "llo"] {
            assert!(
                matches!(&q, Query::And(parts) if parts.contains(&t(tri))),
                "{q:?}"
            );
        }
        assert!(q.matches(&file("say hello")));
        assert!(!q.matches(&file("say help")));
    }

    #[test]
    fn case_insensitive_plans_folded_trigrams_and_case_sensitive_adds_mixed_case_ones() {
        let q = plan("HeLLo", false, true);
        assert!(q.matches(&file("hello")));
        assert!(q.matches(&file("HELLO")));
        assert!(plan("Drop", true, true).matches(&file("dRoP")));
        // As written, `HeLLo` holds mixed-case windows: only `HeLLo` has them.
        let q = plan("HeLLo", false, false);
        assert!(q.matches(&file("say HeLLo")));
        assert!(!q.matches(&file("hello")) && !q.matches(&file("HELLO")));
        // All one case: the folded trigrams say it all.
        assert_eq!(plan("HELLO", false, false), plan("hello", false, false));
        // Every branch of an alternation, or none: `drop` must stay a candidate.
        let q = plan("impl (Drop|drop)", false, false);
        assert!(q.matches(&file("impl drop")) && q.matches(&file("impl Drop")));
        assert!(!plan("impl Drop", false, false).matches(&file("impl drop")));
        // An optional literal requires nothing.
        assert!(plan("(Dr)?opx", false, false).matches(&file("opx")));
        // The Kelvin sign folds to k under (?i): the plan must allow it.
        assert!(plan("kelvin", false, true).matches(&file("\u{212A}elvin")));
    }

    #[test]
    fn alternation_is_an_or_and_short_branches_drop_the_constraint() {
        let q = plan("foo|barbaz", false, false);
        assert!(q.matches(&file("foo")));
        assert!(q.matches(&file("barbaz")));
        assert!(!q.matches(&file("bar baz")));
        assert_eq!(plan("foo|ba", false, false), Query::All);
    }

    #[test]
    fn patterns_without_a_required_trigram_plan_nothing() {
        for p in [".", "a.*", "\\w+", "ab", "(abc)*", "x?y?z?", "^$"] {
            assert_eq!(plan(p, false, false), Query::All, "{p}");
        }
    }

    #[test]
    fn concatenation_keeps_pieces_and_seams() {
        let q = plan("foo\\w+bar", false, false);
        assert!(q.matches(&file("foo_bar")));
        assert!(!q.matches(&file("foo")));
        let q = plan("ab[cd]ef", false, false);
        assert!(q.matches(&file("abdef")));
        assert!(!q.matches(&file("abxef")));
        let q = plan("(ab){2,}", false, false);
        assert!(q.matches(&file("abab")));
        assert!(!q.matches(&file("ab ab")));
    }

    #[test]
    fn a_large_class_keeps_its_members_first_and_last_bytes() {
        // `\s` has 25 members, `[a-z_]` 27: too many to expand, few edges.
        let q = plan(r"fn\s+parse", false, false);
        assert!(q.matches(&file("fn parse")) && q.matches(&file("fn\tparse")));
        assert!(
            q.matches(&file("fn\u{3000}parse")),
            "a wide space's first byte"
        );
        assert!(!q.matches(&file("parse_fn(x) parse")), "{q:?}");
        // A repetition of one copy or more ends as one copy does.
        let q = plan("alloc_array\\([a-z_]+, sizeof", false, false);
        assert!(q.matches(&file("alloc_array(n, sizeof")));
        assert!(!q.matches(&file("alloc_array(2, sizeof")), "{q:?}");
        // Members of many first bytes say nothing: `[^x]`, `\w`.
        assert_eq!(plan("[^x]", false, false), Query::All);
        assert!(plan(r"ab\wcd", false, false).matches(&file("abécd")));
    }

    #[test]
    fn planning_is_bounded_whatever_the_pattern() {
        // Each seam of this pattern ORs 256 strings: the AND keeps a bounded
        // number of trigrams instead of one OR per copy.
        let q = plan(&"[0-9a-f][0-9a-f]x".repeat(300), false, false);
        assert!(
            q.leaves_up_to(usize::MAX) <= MAX_LEAVES,
            "{}",
            q.leaves_up_to(usize::MAX)
        );
        assert!(q.matches(&file(&"0ax".repeat(300))));
        // Past MAX_PLANNED_NODES the pattern is scanned, not planned.
        assert_ne!(plan(&"abcd.".repeat(100), false, false), Query::All);
        assert_eq!(plan(&"abcd.".repeat(300), false, false), Query::All);
    }

    /// A random query over trigrams 1..=6, with repeats and shared parts.
    fn random_query(rng: &mut StdRng, depth: u32) -> Query {
        match rng.random_range(0..if depth == 0 { 2 } else { 6 }) {
            0 => Query::Trigram(rng.random_range(1..=6)),
            1 if rng.random_range(0..8) == 0 => Query::All,
            1 => Query::Trigram(rng.random_range(1..=6)),
            2 => Query::Nothing,
            3 => Query::And(
                (0..rng.random_range(1..4))
                    .map(|_| random_query(rng, depth - 1))
                    .collect(),
            ),
            _ => {
                // Branches that share a part, as crossed sets give.
                let shared = random_query(rng, depth - 1);
                Query::Or(
                    (0..rng.random_range(1..4))
                        .map(|_| Query::And(vec![shared.clone(), random_query(rng, depth - 1)]))
                        .collect(),
                )
            }
        }
    }

    #[test]
    fn simplifying_a_query_keeps_what_it_selects() {
        let mut rng = StdRng::seed_from_u64(25);
        let pieces: Vec<Vec<Trigram>> = (0..64u32)
            .map(|bits| (1..=6).filter(|t| bits >> (t - 1) & 1 == 1).collect())
            .collect();
        let mut factored = 0;
        for _ in 0..20_000 {
            let q = random_query(&mut rng, 4);
            let simple = q.clone().simplified();
            factored += usize::from(simple.leaves_up_to(usize::MAX) < q.leaves_up_to(usize::MAX));
            for piece in &pieces {
                assert_eq!(
                    q.matches(piece),
                    simple.matches(piece),
                    "{q:?} became {simple:?}"
                );
            }
        }
        assert!(factored > 1_000, "only {factored} queries got smaller");
        // The shape crossing a literal with a class's edges gives.
        let (a, b, x, y) = (t("abc"), t("bcd"), t("cdx"), t("cdy"));
        let crossed = Query::And(vec![
            a.clone(),
            b.clone(),
            Query::Or(vec![
                Query::And(vec![a.clone(), b.clone(), x.clone()]),
                Query::And(vec![a.clone(), b.clone(), y.clone()]),
            ]),
        ]);
        assert_eq!(
            crossed.simplified(),
            Query::And(vec![a, b, Query::Or(vec![x, y])])
        );
    }

    #[test]
    fn literal_mode_escapes_the_pattern() {
        let q = plan("a.b(c", true, false);
        assert!(q.matches(&file("a.b(c")));
        assert!(!q.matches(&file("axb(c")));
    }

    #[test]
    fn an_unparsable_pattern_plans_nothing() {
        assert_eq!(plan("a(", false, false), Query::All);
    }
}
