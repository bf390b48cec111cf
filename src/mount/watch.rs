//! Freshness: a Watch stream on the mounted path turns every change made
//! elsewhere (gRPC, MCP, another mount) into kernel invalidations of the
//! file's cached pages and attributes and of its name, so it shows on the
//! mount typically well under 100 ms (docs/mount.md § Freshness). The
//! mount's own commits and deletes are not invalidated: the kernel already
//! holds what they made.

use super::inodes::{self, Inodes};
use super::remote::Remote;
use crate::pb;
use fuser::{INodeNo, Notifier};
use std::ffi::OsStr;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;
use tonic::Code;

/// How long to wait before watching again after the stream broke.
const RETRY: Duration = Duration::from_millis(500);

/// Follows the changes under `root` for as long as the runtime runs;
/// `notifier` is used from a thread of its own, since an invalidation may
/// wait on the kernel.
pub fn start(remote: Remote, root: String, mount: Arc<super::ops::Mount>, notifier: Notifier) {
    let (paths, changed) = mpsc::channel::<String>();
    let own = Arc::clone(&mount);
    std::thread::Builder::new()
        .name("mount-invalidate".into())
        .spawn(move || {
            for path in changed {
                invalidate(&mount.inodes, &notifier, &path);
            }
        })
        .expect("cannot start the invalidation thread");
    tokio::spawn(async move {
        let mut cursor: Option<String> = None;
        loop {
            match remote.watch(&root, cursor.clone()).await {
                Ok(mut stream) => loop {
                    match stream.message().await {
                        Ok(Some(message)) => {
                            for event in message.events {
                                let deleted = event.kind == pb::ChangeKind::Deleted as i32;
                                if event.moved_path.is_empty()
                                    && own.own_change(&event.path, event.version, deleted)
                                {
                                    continue;
                                }
                                let _ = paths.send(event.path);
                                if !event.moved_path.is_empty() {
                                    let _ = paths.send(event.moved_path);
                                }
                            }
                            cursor = Some(message.cursor);
                        }
                        Ok(None) => break,
                        Err(status) => {
                            if matches!(
                                status.code(),
                                Code::FailedPrecondition | Code::InvalidArgument
                            ) {
                                cursor = None; // older than the log keeps
                            }
                            tracing::debug!("mount: watch ended: {}", status.message());
                            break;
                        }
                    }
                },
                Err(f) => tracing::debug!("mount: cannot watch {root}: {}", f.why),
            }
            tokio::time::sleep(RETRY).await;
        }
    });
}

/// Drops what the kernel caches of file `path`: its pages and attributes,
/// its name (or the name of its first directory the mount has not seen)
/// in its directory, and that directory's attributes. A directory the
/// mount numbered never loses its name: that would unhash a working
/// directory and fail `getcwd` in it. The kernel answers ENOENT for what
/// it does not cache, which is fine.
fn invalidate(inodes: &Inodes, notifier: &Notifier, path: &str) {
    if let Some(ino) = inodes.known(path) {
        let _ = notifier.inval_inode(INodeNo(ino), 0, 0);
    }
    // The file's name, and the names of the directories it may have
    // brought: those the mount never numbered, which the kernel can hold
    // only as negative entries, never as a working directory.
    let mut path = path;
    while let Some((parent, name)) = inodes::split(path) {
        if let Some(dir) = inodes.known(parent) {
            let _ = notifier.inval_entry(INodeNo(dir), OsStr::new(name));
            let _ = notifier.inval_inode(INodeNo(dir), 0, 0);
            break;
        }
        path = parent;
    }
}
