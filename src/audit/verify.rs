//! [`verify`]: walks the store and names the first record that is wrong
//! (docs/audit.md § The chain).

use super::chain::{Anchor, Checkpoint, GENESIS, hex, unseal};
use super::record::Record;
use super::store::{ANCHOR_FILE, CHECKPOINTS_FILE, KEY_FILE, segments};
use sha2::{Digest, Sha256};
use std::path::Path;

/// What a verification found intact.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    /// The first record kept (after retention).
    pub first: u64,
    /// The last record.
    pub last: u64,
    /// Checkpoints checked.
    pub checkpoints: u64,
    /// The last checkpoint, to keep elsewhere: a later verification
    /// against it also catches a cut of the checkpoints themselves.
    pub head: Option<Checkpoint>,
}

/// The first thing wrong in a store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Broken {
    /// The first record that is wrong (or missing).
    pub seq: u64,
    /// The file and line where it was found.
    pub place: String,
    /// What is wrong.
    pub reason: String,
}

impl std::fmt::Display for Broken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "record {} ({}): {}", self.seq, self.place, self.reason)
    }
}

/// Reads the store in `dir` and checks every record's hash, the chain of
/// `prev`s, the sequence, every checkpoint's signature and that the chain
/// reaches the last checkpoint. `Err` is a store that cannot be read at
/// all (no key).
pub fn verify(dir: &Path) -> std::io::Result<Result<Verified, Broken>> {
    let key = std::fs::read(dir.join(KEY_FILE))?;
    Ok(verify_with(dir, &key))
}

fn verify_with(dir: &Path, key: &[u8]) -> Result<Verified, Broken> {
    let broken = |seq: u64, place: String, reason: String| Broken { seq, place, reason };
    let (mut expected, mut head) = match std::fs::read_to_string(dir.join(ANCHOR_FILE)) {
        Err(_) => (1, GENESIS.to_owned()),
        Ok(text) => match serde_json::from_str::<Anchor>(&text) {
            Ok(anchor) if anchor.is_signed(key) => (anchor.seq + 1, anchor.head),
            _ => {
                return Err(broken(
                    0,
                    ANCHOR_FILE.into(),
                    "the retention anchor is not signed by this store's key".into(),
                ));
            }
        },
    };
    let first = expected;
    let checkpoints = read_checkpoints(dir, key)?;
    let mut pending = checkpoints.iter().filter(|c| c.seq >= first).peekable();
    let files = segments(dir).map_err(|e| broken(expected, "segments".into(), e.to_string()))?;
    for (_, path) in &files {
        let name = path
            .file_name()
            .map_or(String::new(), |n| n.to_string_lossy().into());
        let text =
            std::fs::read(path).map_err(|e| broken(expected, name.clone(), e.to_string()))?;
        let text = String::from_utf8_lossy(&text);
        for (index, line) in text.split_terminator('\n').enumerate() {
            let place = format!("{name} line {}", index + 1);
            let Some((body, stated)) = unseal(line) else {
                return Err(broken(
                    expected,
                    place,
                    "the line is not a sealed record".into(),
                ));
            };
            let record: Record = serde_json::from_str(line)
                .map_err(|e| broken(expected, place.clone(), format!("not a record: {e}")))?;
            if record.seq != expected {
                return Err(broken(
                    expected,
                    place,
                    format!(
                        "missing or out of order: record {} stands where record {expected} \
                         should",
                        record.seq
                    ),
                ));
            }
            if hex(&Sha256::digest(body.as_bytes())) != stated {
                return Err(broken(
                    expected,
                    place,
                    "changed: its content does not match its hash".into(),
                ));
            }
            if record.prev != head {
                return Err(broken(
                    expected,
                    place,
                    format!(
                        "does not follow record {}: its prev is not that record's hash",
                        expected - 1
                    ),
                ));
            }
            if let Some(checkpoint) = pending.next_if(|c| c.seq == expected)
                && checkpoint.head != stated
            {
                return Err(broken(
                    expected,
                    place,
                    "changed: its hash is not the one its signed checkpoint holds".into(),
                ));
            }
            head = stated.to_owned();
            expected += 1;
        }
    }
    if let Some(cut) = pending.next() {
        return Err(broken(
            expected,
            "end of the last segment".into(),
            format!(
                "missing: the chain ends at record {} but a signed checkpoint covers record {} \
                 (the tail was cut)",
                expected - 1,
                cut.seq
            ),
        ));
    }
    Ok(Verified {
        first,
        last: expected - 1,
        checkpoints: checkpoints.len() as u64,
        head: checkpoints.last().cloned(),
    })
}

/// The checkpoints, each signed and chained to the one before.
fn read_checkpoints(dir: &Path, key: &[u8]) -> Result<Vec<Checkpoint>, Broken> {
    let text = match std::fs::read_to_string(dir.join(CHECKPOINTS_FILE)) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            return Err(Broken {
                seq: 0,
                place: CHECKPOINTS_FILE.into(),
                reason: e.to_string(),
            });
        }
    };
    let mut out: Vec<Checkpoint> = Vec::new();
    for (index, line) in text.split_terminator('\n').enumerate() {
        let place = format!("{CHECKPOINTS_FILE} line {}", index + 1);
        let checkpoint: Checkpoint = serde_json::from_str(line).map_err(|e| Broken {
            seq: 0,
            place: place.clone(),
            reason: format!("not a checkpoint: {e}"),
        })?;
        let prev_mac = out.last().map_or("", |c| c.mac.as_str());
        if !checkpoint.is_signed(key) || checkpoint.prev_mac != prev_mac {
            return Err(Broken {
                seq: checkpoint.seq,
                place,
                reason: "its checkpoint is not signed by this store's key, or does not follow \
                         the checkpoint before"
                    .into(),
            });
        }
        out.push(checkpoint);
    }
    Ok(out)
}
