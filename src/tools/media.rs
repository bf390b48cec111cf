//! Media reads: the Read tool answers an image (PNG, JPEG, GIF, WebP) or a
//! PDF as its bytes in base64 with its MIME type, the form a model takes
//! images and documents in (docs/contract.md § Read (media)); MCP sends it
//! as image content, or a PDF as an embedded resource (`crate::mcp`), as
//! the MCP reference filesystem server's `read_media_file` does.
//!
//! The kind is decided by the content's magic bytes, never by the name
//! alone, so a PNG named `notes.txt` is an image and a text file named
//! `a.png` is text. A media read is bounded by [`MAX_MEDIA_BYTES`].

use crate::error::{Error, Result};
use crate::path::VfsPath;

/// Largest file a media read answers: 5 MiB, the most Anthropic's API
/// takes for one image; its base64 (a third larger) stays well inside a
/// gRPC answer.
pub const MAX_MEDIA_BYTES: u64 = 5 * 1024 * 1024;

/// What a media file is, by its content.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Media {
    /// The MIME type (`image/png`, ..., `application/pdf`).
    pub mime_type: &'static str,
    /// True for images (MCP image content); false for documents (an
    /// embedded resource).
    pub image: bool,
}

/// The media kind `data` starts like, if any: PNG, JPEG, GIF (87a, 89a),
/// WebP (a RIFF container of WEBP) or PDF.
pub fn detect(data: &[u8]) -> Option<Media> {
    let image = |mime_type| {
        Some(Media {
            mime_type,
            image: true,
        })
    };
    if data.starts_with(b"\x89PNG\r\n\x1a\n") {
        image("image/png")
    } else if data.starts_with(b"\xff\xd8\xff") {
        image("image/jpeg")
    } else if data.starts_with(b"GIF87a") || data.starts_with(b"GIF89a") {
        image("image/gif")
    } else if data.len() >= 12 && data.starts_with(b"RIFF") && &data[8..12] == b"WEBP" {
        image("image/webp")
    } else if data.starts_with(b"%PDF-") {
        Some(Media {
            mime_type: "application/pdf",
            image: false,
        })
    } else {
        None
    }
}

/// Refuses a media file over [`MAX_MEDIA_BYTES`], naming its size and the
/// bound (RESOURCE_EXHAUSTED).
pub fn check_size(path: &VfsPath, media: Media, size: u64) -> Result<()> {
    if size > MAX_MEDIA_BYTES {
        return Err(Error::TooLarge(format!(
            "{path} is {size} bytes of {}, over the {MAX_MEDIA_BYTES}-byte limit of a media read",
            media.mime_type
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_come_from_the_magic_bytes() {
        let mime = |d: &[u8]| detect(d).map(|m| m.mime_type);
        assert_eq!(mime(b"\x89PNG\r\n\x1a\n...."), Some("image/png"));
        assert_eq!(mime(b"\xff\xd8\xff\xe0..JFIF"), Some("image/jpeg"));
        assert_eq!(mime(b"GIF89a.."), Some("image/gif"));
        assert_eq!(mime(b"GIF87a.."), Some("image/gif"));
        assert_eq!(mime(b"RIFF\x10\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(mime(b"RIFF\x10\0\0\0WAVEfmt "), None);
        assert_eq!(mime(b"%PDF-1.7\n"), Some("application/pdf"));
        assert_eq!(mime(b"\x89PNG"), None);
        assert_eq!(mime(b"plain text"), None);
        assert!(!detect(b"%PDF-1.4").unwrap().image);
    }
}
