//! One audit record: what was done, by whom, through which surface, to
//! which paths, and how it ended (docs/audit.md § The record). A record
//! never holds file content nor a search pattern unless its policy level
//! is `request` ([`super::policy`]).

use serde::{Deserialize, Serialize};

/// What kind of operation a record is about, as the policy and the
/// queries select it (docs/audit.md § Classes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// A listing, a stat, a glob: names and metadata.
    MetadataRead,
    /// File content or a content search.
    DataRead,
    /// A change to files.
    DataWrite,
    /// Handles, branches' bookkeeping and the audit itself.
    Admin,
}

impl Class {
    /// The name used in the configuration and the records.
    pub fn as_str(self) -> &'static str {
        match self {
            Class::MetadataRead => "metadata_read",
            Class::DataRead => "data_read",
            Class::DataWrite => "data_write",
            Class::Admin => "admin",
        }
    }

    /// Every class, in the order above.
    pub const ALL: [Class; 4] = [
        Class::MetadataRead,
        Class::DataRead,
        Class::DataWrite,
        Class::Admin,
    ];

    /// The class named `name`, or `None`.
    pub fn parse(name: &str) -> Option<Class> {
        Class::ALL.into_iter().find(|c| c.as_str() == name)
    }
}

/// How an operation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// It did what was asked.
    Ok,
    /// A grant (or the authentication) refused it; the record's `rule`
    /// says which.
    Denied,
    /// What it named does not exist.
    NotFound,
    /// A precondition or a concurrent change stopped it.
    Conflict,
    /// A limit refused it.
    Exhausted,
    /// Its arguments were wrong.
    Invalid,
    /// The server failed.
    Error,
}

impl Outcome {
    /// The result named `name` (`ok`, `denied`, ...), or `None`.
    pub fn parse(name: &str) -> Option<Outcome> {
        serde_json::from_value(serde_json::Value::String(name.to_owned())).ok()
    }

    /// The result of a call that ended with gRPC code `code`.
    pub fn of_grpc_code(code: i32) -> Outcome {
        match code {
            0 => Outcome::Ok,
            7 | 16 => Outcome::Denied,
            5 => Outcome::NotFound,
            6 | 9 | 10 => Outcome::Conflict,
            8 => Outcome::Exhausted,
            3 | 11 => Outcome::Invalid,
            _ => Outcome::Error,
        }
    }

    /// The result of a tool call that ended with envelope error `code`
    /// (`None`: it succeeded).
    pub fn of_envelope_code(code: Option<&str>) -> Outcome {
        match code {
            None => Outcome::Ok,
            Some("ACCESS_DENIED") => Outcome::Denied,
            Some("NOT_FOUND") => Outcome::NotFound,
            Some("CONFLICT") => Outcome::Conflict,
            Some("INVALID_PARAM" | "IS_DIRECTORY" | "BINARY_FILE") => Outcome::Invalid,
            Some(_) => Outcome::Error,
        }
    }
}

fn is_empty(s: &str) -> bool {
    s.is_empty()
}

/// One line of a segment file. `seq`, `prev` and `hash` are set by the
/// writer: `prev` is the `hash` of the record before (all zeros for the
/// first), `hash` the SHA-256 of the line up to it (docs/audit.md § The
/// chain).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Gap-free, from 1.
    pub seq: u64,
    /// The hash of the record before, hex.
    pub prev: String,
    /// When the operation ended, RFC 3339 UTC.
    pub time: String,
    /// The principal (`-` when the caller was not authenticated).
    pub principal: String,
    /// The handle's lineage, when a handle called.
    #[serde(default, skip_serializing_if = "is_empty")]
    pub handle: String,
    /// The State session.
    #[serde(default, skip_serializing_if = "is_empty")]
    pub session: String,
    /// The MCP session id.
    #[serde(default, skip_serializing_if = "is_empty")]
    pub mcp_session: String,
    /// The request's label.
    #[serde(default, skip_serializing_if = "is_empty")]
    pub label: String,
    /// The branch the call worked in.
    #[serde(default, skip_serializing_if = "is_empty")]
    pub branch: String,
    /// grpc, cli, mount or mcp.
    pub surface: String,
    /// The caller's id of the tool call.
    #[serde(default, skip_serializing_if = "is_empty")]
    pub tool_call_id: String,
    /// The RPC (`Filesystem/Read`) or the tool (`tool/read_file`).
    pub operation: String,
    /// Its class.
    pub class: Option<Class>,
    /// The paths its grant checks named, in order, at most
    /// [`super::MAX_PATHS`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// The version of the file it read or replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_before: Option<u64>,
    /// The version it wrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_after: Option<u64>,
    /// Bytes of content read or written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// How it ended.
    pub result: Option<Outcome>,
    /// For a denial: the rule that decided it.
    #[serde(default, skip_serializing_if = "is_empty")]
    pub rule: String,
    /// Microseconds from the call's start to its answer.
    pub duration_us: u64,
    /// At level `request` only: the request's pattern or argument text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    /// The SHA-256 of this line before this field, hex.
    #[serde(default, skip_serializing_if = "is_empty")]
    pub hash: String,
}
