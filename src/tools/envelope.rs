//! The standard tool envelope (docs/contract.md § The tool envelope): what every tool returns.
//!
//! Built by each tool (through [`Outcome`] or [`ToolError`]) and by
//! [`super::Tools::invoke`], rendered once as JSON for the model
//! ([`Envelope::to_json`]); the gRPC adapter (`src/server/tools.rs`) renders
//! it once more as the `agentvfs.v1.Envelope` message.
//!
//! Invariants:
//! - the JSON has exactly the top-level keys `status`, `data`, `text`, `stats`,
//!   `context`, in that order, plus `error` only when status is `"error"`
//!   (the type makes any other shape unrepresentable);
//! - an error's code is [`Error::code`] of a domain error, so the envelope and
//!   the gRPC `ErrorInfo.reason` can never disagree; call sites choose a kind
//!   and a message written for a model, never a code.

use crate::error::Error;
use serde_json::{Map, Value};

/// A JSON object (insertion-ordered: `serde_json`'s `preserve_order`).
pub type Object = Map<String, Value>;

/// A file version as every envelope shows it: a JSON string of its decimal
/// digits (`"9223372036854775809"`). Versions use all 64 bits (a branch's have
/// bit 63 set, a Filesystem mount's are nanosecond times past 2^53), and a
/// JSON number past 2^53 loses digits in JavaScript and in any reader that
/// parses numbers as doubles (docs/tools.md § Versions). The tools accept it
/// back as it is shown ([`super::args::Args::version`]).
pub fn version_json(version: u64) -> Value {
    Value::String(version.to_string())
}

/// The envelope's `status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Complete result.
    Success,
    /// A result that is cut (pagination, limit, budget) or degraded (lossy
    /// decoding); the text says what is missing and how to get it.
    Partial,
    /// No result; `error` says why.
    Error,
}

impl Status {
    /// `success`, `partial` or `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Success => "success",
            Status::Partial => "partial",
            Status::Error => "error",
        }
    }

    /// `Partial` when `cut`, else `Success`.
    pub fn partial_if(cut: bool) -> Status {
        if cut {
            Status::Partial
        } else {
            Status::Success
        }
    }
}

/// What a tool produced when it ran: everything but `context`, which the
/// invocation owns.
#[derive(Debug)]
pub struct Outcome {
    /// Success or partial.
    pub status: Status,
    /// Machine-readable result.
    pub data: Object,
    /// What the model reads.
    pub text: String,
    /// Counters; `time_ms` is added by the invocation.
    pub stats: Object,
}

/// Why a tool produced no result: a domain error (its kind decides the code)
/// and the sentence the model reads.
#[derive(Debug)]
pub struct ToolError {
    /// The kind, whose [`Error::code`] is the envelope code (boxed: errors
    /// travel through many `Result`s and should stay small).
    pub error: Box<Error>,
    /// Message written for a model: what is wrong and how to fix the call.
    pub message: String,
    /// Extra data (MultiEdit's `failed_index`).
    pub data: Object,
}

impl ToolError {
    /// An error of `kind` told to the model as `message`.
    pub fn new(kind: Error, message: impl Into<String>) -> ToolError {
        ToolError {
            error: Box::new(kind),
            message: message.into(),
            data: Object::new(),
        }
    }

    /// An INVALID_PARAM error.
    pub fn invalid(message: impl Into<String>) -> ToolError {
        let message = message.into();
        ToolError::new(Error::InvalidArgument(message.clone()), message)
    }

    /// Adds a `data` field.
    pub fn with_data(mut self, key: &str, value: impl Into<Value>) -> ToolError {
        self.data.insert(key.into(), value.into());
        self
    }
}

impl From<Error> for ToolError {
    fn from(error: Error) -> ToolError {
        let message = error.to_string();
        ToolError::new(error, message)
    }
}

/// The envelope's `error`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnvelopeError {
    /// INVALID_PARAM, NOT_FOUND, ACCESS_DENIED, CONFLICT, IS_DIRECTORY,
    /// BINARY_FILE, TIMEOUT or INTERNAL_ERROR.
    pub code: &'static str,
    /// What went wrong, for the model.
    pub message: String,
}

/// One tool result in the standard envelope.
#[derive(Clone, Debug)]
pub struct Envelope {
    /// success, partial or error.
    pub status: Status,
    /// Machine-readable result (`{}` when there is none).
    pub data: Object,
    /// What the model reads.
    pub text: String,
    /// Counters, always with `time_ms`.
    pub stats: Object,
    /// `cwd`, `params_input`, `path_resolved`, ...
    pub context: Object,
    /// Present exactly when status is error (the constructors keep it so).
    error: Option<EnvelopeError>,
}

impl Envelope {
    /// The envelope of a tool that ran.
    pub fn from_outcome(o: Outcome, context: Object) -> Envelope {
        debug_assert!(o.status != Status::Error, "a ToolError reports failures");
        Envelope {
            status: o.status,
            data: o.data,
            text: o.text,
            stats: o.stats,
            context,
            error: None,
        }
    }

    /// The envelope of a failed call; the text is the message.
    pub fn from_error(e: ToolError, stats: Object, context: Object) -> Envelope {
        Envelope {
            status: Status::Error,
            data: e.data,
            text: e.message.clone(),
            stats,
            context,
            error: Some(EnvelopeError {
                code: e.error.code(),
                message: e.message,
            }),
        }
    }

    /// The error, present exactly when status is error.
    pub fn error(&self) -> Option<&EnvelopeError> {
        self.error.as_ref()
    }

    /// The envelope as a JSON value, keys in the protocol's order.
    pub fn to_value(&self) -> Value {
        let mut out = Object::new();
        out.insert("status".into(), self.status.as_str().into());
        out.insert("data".into(), Value::Object(self.data.clone()));
        out.insert("text".into(), self.text.clone().into());
        out.insert("stats".into(), Value::Object(self.stats.clone()));
        out.insert("context".into(), Value::Object(self.context.clone()));
        if let Some(e) = &self.error {
            let mut err = Object::new();
            err.insert("code".into(), e.code.into());
            err.insert("message".into(), e.message.clone().into());
            out.insert("error".into(), Value::Object(err));
        }
        Value::Object(out)
    }

    /// The envelope as JSON text, exactly as a model is given it.
    pub fn to_json(&self) -> String {
        self.to_value().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(v: Value) -> Object {
        match v {
            Value::Object(o) => o,
            _ => unreachable!("test literal is an object"),
        }
    }

    #[test]
    fn json_keys_follow_the_protocol_order_and_error_only_on_error() {
        let ok = Envelope::from_outcome(
            Outcome {
                status: Status::Success,
                data: object(json!({"b": 1, "a": 2})),
                text: "t".into(),
                stats: object(json!({"time_ms": 0})),
            },
            Object::new(),
        );
        assert_eq!(
            ok.to_json(),
            r#"{"status":"success","data":{"b":1,"a":2},"text":"t","stats":{"time_ms":0},"context":{}}"#
        );
        let err = Envelope::from_error(
            ToolError::new(Error::NotFound("/x".into()), "Path 'x' does not exist."),
            Object::new(),
            Object::new(),
        );
        let v = err.to_value();
        let keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
        assert_eq!(
            keys,
            ["status", "data", "text", "stats", "context", "error"]
        );
        assert_eq!(v["error"]["code"], "NOT_FOUND");
    }
}
