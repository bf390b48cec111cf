package main

import (
	"sort"
	"strings"
)

// editRefusal is why an Edit or MultiEdit is refused with INVALID_ARGUMENT
// (src/text/edit.rs): which edit (-1 for an Edit, which names none) and how.
type editRefusal struct {
	index int
	kind  string
}

// The kinds of refusal, as the server words them.
const (
	refusedNoMatch  = "not found in file"
	refusedSeveral  = "must be unique"
	refusedOverlap  = "overlaps edit"
	refusedSame     = "exactly the same"
	refusedEmptyOld = "must not be empty"
)

// applyEdits does what the server does with an Edit (multi false: one
// replacement) or a MultiEdit: every replacement is matched against the
// original text, must match once (at least once with All), and no two may
// overlap; the refusal names the first failing edit, as src/text/edit.rs
// checks them.
func applyEdits(text string, edits []Replacement, multi bool) (string, uint64, *editRefusal) {
	refuse := func(i int, kind string) (string, uint64, *editRefusal) {
		if !multi {
			i = -1
		}
		return "", 0, &editRefusal{index: i, kind: kind}
	}
	for i, e := range edits {
		switch n := strings.Count(text, e.Old); {
		case e.Old == "":
			return refuse(i, refusedEmptyOld)
		case e.Old == e.New:
			return refuse(i, refusedSame)
		case n == 0:
			return refuse(i, refusedNoMatch)
		case n > 1 && !e.All:
			return refuse(i, refusedSeveral)
		}
	}
	type match struct{ at, edit int }
	var matches []match
	for i, e := range edits {
		for from := 0; ; {
			at := strings.Index(text[from:], e.Old)
			if at < 0 {
				break
			}
			matches = append(matches, match{from + at, i})
			from += at + len(e.Old)
		}
	}
	sort.Slice(matches, func(a, b int) bool {
		if matches[a].at != matches[b].at {
			return matches[a].at < matches[b].at
		}
		return matches[a].edit < matches[b].edit
	})
	var out strings.Builder
	copied, end, last := 0, -1, -1
	for _, m := range matches {
		if last >= 0 && end > m.at {
			return refuse(max(m.edit, last), refusedOverlap)
		}
		out.WriteString(text[copied:m.at])
		out.WriteString(edits[m.edit].New)
		copied = m.at + len(edits[m.edit].Old)
		end, last = copied, m.edit
	}
	out.WriteString(text[copied:])
	return out.String(), uint64(len(matches)), nil
}

// refusalOf reads which refusal a server's INVALID_ARGUMENT answer to an
// edit states, from its message and its edit_index; nil when the message
// is none of the kinds above.
func refusalOf(out Output, multi bool) *editRefusal {
	for _, kind := range []string{refusedNoMatch, refusedSeveral, refusedOverlap, refusedSame, refusedEmptyOld} {
		if !strings.Contains(out.Message, kind) {
			continue
		}
		index := -1
		if multi {
			if out.EditIndex == nil {
				return nil
			}
			index = *out.EditIndex
		}
		return &editRefusal{index: index, kind: kind}
	}
	return nil
}
