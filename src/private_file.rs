//! Files only the server's user may read, replaced whole: the operator
//! token (`auth`) and the persisted search indexes of the Filesystem and
//! object tiers (`search::index::file_keeper`), which hold what the served
//! files contain.

use std::path::Path;

/// Writes `parts`, one after another, to `path`: into a new file of mode 0600 beside it, then
/// renamed over it, so a reader sees the old file or the whole new one, and
/// nobody but the server's user can read it. `create_new` never follows a
/// planted link.
pub fn write(path: &Path, parts: &[&[u8]]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "names no file"))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".{:016x}.tmp", rand::random::<u64>()));
    let tmp = path.with_file_name(tmp_name);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut file| {
            for part in parts {
                file.write_all(part)?;
            }
            file.sync_all()
        })
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Removes from `dir` the temporary files [`write`] left, for files whose
/// names end in `.{suffix}`, unwritten for `stale_after`: a crash between
/// creating one and renaming it leaves it, up to the whole file's size, and
/// nothing else ever removes it. A write in progress (of another server
/// sharing the directory) writes without pause, so it is never that old.
pub fn remove_stale_temporaries(dir: &Path, suffix: &str, stale_after: std::time::Duration) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let now = std::time::SystemTime::now();
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !is_temporary(&name.to_string_lossy(), suffix) {
            continue;
        }
        let stale = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|modified| modified + stale_after < now);
        if stale {
            let path = entry.path();
            match std::fs::remove_file(&path) {
                Ok(()) => tracing::info!(path = %path.display(), "removed a write cut short"),
                Err(err) => {
                    tracing::warn!(path = %path.display(), %err, "could not remove a write cut short")
                }
            }
        }
    }
}

/// True for the name [`write`] gives the temporary file of a file named
/// `*.{suffix}`: `.{name}.{16 hex digits}.tmp`.
fn is_temporary(name: &str, suffix: &str) -> bool {
    let Some(rest) = name.strip_prefix('.').and_then(|n| n.strip_suffix(".tmp")) else {
        return false;
    };
    let Some((file, random)) = rest.rsplit_once('.') else {
        return false;
    };
    random.len() == 16
        && random.bytes().all(|b| b.is_ascii_hexdigit())
        && file
            .strip_suffix(suffix)
            .is_some_and(|stem| stem.ends_with('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_written_private_and_replaced_whole() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("operator.token");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        write(&path, &[b"new-", b"secret"]).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new-secret");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        assert!(write(&dir.path().join("missing/x"), &[b"s"]).is_err());
    }
}
