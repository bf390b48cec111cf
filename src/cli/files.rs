//! The file verbs: `ls`, `stat`, `cat`, `get`, `put`, `rm`, `mv`, `cp` and
//! `apply-patch`, each one call printing what it did.

use super::connect::{Fs, Headers, describe_status as fail};
use super::io;
use crate::pb;
use crate::pb::tools_client::ToolsClient;
use std::io::{Read, Write};
use tonic::transport::Channel;

/// Bytes per WriteBytes message when uploading.
const UPLOAD_CHUNK_BYTES: usize = 1 << 20;

/// `ls`: one line per entry, size then path (`/` after a directory).
pub(super) async fn ls(fs: &mut Fs, path: String, out: &mut impl Write) -> Result<(), String> {
    let entries = fs
        .list_info(pb::ListInfoRequest { path })
        .await
        .map_err(|s| fail(&s))?
        .into_inner()
        .entries;
    for e in entries {
        let suffix = if e.is_directory { "/" } else { "" };
        writeln!(out, "{:>10}  {}{suffix}", e.size, e.path).map_err(io)?;
    }
    Ok(())
}

/// `stat`: the entry's metadata.
pub(super) async fn stat(fs: &mut Fs, path: String, out: &mut impl Write) -> Result<(), String> {
    let info = fs
        .stat(pb::StatRequest { path })
        .await
        .map_err(|s| fail(&s))?
        .into_inner()
        .info
        .unwrap_or_default();
    writeln!(out, "{info:#?}").map_err(io)
}

/// `cat`: the file's text (of version `at`), numbered when asked.
pub(super) async fn cat(
    fs: &mut Fs,
    path: String,
    numbered: bool,
    at: Option<u64>,
    out: &mut impl Write,
) -> Result<(), String> {
    let r = fs
        .read(pb::ReadRequest {
            path,
            numbered,
            version: at,
            ..Default::default()
        })
        .await
        .map_err(|s| fail(&s))?;
    out.write_all(r.into_inner().content.as_bytes()).map_err(io)
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
    let w = fs
        .write_bytes(tokio_stream::iter(msgs))
        .await
        .map_err(|s| fail(&s))?
        .into_inner();
    writeln!(
        out,
        "{} ({} bytes, version {})",
        w.path, w.bytes_written, w.version
    )
    .map_err(io)
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
        .map_err(|s| fail(&s))?
        .into_inner();
    writeln!(out, "deleted {} ({} files)", d.path, d.files_deleted).map_err(io)
}

/// `mv`: a file or tree moved.
pub(super) async fn mv(
    fs: &mut Fs,
    req: pb::MoveRequest,
    out: &mut impl Write,
) -> Result<(), String> {
    let m = fs.r#move(req).await.map_err(|s| fail(&s))?.into_inner();
    // A directory has no version (0); a file shows its new one.
    let version = match m.version {
        0 => String::new(),
        v => format!(", version {v}"),
    };
    writeln!(
        out,
        "moved {} to {} ({} files{version})",
        m.source, m.destination, m.files_moved
    )
    .map_err(io)
}

/// `cp`: a file copied.
pub(super) async fn cp(
    fs: &mut Fs,
    req: pb::CopyRequest,
    out: &mut impl Write,
) -> Result<(), String> {
    let c = fs.copy(req).await.map_err(|s| fail(&s))?.into_inner();
    writeln!(
        out,
        "copied {} to {} ({} bytes, version {})",
        c.source, c.destination, c.bytes_written, c.version
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
