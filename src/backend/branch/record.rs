//! The registry of branches: one small record per branch, kept in the tier
//! of the branch's mount under a scope no caller can name, so a branch lives
//! as long as its tier keeps files (State: until its session idles out).

use crate::access::Principal;
use crate::backend::{Backend, FileRead, Precondition};
use crate::error::{Error, Result};
use crate::path::VfsPath;
use crate::scope::{INTERNAL_SCOPE, Scope};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Prefix of a branch record's name in its mount's root (a reserved name,
/// `sidecar::RESERVED_PREFIX`, which no mount prefix may use).
const RECORD_PREFIX: &str = ".avfs-branch.";

/// One branch: what it forked and for whom.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BranchRecord {
    /// Its name (`x-agentvfs-branch`).
    pub name: String,
    /// The forked subtree (a directory of `mount`, or the mount itself).
    pub root: VfsPath,
    /// The mount holding it.
    pub mount: VfsPath,
    /// The base's State session (a State branch forks that session's files).
    pub session: String,
    /// The base's namespace: branches are named per namespace.
    pub namespace: String,
    /// When it was forked.
    pub created: SystemTime,
    /// The principal that forked it.
    pub creator: String,
    /// The configured principal whose budgets the fork counts against
    /// (`Principal::owner`: the creator, or the principal at the root of
    /// the creator handle's chain). Records written before it was kept
    /// read it as the creator.
    pub owner: String,
    /// A random id drawn at the fork, naming its upper scope: a branch
    /// forked again under a discarded one's name starts from an empty
    /// scope, whatever the discarded one left (docs/branches.md §
    /// Discard). Empty in records written before forks had ids.
    pub fork: String,
}

impl BranchRecord {
    /// The scope holding the branch's own changes: a session and a namespace
    /// whose names ([`INTERNAL_SCOPE`]) no caller can send.
    pub fn upper_scope(&self, scope: &Scope) -> Scope {
        let mut name = format!("{INTERNAL_SCOPE}branch.{}.{}", self.namespace, self.name);
        if !self.fork.is_empty() {
            name = format!("{name}.{}", self.fork);
        }
        Scope {
            session: name.clone(),
            namespace: name,
            branch: String::new(),
            ..scope.clone()
        }
    }

    /// The base's scope, for a call made in the branch by `scope`.
    pub fn base_scope(&self, scope: &Scope) -> Scope {
        Scope {
            session: self.session.clone(),
            namespace: self.namespace.clone(),
            branch: String::new(),
            ..scope.clone()
        }
    }

    fn encode(&self) -> Vec<u8> {
        let created = self
            .created
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as u64;
        json!({
            "name": self.name,
            "root": self.root.as_str(),
            "mount": self.mount.as_str(),
            "session": self.session,
            "namespace": self.namespace,
            "created_ms": created,
            "creator": self.creator,
            "owner": self.owner,
            "fork": self.fork,
        })
        .to_string()
        .into_bytes()
    }

    fn decode(path: &VfsPath, data: &[u8]) -> Result<BranchRecord> {
        let bad = || Error::Internal(format!("{path}: malformed branch record"));
        let v: Value = serde_json::from_slice(data).map_err(|_| bad())?;
        let text = |k: &str| v[k].as_str().map(str::to_owned).ok_or_else(bad);
        let creator = text("creator")?;
        Ok(BranchRecord {
            name: text("name")?,
            root: VfsPath::parse(&text("root")?)?,
            mount: VfsPath::parse(&text("mount")?)?,
            session: text("session")?,
            namespace: text("namespace")?,
            created: UNIX_EPOCH + Duration::from_millis(v["created_ms"].as_u64().ok_or_else(bad)?),
            owner: v["owner"].as_str().unwrap_or(&creator).to_owned(),
            creator,
            fork: v["fork"].as_str().unwrap_or_default().to_owned(),
        })
    }
}

/// Most branch records a [`RecordCache`] keeps (it starts over when full).
const MAX_CACHED: usize = 4096;

/// Branch records as this server last read them, by namespace and name: a
/// call in a branch starts from its record at once and confirms it with
/// the first read it makes anyway ([`super::Overlay::cached`]), so a Read
/// in a branch costs no registry lookup of its own. Another server may
/// discard a branch and fork it again under its name, so a record is used
/// only once the registry confirmed it in the same call, or, on a tier
/// whose records are leased ([`Backend::branch_record_lease`]), by a Read
/// that ends within the lease of its last confirmation.
#[derive(Default)]
pub struct RecordCache {
    records: Mutex<HashMap<(String, String), Cached>>,
}

/// A kept record and the end of its lease.
#[derive(Clone)]
struct Cached {
    record: BranchRecord,
    lease_end: Option<Instant>,
}

impl RecordCache {
    /// The record of branch `name` of `namespace`, as last seen, and the
    /// instant its lease ends (`None`: not leased).
    pub fn get(&self, namespace: &str, name: &str) -> Option<(BranchRecord, Option<Instant>)> {
        let records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        records
            .get(&(namespace.to_owned(), name.to_owned()))
            .map(|c| (c.record.clone(), c.lease_end))
    }

    /// Keeps `record` as the latest of its branch, leased until
    /// `lease_end`: the instant the read that found it in the registry was
    /// sent, plus the tier's lease.
    pub fn put(&self, record: &BranchRecord, lease_end: Option<Instant>) {
        let mut records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        if records.len() >= MAX_CACHED {
            records.clear();
        }
        records.insert(
            (record.namespace.clone(), record.name.clone()),
            Cached {
                record: record.clone(),
                lease_end,
            },
        );
    }

    /// Forgets branch `name` of `namespace` (discarded, or seen to change).
    pub fn forget(&self, namespace: &str, name: &str) {
        let mut records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        records.remove(&(namespace.to_owned(), name.to_owned()));
    }
}

/// The branches of every mount of a backend that takes them
/// ([`Backend::branch_mounts`]).
pub struct Registry<'a> {
    backend: &'a dyn Backend,
}

impl<'a> Registry<'a> {
    /// The registry kept in `backend`'s tiers.
    pub fn new(backend: &'a dyn Backend) -> Registry<'a> {
        Registry { backend }
    }

    /// Where the record of branch `name` on `mount` is kept (in the
    /// registry's scope): a reserved name in the mount's root, which no
    /// nested mount can have (src/config/mounts.rs refuses such prefixes),
    /// so it never resolves to another mount the way `{mount}/{name}` would
    /// for a branch named like one.
    fn record_path(mount: &VfsPath, name: &str) -> Result<VfsPath> {
        mount.join(&format!("{RECORD_PREFIX}{name}"))
    }

    /// Where a namespace's branch records are kept.
    fn scope(namespace: &str) -> Scope {
        Scope {
            session: format!("{INTERNAL_SCOPE}branches"),
            namespace: format!("{INTERNAL_SCOPE}branches.{namespace}"),
            principal: Arc::new(Principal::local()),
            label: String::new(),
            changeset: String::new(),
            branch: String::new(),
        }
    }

    /// The read that finds `record` in the registry now: its scope and path.
    pub fn record_read(record: &BranchRecord) -> Result<FileRead> {
        Ok(FileRead::file(
            Registry::scope(&record.namespace),
            Registry::record_path(&record.mount, &record.name)?,
        ))
    }

    /// True when `found`, what [`Registry::record_read`] read, is `record`.
    pub fn confirms(record: &BranchRecord, found: Option<&[u8]>) -> Result<bool> {
        let Some(data) = found else {
            return Ok(false);
        };
        let path = Registry::record_path(&record.mount, &record.name)?;
        Ok(BranchRecord::decode(&path, data)? == *record)
    }

    /// The branch `name` of `namespace`, if there is one.
    pub fn find(&self, namespace: &str, name: &str) -> Result<Option<BranchRecord>> {
        let scope = Registry::scope(namespace);
        for mount in self.backend.branch_mounts() {
            let path = Registry::record_path(&mount, name)?;
            match self.backend.read(&scope, &path) {
                Ok((data, _)) => return BranchRecord::decode(&path, &data).map(Some),
                Err(Error::NotFound(_)) => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    /// The branch `name` of `namespace` (NOT_FOUND naming it otherwise).
    pub fn get(&self, namespace: &str, name: &str) -> Result<BranchRecord> {
        self.find(namespace, name)?.ok_or_else(|| no_branch(name))
    }

    /// Records a new branch (ALREADY_EXISTS when its name is taken).
    pub fn create(&self, record: &BranchRecord) -> Result<()> {
        let taken = || Error::AlreadyExists(format!("branch {:?}", record.name));
        if self.find(&record.namespace, &record.name)?.is_some() {
            return Err(taken());
        }
        let pre = Precondition {
            create_only: true,
            if_version: None,
            ..Precondition::default()
        };
        let path = Registry::record_path(&record.mount, &record.name)?;
        match self.backend.write(
            &Registry::scope(&record.namespace),
            &path,
            record.encode(),
            pre,
        ) {
            Err(Error::AlreadyExists(_)) => Err(taken()),
            other => other.map(drop),
        }
    }

    /// Every branch of `namespace`, by mount then name.
    pub fn list(&self, namespace: &str) -> Result<Vec<BranchRecord>> {
        let scope = Registry::scope(namespace);
        let mut out = Vec::new();
        for mount in self.backend.branch_mounts() {
            let entries = match self.backend.list(&scope, &mount) {
                Err(Error::NotFound(_)) => continue,
                other => other?,
            };
            let records = entries
                .into_iter()
                .filter(|e| !e.is_directory() && e.path.name().starts_with(RECORD_PREFIX));
            for entry in records {
                match self.backend.read(&scope, &entry.path) {
                    Ok((data, _)) => out.push(BranchRecord::decode(&entry.path, &data)?),
                    Err(Error::NotFound(_)) => continue,
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(out)
    }

    /// Forgets a branch (its upper files are the caller's to delete first).
    pub fn remove(&self, record: &BranchRecord) -> Result<()> {
        let path = Registry::record_path(&record.mount, &record.name)?;
        match self
            .backend
            .delete(&Registry::scope(&record.namespace), &path, None, false)
        {
            Ok(_) | Err(Error::NotFound(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// The error of a call naming a branch there is none of.
pub fn no_branch(name: &str) -> Error {
    Error::NotFound(format!("branch {name:?} (no such branch)"))
}
