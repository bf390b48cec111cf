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
