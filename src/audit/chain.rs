//! The hash chain and its signed checkpoints (docs/audit.md § The chain):
//! how a record's line is sealed and how a checkpoint or an anchor is
//! signed.

use super::record::Record;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The `prev` of the first record ever written.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Hex of a byte string.
pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The line of `record` (whose `seq` and `prev` are set): its JSON up to
/// `hash`, then `hash`, the SHA-256 of what comes before it. Returns the
/// line (without newline) and the hash.
pub fn seal(record: &mut Record) -> (String, String) {
    record.hash.clear();
    let body = serde_json::to_string(record).expect("a record always serializes");
    let hash = hex(&Sha256::digest(body.as_bytes()));
    let line = format!("{},\"hash\":\"{hash}\"}}", &body[..body.len() - 1]);
    record.hash = hash.clone();
    (line, hash)
}

/// The part of `line` its `hash` covers, and the hash it states.
pub(super) fn unseal(line: &str) -> Option<(String, &str)> {
    let at = line.rfind(",\"hash\":\"")?;
    let hash = line[at..]
        .strip_prefix(",\"hash\":\"")?
        .strip_suffix("\"}")?;
    Some((format!("{}}}", &line[..at]), hash))
}

/// HMAC-SHA256 of `message` under `key`, hex.
fn sign(key: &[u8], message: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(message.as_bytes());
    hex(&mac.finalize().into_bytes())
}

/// A signed statement that the chain reached record `seq` with hash
/// `head`, itself chained to the checkpoint before (`prev_mac`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The last record it covers.
    pub seq: u64,
    /// That record's hash.
    pub head: String,
    /// When it was written, RFC 3339 UTC.
    pub time: String,
    /// The `mac` of the checkpoint before (empty for the first).
    pub prev_mac: String,
    /// HMAC-SHA256 of `seq:head:prev_mac` under the store's key.
    pub mac: String,
}

impl Checkpoint {
    /// The checkpoint of `seq` and `head` after the one signed `prev_mac`.
    pub fn new(key: &[u8], seq: u64, head: &str, prev_mac: &str) -> Checkpoint {
        Checkpoint {
            seq,
            head: head.to_owned(),
            time: super::now_rfc3339(),
            prev_mac: prev_mac.to_owned(),
            mac: sign(key, &format!("{seq}:{head}:{prev_mac}")),
        }
    }

    /// True when its `mac` is this key's.
    pub(super) fn is_signed(&self, key: &[u8]) -> bool {
        let expected = sign(
            key,
            &format!("{}:{}:{}", self.seq, self.head, self.prev_mac),
        );
        expected == self.mac
    }
}

/// Where the segments that retention dropped ended: the next record
/// follows `seq`, whose hash was `head` (docs/audit.md § Retention).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Anchor {
    /// The last dropped record.
    pub seq: u64,
    /// Its hash.
    pub head: String,
    /// HMAC-SHA256 of `anchor:seq:head`.
    pub mac: String,
}

impl Anchor {
    /// The signed anchor after record `seq` of hash `head`.
    pub fn new(key: &[u8], seq: u64, head: &str) -> Anchor {
        Anchor {
            seq,
            head: head.to_owned(),
            mac: sign(key, &format!("anchor:{seq}:{head}")),
        }
    }

    /// True when its `mac` is this key's.
    pub(super) fn is_signed(&self, key: &[u8]) -> bool {
        sign(key, &format!("anchor:{}:{}", self.seq, self.head)) == self.mac
    }
}

/// The hash a sealed `line` states (the writer's head after it).
pub fn stated_hash(line: &str) -> Option<String> {
    unseal(line).map(|(_, hash)| hash.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_line_states_the_hash_of_what_precedes_it() {
        let mut record = Record {
            seq: 1,
            prev: GENESIS.into(),
            operation: "Filesystem/Read".into(),
            ..Record::default()
        };
        let (line, hash) = seal(&mut record);
        let (body, stated) = unseal(&line).unwrap();
        assert_eq!(stated, hash);
        assert_eq!(hex(&Sha256::digest(body.as_bytes())), hash);
        let parsed: Record = serde_json::from_str(&line).unwrap();
        assert_eq!(parsed, record);
    }

    #[test]
    fn a_checkpoint_signed_by_another_key_is_refused() {
        let checkpoint = Checkpoint::new(b"key one", 5, GENESIS, "");
        assert!(checkpoint.is_signed(b"key one"));
        assert!(!checkpoint.is_signed(b"key two"));
    }
}
