//! The sidecar files a branch keeps beside the files it changed, in its
//! upper scope (see the module doc of `branch`).

use crate::error::{Error, Result};
use crate::path::VfsPath;

/// Names starting with this are the branch's own bookkeeping: hidden in a
/// branch's listings and searches, and refused as file names in a branch.
pub const RESERVED_PREFIX: &str = ".avfs-";
/// Prefix of a whiteout's name.
const WHITEOUT: &str = ".avfs-wh.";
/// Prefix of a base record's name.
const BASE: &str = ".avfs-base.";

/// True when `name` is a branch's bookkeeping name.
pub fn is_reserved(name: &str) -> bool {
    name.starts_with(RESERVED_PREFIX)
}

/// Refuses a path in a branch whose name is reserved (INVALID_ARGUMENT).
pub fn check_writable(path: &VfsPath) -> Result<()> {
    if path.segments().any(is_reserved) {
        return Err(Error::InvalidArgument(format!(
            "{path}: names starting with {RESERVED_PREFIX} are reserved in branches"
        )));
    }
    Ok(())
}

/// The whiteout of `path`.
pub fn whiteout(path: &VfsPath) -> Result<VfsPath> {
    path.parent().join(&format!("{WHITEOUT}{}", path.name()))
}

/// The base record of `path`.
pub fn base(path: &VfsPath) -> Result<VfsPath> {
    path.parent().join(&format!("{BASE}{}", path.name()))
}

/// The file a whiteout stands for (`None`: `path` is no whiteout).
pub fn whited_out(path: &VfsPath) -> Option<VfsPath> {
    let name = path.name().strip_prefix(WHITEOUT)?;
    path.parent().join(name).ok()
}

/// The file a base record belongs to (`None`: `path` is no base record).
pub fn based(path: &VfsPath) -> Option<VfsPath> {
    let name = path.name().strip_prefix(BASE)?;
    path.parent().join(name).ok()
}

/// The base's file when the branch first changed it: the common ancestor
/// of a merge. Stored as one header line, `v<version>` (`absent` when no
/// file was there), then the content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BaseRecord {
    /// The base's version then; `None`: the file did not exist.
    pub version: Option<u64>,
    /// The base's content then (empty when absent).
    pub content: Vec<u8>,
}

impl BaseRecord {
    /// The stored form.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = match self.version {
            Some(v) => format!("v{v}\n").into_bytes(),
            None => b"absent\n".to_vec(),
        };
        out.extend_from_slice(&self.content);
        out
    }

    /// Decodes a stored record (INTERNAL when it is not one).
    pub fn decode(path: &VfsPath, data: &[u8]) -> Result<BaseRecord> {
        let bad = || Error::Internal(format!("{path}: malformed base record of a branch"));
        let end = data.iter().position(|&b| b == b'\n').ok_or_else(bad)?;
        let (head, content) = (&data[..end], data[end + 1..].to_vec());
        let version = match head {
            b"absent" => None,
            [b'v', digits @ ..] => Some(
                std::str::from_utf8(digits)
                    .ok()
                    .and_then(|d| d.parse().ok())
                    .ok_or_else(bad)?,
            ),
            _ => return Err(bad()),
        };
        Ok(BaseRecord { version, content })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_records_round_trip() {
        let p = VfsPath::parse("/m/a.txt").unwrap();
        for r in [
            BaseRecord {
                version: Some(7),
                content: b"x\ny\n".to_vec(),
            },
            BaseRecord {
                version: None,
                content: Vec::new(),
            },
        ] {
            assert_eq!(BaseRecord::decode(&p, &r.encode()).unwrap(), r);
        }
        assert!(BaseRecord::decode(&p, b"v7").is_err());
        assert!(BaseRecord::decode(&p, b"vx\n").is_err());
    }

    #[test]
    fn sidecars_name_their_file() {
        let p = VfsPath::parse("/m/d/a.txt").unwrap();
        assert_eq!(whited_out(&whiteout(&p).unwrap()), Some(p.clone()));
        assert_eq!(based(&base(&p).unwrap()), Some(p.clone()));
        assert_eq!(whited_out(&p), None);
        assert!(check_writable(&VfsPath::parse("/m/.avfs-x/a").unwrap()).is_err());
        assert!(check_writable(&p).is_ok());
    }
}
