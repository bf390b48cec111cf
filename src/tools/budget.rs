//! The output budget: no envelope's text exceeds `max_output_lines` /
//! `max_output_bytes` (`[tools]` config; 2000 lines / 51200 bytes by default).
//!
//! Called by [`super::Tools::invoke_args`] on every result that ran. A text
//! over budget is saved whole through the [`crate::service::Backend`] under
//! `large_result_prefix/{sanitized tool_call_id}` (so the model can page
//! through it with Read or search it with Grep), the status becomes partial,
//! and the text becomes a note saying where the full result is, followed by a
//! head preview (two fifths of the budget) and a tail preview (one fifth).
//! Saving needs the caller's `write` grant there; without it (or when the
//! write fails) the note says so and the previews remain.
//!
//! `data` is not touched: every tool already bounds it by its `limit`
//! parameter and line clipping.

use super::ToolsConfig;
use super::{Call, Outcome, Status};
use crate::path::VfsPath;
use crate::service::Precondition;
use std::fmt::Write as _;

/// Longest file name made from a tool call id (path segments hold 255).
const MAX_ID_CHARS: usize = 200;

/// The file name a tool call's full result is saved under: the id with
/// every character a path may not hold replaced (docs/contract.md § Text
/// formats, plus `*`/`?`), or a fresh id when none was given.
pub fn result_name(tool_call_id: &str) -> String {
    if tool_call_id.is_empty() {
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        return format!("call_{stamp}_{:08x}", rand::random::<u32>());
    }
    sanitize_tool_call_id(tool_call_id)
        .chars()
        .map(|c| if matches!(c, '*' | '?') { '_' } else { c })
        .take(MAX_ID_CHARS)
        .collect()
}

/// Lines of `text` from the start (`from_end` false) or the end, within
/// `max_lines` and `max_bytes`; a single line longer than the byte budget
/// is cut on a character boundary.
fn take_lines(text: &str, max_lines: usize, max_bytes: usize, from_end: bool) -> (String, usize) {
    let all: Vec<&str> = text.lines().collect();
    let mut picked: Vec<String> = Vec::new();
    let mut bytes = 0;
    let order: Box<dyn Iterator<Item = &&str>> = if from_end {
        Box::new(all.iter().rev())
    } else {
        Box::new(all.iter())
    };
    for line in order {
        if picked.len() == max_lines || bytes >= max_bytes {
            break;
        }
        let room = max_bytes - bytes;
        let line = if line.len() + 1 > room {
            let mut cut = room.saturating_sub(1);
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            format!("{}… [line truncated]", &line[..cut])
        } else {
            (*line).to_owned()
        };
        bytes += line.len() + 1;
        picked.push(line);
    }
    let n = picked.len();
    if from_end {
        picked.reverse();
    }
    (picked.join("\n"), n)
}

/// Bounds `outcome`'s text (see the module doc).
pub async fn apply(
    call: &Call,
    config: &ToolsConfig,
    outcome: Outcome,
    tool_call_id: &str,
) -> Outcome {
    let lines = outcome.text.lines().count();
    let bytes = outcome.text.len();
    let (max_lines, max_bytes) = (
        config.max_output_lines as usize,
        config.max_output_bytes as usize,
    );
    if lines <= max_lines && bytes <= max_bytes {
        return outcome;
    }
    let name = result_name(tool_call_id);
    let saved = match config.large_result_prefix.join(&name) {
        Err(e) => Err(e.to_string()),
        Ok(target) => save(call, target, outcome.text.clone()).await,
    };
    let mut text = format!(
        "[Output too large: {lines} lines / {bytes} bytes exceeds the limit of {max_lines} lines / {max_bytes} bytes."
    );
    let mut data = outcome.data;
    match &saved {
        Ok(shown) => {
            // Writing into a String cannot fail.
            let _ = write!(
                text,
                " Full result saved to '{shown}'. Read it with start_line/limit to page through it, or Grep it.]"
            );
            data.insert("full_result_path".into(), shown.clone().into());
        }
        Err(why) => {
            let _ = write!(text, " The full result could not be saved: {why}.]");
        }
    }
    let (head, head_lines) = take_lines(&outcome.text, max_lines * 2 / 5, max_bytes * 2 / 5, false);
    let rest: String = outcome
        .text
        .lines()
        .skip(head_lines)
        .collect::<Vec<_>>()
        .join("\n");
    let (tail, tail_lines) = take_lines(&rest, max_lines / 5, max_bytes / 5, true);
    let omitted = lines.saturating_sub(head_lines + tail_lines);
    let _ = write!(text, "\n\n{head}");
    if omitted > 0 {
        let _ = write!(text, "\n\n... [{omitted} lines omitted] ...");
    }
    if !tail.is_empty() {
        let _ = write!(text, "\n\n{tail}");
    }
    tracing::info!(
        lines,
        bytes,
        saved = saved.is_ok(),
        "tool result over budget"
    );
    Outcome {
        status: Status::Partial,
        data,
        text,
        stats: outcome.stats,
    }
}

/// Saves the full text; the path as shown to the model, or why not.
async fn save(call: &Call, target: VfsPath, text: String) -> Result<String, String> {
    let shown = call.display(&target);
    call.service
        .write(
            &call.caller,
            target,
            text.into_bytes(),
            Precondition::default(),
        )
        .await
        .map_err(|e| e.to_string())?;
    Ok(shown)
}

/// Makes a tool call id safe to use as a file name (large tool results are
/// saved under a name derived from it).
///
/// Like deepagents, `.`, `/` and `\` become `_`, so the id cannot climb out of
/// its directory or name another one. Beyond deepagents, control characters
/// (NUL included) also become `_`, since path validation rejects them, and an
/// empty id becomes `"_"` so the name is never empty. Length is not bounded
/// here; an id longer than a path segment may hold is rejected by path
/// validation.
pub fn sanitize_tool_call_id(id: &str) -> String {
    if id.is_empty() {
        return "_".to_owned();
    }
    id.chars()
        .map(|c| {
            if matches!(c, '.' | '/' | '\\') || c.is_control() {
                '_'
            } else {
                c
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitizing_replaces_path_characters_and_controls() {
        assert_eq!(sanitize_tool_call_id("call_abc123"), "call_abc123");
        assert_eq!(
            sanitize_tool_call_id("../../etc/passwd"),
            "______etc_passwd"
        );
        assert_eq!(sanitize_tool_call_id("a\\b.c"), "a_b_c");
        assert_eq!(sanitize_tool_call_id("a\0b\nc\u{7f}"), "a_b_c_");
        assert_eq!(sanitize_tool_call_id("日本-id"), "日本-id");
        assert_eq!(sanitize_tool_call_id(""), "_");
    }

    #[test]
    fn result_names_are_single_safe_segments() {
        assert_eq!(result_name("call_1"), "call_1");
        assert_eq!(result_name("../x/*?"), "___x___");
        assert!(result_name("").starts_with("call_"));
        assert_eq!(result_name(&"a".repeat(400)).len(), MAX_ID_CHARS);
    }

    #[test]
    fn head_and_tail_stay_within_their_budgets() {
        let text: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let (head, n) = take_lines(&text, 3, 1000, false);
        assert_eq!((head.as_str(), n), ("line 0\nline 1\nline 2", 3));
        let (tail, n) = take_lines(&text, 2, 1000, true);
        assert_eq!((tail.as_str(), n), ("line 98\nline 99", 2));
        let long = "é".repeat(100);
        let (cut, _) = take_lines(&long, 10, 11, false);
        assert!(cut.starts_with("ééééé…"), "{cut}");
    }
}
