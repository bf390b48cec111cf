//! Reading a tool's arguments object as a model wrote it.
//!
//! Each tool names its parameters once ([`Args::new`]); an unknown parameter
//! is refused with the list of valid ones, because a misspelled option that is
//! silently ignored makes a model believe it took effect. `null` counts as
//! absent (LS's `ignore` defaults to null). Type errors are
//! [`crate::Error::InvalidArgument`]s naming the parameter and the expected
//! type; the tools may replace the message with the wording of docs/contract.md.

use super::envelope::{Object, ToolError};
use serde_json::Value;

/// The arguments of one call, checked against the tool's parameter names.
pub struct Args<'a> {
    map: &'a Object,
}

/// A parameter had the wrong JSON type or an impossible value.
#[derive(Debug)]
pub struct BadArg {
    /// What is wrong, naming the parameter.
    pub message: String,
}

impl From<BadArg> for ToolError {
    fn from(b: BadArg) -> ToolError {
        ToolError::invalid(b.message)
    }
}

fn bad(message: String) -> BadArg {
    BadArg { message }
}

impl<'a> Args<'a> {
    /// Checks that every key of `map` is one of `known`.
    pub fn new(tool: &str, map: &'a Object, known: &[&str]) -> Result<Args<'a>, ToolError> {
        if let Some(unknown) = map.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(ToolError::invalid(format!(
                "Unknown parameter '{}' for {tool}. Valid parameters: {}.",
                crate::error::echo(unknown),
                known.join(", ")
            )));
        }
        Ok(Args { map })
    }

    fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    /// An optional string.
    pub fn string(&self, key: &str) -> Result<Option<&'a str>, BadArg> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(bad(format!(
                "'{key}' must be a string, got {}.",
                type_name(other)
            ))),
        }
    }

    /// A required string (missing: `Missing required parameter '{key}'.`).
    pub fn required_string(&self, key: &str) -> Result<&'a str, BadArg> {
        self.string(key)?
            .ok_or_else(|| bad(format!("Missing required parameter '{key}'.")))
    }

    /// An optional integer (`3` or `3.0`, not `"3"`).
    pub fn integer(&self, key: &str) -> Result<Option<i64>, BadArg> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Number(n)) => n
                .as_i64()
                .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
                .map(Some)
                .ok_or_else(|| bad(format!("'{key}' must be an integer, got {n}."))),
            Some(other) => Err(bad(format!(
                "'{key}' must be an integer, got {}.",
                type_name(other)
            ))),
        }
    }

    /// An optional file version, as the tools show it (a decimal string,
    /// [`super::envelope::version_json`]) or as a JSON integer. A version uses
    /// all 64 bits, so a number is taken only when it is exact: an integer
    /// serde_json read as one (up to 2^64 - 1), or a float that is a whole
    /// number below 2^53; from there on a float may have lost digits (2^53 + 1
    /// reads as 2^53) and is refused, asking for the string (docs/tools.md
    /// § Versions).
    pub fn version(&self, key: &str) -> Result<Option<u64>, BadArg> {
        let shown = "pass it as a string of its digits, exactly as the tools show it (e.g. \
                     stats.version of Read)";
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => match s.parse::<u64>() {
                Ok(v) if s.bytes().all(|b| b.is_ascii_digit()) => Ok(Some(v)),
                _ => Err(bad(format!(
                    "'{key}' must be a version, a string of decimal digits such as \
                     \"1765432109876543210\", got \"{}\"; {shown}.",
                    crate::error::echo(s)
                ))),
            },
            Some(Value::Number(n)) => {
                if let Some(v) = n.as_u64() {
                    return Ok(Some(v));
                }
                const EXACT: f64 = (1u64 << 53) as f64;
                match n.as_f64() {
                    Some(f) if f.fract() == 0.0 && (0.0..EXACT).contains(&f) => Ok(Some(f as u64)),
                    Some(f) if f >= EXACT => Err(bad(format!(
                        "'{key}' is the number {n}, at or past 2^53, where JSON numbers lose digits, so \
                         it cannot name a version exactly; {shown}."
                    ))),
                    _ => Err(bad(format!(
                        "'{key}' must be a version (a whole number >= 0), got {n}; {shown}."
                    ))),
                }
            }
            Some(other) => Err(bad(format!(
                "'{key}' must be a version (a string of decimal digits), got {}; {shown}.",
                type_name(other)
            ))),
        }
    }

    /// An optional integer within `min..=max`, else `message`.
    pub fn integer_in(
        &self,
        key: &str,
        min: i64,
        max: i64,
        default: i64,
        message: impl FnOnce() -> String,
    ) -> Result<i64, BadArg> {
        match self.integer(key)? {
            None => Ok(default),
            Some(v) if (min..=max).contains(&v) => Ok(v),
            Some(_) => Err(bad(message())),
        }
    }

    /// An optional boolean.
    pub fn boolean(&self, key: &str) -> Result<Option<bool>, BadArg> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(bad(format!(
                "'{key}' must be true or false, got {}.",
                type_name(other)
            ))),
        }
    }

    /// An optional array of strings.
    pub fn strings(&self, key: &str) -> Result<Vec<&'a str>, BadArg> {
        match self.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| {
                    v.as_str().ok_or_else(|| {
                        bad(format!(
                            "'{key}' must be an array of strings; it holds {}.",
                            type_name(v)
                        ))
                    })
                })
                .collect(),
            Some(other) => Err(bad(format!(
                "'{key}' must be an array of strings, got {}.",
                type_name(other)
            ))),
        }
    }

    /// An optional array of objects.
    pub fn objects(&self, key: &str) -> Result<Vec<&'a Object>, BadArg> {
        match self.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| {
                    v.as_object().ok_or_else(|| {
                        bad(format!(
                            "'{key}' must be an array of objects; it holds {}.",
                            type_name(v)
                        ))
                    })
                })
                .collect(),
            Some(other) => Err(bad(format!(
                "'{key}' must be an array of objects, got {}.",
                type_name(other)
            ))),
        }
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Object {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn unknown_parameter_lists_valid_ones() {
        let m = map(json!({"paht": "."}));
        let err = Args::new("LS", &m, &["path", "limit"]).err().unwrap();
        assert_eq!(
            err.message,
            "Unknown parameter 'paht' for LS. Valid parameters: path, limit."
        );
    }

    #[test]
    fn types_are_checked_and_null_is_absent() {
        let m = map(json!({"a": "x", "n": 3.0, "f": 2.5, "b": "true", "z": null}));
        let args = Args::new("T", &m, &["a", "n", "f", "b", "z"]).unwrap();
        assert_eq!(args.integer("n").unwrap(), Some(3));
        assert!(args.integer("f").is_err());
        assert_eq!(
            args.boolean("b").unwrap_err().message,
            "'b' must be true or false, got a string."
        );
        assert_eq!(args.string("z").unwrap(), None);
        assert_eq!(
            args.required_string("z").unwrap_err().message,
            "Missing required parameter 'z'."
        );
        assert!(args.strings("a").is_err());
    }

    #[test]
    fn versions_are_exact_as_strings_or_integers_and_lossy_floats_are_refused() {
        let branch = (1u64 << 63) + 1;
        let m = map(json!({
            "s": branch.to_string(), "u": branch, "small": 42, "whole": 7.0,
            "big": 1.8e18, "neg": -1, "frac": 2.5, "word": "v12", "signed": "+3", "b": true,
        }));
        let names = [
            "s", "u", "small", "whole", "big", "neg", "frac", "word", "signed", "b",
        ];
        let args = Args::new("T", &m, &names).unwrap();
        assert_eq!(args.version("s").unwrap(), Some(branch));
        assert_eq!(args.version("u").unwrap(), Some(branch));
        assert_eq!(args.version("small").unwrap(), Some(42));
        assert_eq!(args.version("whole").unwrap(), Some(7));
        assert_eq!(args.version("absent").unwrap(), None);
        let refused = |key| args.version(key).unwrap_err().message;
        assert!(refused("big").contains("past 2^53"), "{}", refused("big"));
        assert!(refused("big").contains("as a string"));
        for key in ["neg", "frac", "word", "signed", "b"] {
            assert!(
                refused(key).starts_with(&format!("'{key}' must be a version")),
                "{}",
                refused(key)
            );
        }
        // What the tools emit, the tools accept.
        let shown = map(json!({"v": crate::tools::envelope::version_json(u64::MAX)}));
        let args = Args::new("T", &shown, &["v"]).unwrap();
        assert_eq!(args.version("v").unwrap(), Some(u64::MAX));
    }
}
