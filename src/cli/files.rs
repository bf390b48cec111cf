//! The file verbs: `ls`, `stat`, `cat`, `get`, `put`, `rm`, `mv`, `cp` and
//! `apply-patch`, each one call printing what it did.

use super::connect::{Fs, Headers, describe_status as fail, flag_names, reason};
use super::format::{count, info_json, info_text};
use super::io;
use crate::pb;
use crate::pb::tools_client::ToolsClient;
use std::io::{Read, Write};
use tonic::transport::Channel;

/// Bytes per WriteBytes message when uploading.
const UPLOAD_CHUNK_BYTES: usize = 1 << 20;

/// `ls`: one line per entry, size then path (`/` after a directory); a
/// file is shown alone, as ls shows it.
pub(super) async fn ls(
    fs: &mut Fs,
    path: String,
    json: bool,
    out: &mut impl Write,
) -> Result<(), String> {
    let entries = match fs
        .list_info(pb::ListInfoRequest { path: path.clone() })
        .await
    {
        Ok(listed) => listed.into_inner().entries,
        // Not a directory: a file is its own listing.
        Err(status) => match fs.stat(pb::StatRequest { path }).await {
            Ok(found) => match found.into_inner().info {
                Some(info) if !info.is_directory => vec![info],
                _ => return Err(fail(&status)),
            },
            Err(_) => return Err(fail(&status)),
        },
    };
    for e in entries {
        if json {
            writeln!(out, "{}", info_json(&e)).map_err(io)?;
        } else {
            let suffix = if e.is_directory { "/" } else { "" };
            writeln!(out, "{:>10}  {}{suffix}", e.size, e.path).map_err(io)?;
        }
    }
    Ok(())
}

/// `stat`: the entry's metadata, one `field: value` line each (or JSON).
pub(super) async fn stat(
    fs: &mut Fs,
    path: String,
    json: bool,
    out: &mut impl Write,
) -> Result<(), String> {
    let info = fs
        .stat(pb::StatRequest { path })
        .await
        .map_err(|s| fail(&s))?
        .into_inner()
        .info
        .unwrap_or_default();
    match json {
        true => writeln!(out, "{}", info_json(&info)),
        false => write!(out, "{}", info_text(&info)),
    }
    .map_err(io)
}

/// `cat`: the file's text (of version `at`) as it is, numbered like
/// `cat -n` when asked (its last line ends as the file's does). An empty or
/// blank file prints its bytes: Read answers those with a sentence meant
/// for a model (`EMPTY_CONTENT_WARNING`), which is fetched again as bytes.
pub(super) async fn cat(
    fs: &mut Fs,
    path: String,
    numbered: bool,
    at: Option<u64>,
    out: &mut impl Write,
) -> Result<(), String> {
    let r = fs
        .read(pb::ReadRequest {
            path: path.clone(),
            version: at,
            ..Default::default()
        })
        .await
        .map_err(|s| fail(&s))?
        .into_inner();
    let text = match r.content == crate::text::EMPTY_CONTENT_WARNING {
        // Blank, or the sentence itself: the bytes as they are.
        true => {
            let mut bytes = Vec::new();
            get(fs, path, at, &mut bytes).await?;
            String::from_utf8_lossy(&bytes).into_owned()
        }
        false => r.content,
    };
    if !numbered {
        return out.write_all(text.as_bytes()).map_err(io);
    }
    for (n, line) in text.split_inclusive('\n').enumerate() {
        write!(out, "{:>6}\t{line}", n + 1).map_err(io)?;
    }
    Ok(())
}

/// `get`: the file's bytes (of version `at`), streamed.
pub(super) async fn get(
    fs: &mut Fs,
    path: String,
    at: Option<u64>,
    out: &mut impl Write,
) -> Result<(), String> {
    let mut stream = fs
        .read_bytes(pb::ReadBytesRequest { path, version: at })
        .await
        .map_err(|s| fail(&s))?
        .into_inner();
    while let Some(chunk) = stream.message().await.map_err(|s| fail(&s))? {
        out.write_all(&chunk.data).map_err(io)?;
    }
    Ok(())
}

/// `put`: stdin uploaded to the file.
pub(super) async fn put(
    fs: &mut Fs,
    path: String,
    create_only: bool,
    out: &mut impl Write,
) -> Result<(), String> {
    use pb::write_bytes_request::Kind;
    let mut data = Vec::new();
    std::io::stdin().read_to_end(&mut data).map_err(io)?;
    let header = pb::WriteBytesHeader {
        path,
        create_only,
        if_version: None,
        executable: None,
    };
    let mut msgs = vec![pb::WriteBytesRequest {
        kind: Some(Kind::Header(header)),
    }];
    msgs.extend(
        data.chunks(UPLOAD_CHUNK_BYTES)
            .map(|c| pb::WriteBytesRequest {
                kind: Some(Kind::Data(c.to_vec())),
            }),
    );
    let size = data.len();
    let w = fs
        .write_bytes(tokio_stream::iter(msgs))
        .await
        .map_err(|s| match s.code() {
            tonic::Code::ResourceExhausted => too_large(&s, size),
            _ => fail(&s),
        })?
        .into_inner();
    writeln!(
        out,
        "{} ({}, version {})",
        w.path,
        count(w.bytes_written, "byte", "bytes"),
        w.version
    )
    .map_err(io)
}

/// A refused upload of `size` bytes: over the server's `max_file_bytes`
/// when its message names the file size limit, else the message as is.
fn too_large(status: &tonic::Status, size: usize) -> String {
    let limit = status
        .message()
        .split_once("file size limit of ")
        .and_then(|(_, rest)| rest.split(' ').next())
        .and_then(|n| n.parse::<u64>().ok());
    match limit {
        Some(limit) => format!(
            "the file is {size} bytes, over the server's max_file_bytes of {limit} bytes \
             (a setting of its configuration) [{}]",
            reason(status)
        ),
        None => format!("{} (the file is {size} bytes)", fail(status)),
    }
}

/// `rm`: the file (or, recursive, the tree) deleted.
pub(super) async fn rm(
    fs: &mut Fs,
    path: String,
    recursive: bool,
    out: &mut impl Write,
) -> Result<(), String> {
    let d = fs
        .delete(pb::DeleteRequest {
            path,
            recursive,
            if_version: None,
        })
        .await
        .map_err(|s| flag_names(fail(&s)))?
        .into_inner();
    let files = count(d.files_deleted, "file", "files");
    writeln!(out, "deleted {} ({files})", d.path).map_err(io)
}

/// `mv`: a file or tree moved.
pub(super) async fn mv(
    fs: &mut Fs,
    req: pb::MoveRequest,
    out: &mut impl Write,
) -> Result<(), String> {
    let m = fs
        .r#move(req)
        .await
        .map_err(|s| flag_names(fail(&s)))?
        .into_inner();
    // A directory has no version (0); a file shows its new one.
    let version = match m.version {
        0 => String::new(),
        v => format!(", version {v}"),
    };
    writeln!(
        out,
        "moved {} to {} ({}{version})",
        m.source,
        m.destination,
        count(m.files_moved, "file", "files")
    )
    .map_err(io)
}

/// `cp`: a file copied.
pub(super) async fn cp(
    fs: &mut Fs,
    req: pb::CopyRequest,
    out: &mut impl Write,
) -> Result<(), String> {
    let c = fs
        .copy(req)
        .await
        .map_err(|s| flag_names(fail(&s)))?
        .into_inner();
    writeln!(
        out,
        "copied {} to {} ({}, version {})",
        c.source,
        c.destination,
        count(c.bytes_written, "byte", "bytes"),
        c.version
    )
    .map_err(io)
}

/// `apply-patch`: stdin applied through the ApplyPatch tool.
pub(super) async fn apply_patch(
    channel: Channel,
    headers: Headers,
    root: Option<String>,
    out: &mut impl Write,
) -> Result<(), String> {
    let mut patch = String::new();
    std::io::stdin().read_to_string(&mut patch).map_err(io)?;
    let envelope = ToolsClient::with_interceptor(channel, headers)
        .apply_patch_tool(pb::ApplyPatchToolRequest {
            patch,
            root,
            tool_call_id: String::new(),
            // --label goes as the header, like every verb's.
            label: None,
        })
        .await
        .map_err(|s| fail(&s))?
        .into_inner()
        .envelope
        .unwrap_or_default();
    if let Some(e) = envelope.error {
        return Err(format!("{} [{}]", e.message, e.code));
    }
    writeln!(out, "{}", envelope.text).map_err(io)
}
