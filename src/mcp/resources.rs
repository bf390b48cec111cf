//! Files as MCP resources: listed under the caller's grants a page at a
//! time, read as text or as a base64 blob, named by `agentvfs://` URIs
//! (docs/mcp.md § Resources).
//!
//! A file's URI is `agentvfs://` followed by its logical path, each byte
//! outside the URI's unreserved and path characters percent-encoded:
//! `/workspace/notes/a b.md` is `agentvfs:///workspace/notes/a%20b.md`.
//! Reading decodes it back and parses the path as every call does, so a
//! URI can name nothing a path could not.

use crate::access::Op;
use crate::entry::Entry;
use crate::error::{Error, Result};
use crate::path::{MAX_PATH_BYTES, VfsPath};
use crate::service::{Caller, Service};
use base64::Engine;
use rmcp::model::{
    ListResourcesResult, ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
};

/// The URI scheme of files.
pub const SCHEME: &str = "agentvfs://";
/// The one resource template: any file by its absolute logical path.
pub const TEMPLATE: &str = "agentvfs://{+path}";
/// The template's one argument (completed by `completion/complete`).
pub const TEMPLATE_ARGUMENT: &str = "path";
/// The longest URI a request may name: that of the longest valid path
/// ([`MAX_PATH_BYTES`]) with every byte percent-encoded. Anything longer
/// names no file, and is refused before the server keeps any of it (a
/// subscription keeps its URI for the session's life).
pub const MAX_URI_BYTES: usize = SCHEME.len() + 3 * MAX_PATH_BYTES;

/// Refuses (INVALID_ARGUMENT naming the bound) a URI longer than
/// [`MAX_URI_BYTES`], of any scheme.
pub fn check_uri_length(uri: &str) -> Result<()> {
    if uri.len() <= MAX_URI_BYTES {
        return Ok(());
    }
    Err(Error::InvalidArgument(format!(
        "resource URI of {} bytes is longer than {MAX_URI_BYTES} bytes, the most a URI may \
         have (the URI of the longest path, {MAX_PATH_BYTES} bytes, every byte \
         percent-encoded): {}",
        uri.len(),
        crate::error::echo(uri)
    )))
}

/// Files per `resources/list` page: a page is one walk under the search
/// budgets, so it stays small enough to answer quickly.
pub const PAGE_SIZE: usize = 200;

/// The URI template clients fill in to read any path.
pub fn template() -> ResourceTemplate {
    ResourceTemplate::new(TEMPLATE, "file")
        .with_title("A file by its logical path")
        .with_description(
            "Any file the caller may read, by its absolute logical path, e.g. \
             agentvfs:///workspace/README.md (percent-encode spaces and non-ASCII).",
        )
}

/// One page of the files below `root` the caller may list, after the
/// position `cursor` (from the previous page) encodes.
pub async fn list(
    service: &Service,
    caller: &Caller,
    root: &VfsPath,
    cursor: Option<&str>,
) -> Result<ListResourcesResult> {
    let after = cursor.map(decode_cursor).transpose()?;
    let (files, more) = service
        .files_after(caller, root.clone(), after, PAGE_SIZE)
        .await?;
    let next_cursor = match files.last() {
        Some(last) if more => Some(encode_cursor(&last.path)),
        _ => None,
    };
    let mut page = ListResourcesResult::with_all_items(files.iter().map(resource).collect());
    page.next_cursor = next_cursor;
    Ok(page)
}

/// The contents of the file `uri` names: text when it is UTF-8 text (the
/// `read_file` grant, or `read_binary`), else a base64 blob (`read_binary`).
pub async fn read(service: &Service, caller: &Caller, uri: &str) -> Result<ReadResourceResult> {
    let path = parse_uri(uri)?;
    let (data, entry) = service
        .run(caller, move |files| {
            let op = if files.may(&path, Op::ReadFile) {
                Op::ReadFile
            } else {
                Op::ReadBinary
            };
            let (data, entry) = files.read(&path, op)?;
            if op == Op::ReadFile && !is_text(&data) {
                files.check(&path, Op::ReadBinary)?;
            }
            Ok((data, entry))
        })
        .await?;
    let uri = uri_of(&entry.path);
    let mime = mime_type(entry.path.name());
    let contents = match String::from_utf8(data) {
        Ok(text) if !crate::text::is_binary(text.as_bytes()) => {
            ResourceContents::text(text, uri).with_mime_type(mime.unwrap_or("text/plain"))
        }
        Ok(text) => blob(text.into_bytes(), uri, mime),
        Err(e) => blob(e.into_bytes(), uri, mime),
    };
    Ok(ReadResourceResult::new(vec![contents]))
}

fn blob(data: Vec<u8>, uri: String, mime: Option<&str>) -> ResourceContents {
    let encoded = base64::engine::general_purpose::STANDARD.encode(data);
    ResourceContents::blob(encoded, uri).with_mime_type(mime.unwrap_or("application/octet-stream"))
}

/// True when `data` is sent as text: UTF-8 with no NUL near the start.
fn is_text(data: &[u8]) -> bool {
    !crate::text::is_binary(data) && std::str::from_utf8(data).is_ok()
}

/// The listing of one file.
fn resource(entry: &Entry) -> Resource {
    let mut resource = Resource::new(uri_of(&entry.path), entry.path.name())
        .with_title(entry.path.as_str())
        .with_size(entry.size);
    if let Some(mime) = mime_type(entry.path.name()) {
        resource = resource.with_mime_type(mime);
    }
    resource
}

/// Bytes a URI path keeps as they are: RFC 3986 unreserved characters, the
/// path separator, and the sub-delimiters a path segment may hold.
fn keeps(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~/!$&'()*+,;=:@".contains(&b)
}

/// The URI of a logical path.
pub fn uri_of(path: &VfsPath) -> String {
    let mut uri = String::with_capacity(SCHEME.len() + path.as_str().len());
    uri.push_str(SCHEME);
    for &b in path.as_str().as_bytes() {
        if keeps(b) {
            uri.push(b as char);
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri
}

/// The logical path a URI names; anything else is INVALID_ARGUMENT naming
/// what is wrong.
pub fn parse_uri(uri: &str) -> Result<VfsPath> {
    check_uri_length(uri)?;
    let invalid = |why: &str| {
        Error::InvalidArgument(format!(
            "resource URI {}: {why}; expected agentvfs:///absolute/logical/path",
            crate::error::echo(uri)
        ))
    };
    let rest = uri
        .strip_prefix(SCHEME)
        .ok_or_else(|| invalid("not an agentvfs:// URI"))?;
    if !rest.starts_with('/') {
        return Err(invalid(
            "the path must be absolute (agentvfs:/// and the path)",
        ));
    }
    if rest.contains(['?', '#']) {
        // Raw, they start a query or fragment; in a path they are %3F, %23.
        return Err(invalid("a query or fragment is not part of a path"));
    }
    let mut bytes = Vec::with_capacity(rest.len());
    let mut input = rest.bytes();
    while let Some(b) = input.next() {
        if b != b'%' {
            bytes.push(b);
            continue;
        }
        let hex = [input.next(), input.next()];
        let value = match hex {
            [Some(h), Some(l)] => std::str::from_utf8(&[h, l])
                .ok()
                .and_then(|s| u8::from_str_radix(s, 16).ok()),
            _ => None,
        };
        bytes.push(value.ok_or_else(|| invalid("a % is not followed by two hex digits"))?);
    }
    let path = String::from_utf8(bytes).map_err(|_| invalid("the path is not UTF-8"))?;
    VfsPath::parse(&path)
}

/// The opaque `resources/list` cursor of the position after `path`.
fn encode_cursor(path: &VfsPath) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(path.as_str())
}

/// The position a cursor encodes; a cursor this server did not make is
/// INVALID_ARGUMENT.
fn decode_cursor(cursor: &str) -> Result<VfsPath> {
    let invalid = || {
        Error::InvalidArgument(format!(
            "invalid resources/list cursor {}: pass back the nextCursor of the previous page",
            crate::error::echo(cursor)
        ))
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .map_err(|_| invalid())?;
    let path = String::from_utf8(bytes).map_err(|_| invalid())?;
    VfsPath::parse(&path).map_err(|_| invalid())
}

/// The media type of a file by its extension, for the common ones an agent
/// meets; None leaves the choice to the reader (text or octet-stream).
fn mime_type(name: &str) -> Option<&'static str> {
    let ext = name.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match ext.as_str() {
        "md" | "markdown" => "text/markdown",
        "txt" | "log" => "text/plain",
        "html" | "htm" => "text/html",
        "css" => "text/css",
        "csv" => "text/csv",
        "js" | "mjs" | "cjs" => "text/javascript",
        "ts" | "tsx" => "text/x-typescript",
        "py" => "text/x-python",
        "rs" => "text/x-rust",
        "go" => "text/x-go",
        "java" => "text/x-java",
        "c" | "h" => "text/x-c",
        "cc" | "cpp" | "hpp" => "text/x-c++",
        "sh" => "text/x-shellscript",
        "toml" => "application/toml",
        "yaml" | "yml" => "application/yaml",
        "json" => "application/json",
        "xml" => "application/xml",
        "pdf" => "application/pdf",
        "zip" => "application/zip",
        "gz" => "application/gzip",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_round_trip_and_encode_what_a_uri_cannot_hold() {
        for raw in ["/workspace/a b.md", "/é/100%/x#y", "/", "/a/.hidden"] {
            let path = VfsPath::parse(raw).unwrap();
            let uri = uri_of(&path);
            assert!(!uri.contains([' ', '#', '?']), "{uri}");
            assert_eq!(parse_uri(&uri).unwrap(), path, "{uri}");
        }
        assert_eq!(
            uri_of(&VfsPath::parse("/workspace/a b.md").unwrap()),
            "agentvfs:///workspace/a%20b.md"
        );
    }

    #[test]
    fn bad_uris_name_the_problem() {
        let message = |uri: &str| parse_uri(uri).unwrap_err().to_string();
        assert!(message("file:///etc/passwd").contains("not an agentvfs:// URI"));
        assert!(message("agentvfs://host/x").contains("must be absolute"));
        assert!(message("agentvfs:///a%2").contains("two hex digits"));
        assert!(message("agentvfs:///a%ff").contains("not UTF-8"));
        assert!(message("agentvfs:///a/../../etc").contains(".."));
        assert!(message("agentvfs:///a#frag").contains("query or fragment"));
        let segment = format!("/{}", "é".repeat(127));
        let longest = uri_of(&VfsPath::parse(&segment.repeat(16)).unwrap());
        assert!(longest.len() <= MAX_URI_BYTES, "{}", longest.len());
        let over = format!("agentvfs:///{}", "a".repeat(MAX_URI_BYTES));
        assert!(message(&over).contains(&format!("longer than {MAX_URI_BYTES} bytes")));
    }

    #[test]
    fn cursors_round_trip_and_refuse_forgeries() {
        let path = VfsPath::parse("/workspace/src/main.rs").unwrap();
        assert_eq!(decode_cursor(&encode_cursor(&path)).unwrap(), path);
        assert!(decode_cursor("not base64!").is_err());
        assert!(
            decode_cursor(&base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("rel")).is_err()
        );
    }
}
