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
}
