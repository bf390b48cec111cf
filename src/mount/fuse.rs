//! The kernel's side: fuser's `Filesystem`, whose calls arrive on several
//! FUSE threads. Each call that needs the server becomes a task on the
//! async runtime, which answers the kernel when the call is done, so no
//! FUSE thread waits on a round trip (docs/mount.md § Concurrency).

use super::ops::Mount;
use super::remote::Failure;
use fuser::{
    AccessFlags, Errno, FileHandle, FopenFlags, Generation, INodeNo, LockOwner, OpenAccMode,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use std::ffi::OsStr;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// How long the kernel may keep attributes and names without asking again
/// (docs/mount.md § Freshness): changes by others show within this even
/// when a Watch invalidation is lost.
pub const TTL: Duration = Duration::from_secs(1);

/// The mount as fuser calls it.
pub struct Kernel {
    mount: Arc<Mount>,
    runtime: tokio::runtime::Handle,
}

impl Kernel {
    /// Serves `mount`'s calls on `runtime`.
    pub fn new(mount: Arc<Mount>, runtime: tokio::runtime::Handle) -> Kernel {
        Kernel { mount, runtime }
    }

    /// Runs `work` on the runtime; `answer` replies to the kernel.
    fn spawn<T, F, Fut>(
        &self,
        what: &'static str,
        work: F,
        answer: impl FnOnce(Result<T, Errno>) + Send + 'static,
    ) where
        T: Send + 'static,
        F: FnOnce(Arc<Mount>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, Failure>> + Send + 'static,
    {
        let mount = Arc::clone(&self.mount);
        self.runtime.spawn(async move {
            let result = work(mount).await;
            answer(result.map_err(|f| {
                if f.errno == Errno::EIO {
                    tracing::warn!("mount: {what}: {}", f.why);
                } else if !f.why.is_empty() {
                    tracing::debug!("mount: {what}: {}", f.why);
                }
                f.errno
            }));
        });
    }
}

fn entry(reply: ReplyEntry) -> impl FnOnce(Result<fuser::FileAttr, Errno>) + Send {
    move |r| match r {
        Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
        Err(e) => reply.error(e),
    }
}

/// A lookup's answer; a missing name is a negative entry (inode 0), which
/// the kernel keeps for `TTL` rather than asking again for every probe
/// (`git`, Python's imports); the Watch drops it when the name appears
/// elsewhere (`watch.rs`).
fn entry_or_absent(reply: ReplyEntry) -> impl FnOnce(Result<fuser::FileAttr, Errno>) + Send {
    move |r| match r {
        Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
        Err(e) if e == Errno::ENOENT => {
            let never = std::time::UNIX_EPOCH;
            let absent = fuser::FileAttr {
                ino: INodeNo(0),
                size: 0,
                blocks: 0,
                atime: never,
                mtime: never,
                ctime: never,
                crtime: never,
                kind: fuser::FileType::RegularFile,
                perm: 0,
                nlink: 0,
                uid: 0,
                gid: 0,
                rdev: 0,
                blksize: 4096,
                flags: 0,
            };
            reply.entry(&TTL, &absent, Generation(0))
        }
        Err(e) => reply.error(e),
    }
}

fn empty(reply: ReplyEmpty) -> impl FnOnce(Result<(), Errno>) + Send {
    move |r| match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(e),
    }
}

fn owned(name: &OsStr) -> std::ffi::OsString {
    name.to_owned()
}

impl fuser::Filesystem for Kernel {
    /// O_TRUNC arrives with `open` (else the kernel truncates first, and
    /// `echo x > f` would commit twice), and lookups in one directory run
    /// in parallel.
    fn init(&mut self, _req: &Request, config: &mut fuser::KernelConfig) -> std::io::Result<()> {
        for flag in [
            fuser::InitFlags::FUSE_ATOMIC_O_TRUNC,
            fuser::InitFlags::FUSE_PARALLEL_DIROPS,
        ] {
            if config.add_capabilities(flag).is_err() {
                tracing::warn!("mount: the kernel lacks {flag:?}");
            }
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let name = owned(name);
        self.spawn(
            "lookup",
            move |m| async move { m.lookup(parent.0, &name).await },
            entry_or_absent(reply),
        );
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        self.spawn(
            "getattr",
            move |m| async move { m.getattr(ino.0).await },
            move |r| match r {
                Ok(attr) => reply.attr(&TTL, &attr),
                Err(e) => reply.error(e),
            },
        );
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let fh = fh.map(|f| f.0);
        self.spawn(
            "setattr",
            move |m| async move { m.setattr(ino.0, mode, (uid, gid), size, fh).await },
            move |r| match r {
                Ok(attr) => reply.attr(&TTL, &attr),
                Err(e) => reply.error(e),
            },
        );
    }

    fn readlink(&self, _req: &Request, _ino: INodeNo, reply: ReplyData) {
        reply.error(Errno::EINVAL);
    }

    fn mknod(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        reply.error(Errno::EPERM);
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        let name = owned(name);
        self.spawn(
            "mkdir",
            move |m| async move { m.mkdir(parent.0, &name).await },
            entry(reply),
        );
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let name = owned(name);
        self.spawn(
            "unlink",
            move |m| async move { m.unlink(parent.0, &name).await },
            empty(reply),
        );
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let name = owned(name);
        self.spawn(
            "rmdir",
            move |m| async move { m.rmdir(parent.0, &name).await },
            empty(reply),
        );
    }

    fn symlink(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _target: &Path,
        reply: ReplyEntry,
    ) {
        reply.error(Errno::EPERM);
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if flags.contains(RenameFlags::RENAME_EXCHANGE) {
            return reply.error(Errno::EINVAL);
        }
        let no_replace = flags.contains(RenameFlags::RENAME_NOREPLACE);
        let (name, newname) = (owned(name), owned(newname));
        self.spawn(
            "rename",
            move |m| async move {
                m.rename((parent.0, &name), (newparent.0, &newname), no_replace)
                    .await
            },
            empty(reply),
        );
    }

    fn link(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _newparent: INodeNo,
        _newname: &OsStr,
        reply: ReplyEntry,
    ) {
        reply.error(Errno::EPERM);
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let write = flags.acc_mode() != OpenAccMode::O_RDONLY;
        let truncate = flags.0 & libc::O_TRUNC != 0;
        self.spawn(
            "open",
            move |m| async move { m.open(ino.0, write, truncate).await },
            move |r| match r {
                Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
                Err(e) => reply.error(e),
            },
        );
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        self.spawn(
            "read",
            move |m| async move { m.read(fh.0, offset, size).await },
            move |r| match r {
                Ok(data) => reply.data(&data),
                Err(e) => reply.error(e),
            },
        );
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let data = data.to_vec();
        let len = data.len() as u32;
        self.spawn(
            "write",
            move |m| async move { m.write(fh.0, offset, &data).await },
            move |r| match r {
                Ok(()) => reply.written(len),
                Err(e) => reply.error(e),
            },
        );
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        self.spawn(
            "flush",
            move |m| async move { m.flush(fh.0).await },
            empty(reply),
        );
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.spawn(
            "release",
            move |m| async move { m.release(fh.0).await },
            empty(reply),
        );
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.spawn(
            "fsync",
            move |m| async move { m.flush(fh.0).await },
            empty(reply),
        );
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        self.spawn(
            "opendir",
            move |m| async move { m.opendir(ino.0).await },
            move |r| match r {
                Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
                Err(e) => reply.error(e),
            },
        );
    }

    fn readdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let Some(listing) = self.mount.listing(fh.0) else {
            return reply.error(Errno::EBADF);
        };
        for (i, e) in listing.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(e.ino), i as u64 + 1, e.kind, &e.name) {
                break;
            }
        }
        reply.ok();
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.mount.releasedir(fh.0);
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let (blocks, bfree, bavail, files, ffree, bsize, namelen, frsize) = self.mount.statfs();
        reply.statfs(blocks, bfree, bavail, files, ffree, bsize, namelen, frsize);
    }

    fn setxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _value: &[u8],
        _flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        reply.error(Errno::ENOTSUP);
    }

    fn getxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _size: u32,
        reply: ReplyXattr,
    ) {
        reply.error(Errno::ENOTSUP);
    }

    fn listxattr(&self, _req: &Request, _ino: INodeNo, _size: u32, reply: ReplyXattr) {
        reply.error(Errno::ENOTSUP);
    }

    fn removexattr(&self, _req: &Request, _ino: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        reply.error(Errno::ENOTSUP);
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        reply.ok();
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let name = owned(name);
        let exclusive = flags & libc::O_EXCL != 0;
        let truncate = flags & libc::O_TRUNC != 0;
        let mode = mode & !umask;
        self.spawn(
            "create",
            move |m| async move { m.create(parent.0, &name, mode, exclusive, truncate).await },
            move |r| match r {
                Ok((attr, fh)) => reply.created(
                    &TTL,
                    &attr,
                    Generation(0),
                    FileHandle(fh),
                    FopenFlags::empty(),
                ),
                Err(e) => reply.error(e),
            },
        );
    }
}
