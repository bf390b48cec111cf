//! Each tool's parameters, written once: one table per tool (its `PARAMS`),
//! in the order the model sees them. The table gives the tool's JSON Schema
//! (ListTools, MCP's `tools/list`), the names its arguments are checked
//! against ([`super::args::Args`]), and the arguments object the typed gRPC
//! RPCs build from their request's fields ([`Params::arguments`]), so a
//! parameter cannot be shown, accepted and forwarded under three spellings.
//! The typed request messages name their fields after the table (a test of
//! `src/server/tools.rs` checks it).

use super::envelope::Object;
use serde_json::Value;

/// One parameter: its name, whether a call must give it, and its JSON
/// Schema (type, description, default, bounds), keys in the order shown.
pub struct Param {
    name: &'static str,
    required: bool,
    schema: Value,
}

impl Param {
    /// A parameter every call must give.
    pub fn required(name: &'static str, schema: Value) -> Param {
        Param {
            name,
            required: true,
            schema,
        }
    }

    /// A parameter a call may leave out (its default applies).
    pub fn optional(name: &'static str, schema: Value) -> Param {
        Param {
            name,
            required: false,
            schema,
        }
    }

    /// The `label` of the tools that change files: kept with each change
    /// the call makes, as the `x-agentvfs-label` header would be (the
    /// argument wins over the header). [`super::Tools::invoke_args`] reads
    /// it for every tool, so each changing tool only lists it.
    pub fn label() -> Param {
        Param::optional(
            LABEL,
            serde_json::json!({
                "type": "string",
                "description": "Optional label kept with the changes this call makes (a turn or tool-call id), for History, Watch and Rewind. 1-128 of letters, digits and -_.@+:~/#=.",
                "maxLength": crate::scope::MAX_LABEL,
            }),
        )
    }
}

/// The JSON Schema of a version parameter (`expected_version`, History's
/// `version`): a string of decimal digits, as every envelope shows a version
/// (`super::envelope::version_json`); `description` says which version. A JSON
/// integer is accepted too when it is exact (`super::args::Args::version`),
/// but the schema asks for the string, the one spelling that survives every
/// JSON reader (docs/tools.md § Versions).
pub fn version_schema(description: &str) -> Value {
    serde_json::json!({
        "type": "string",
        "pattern": "^[0-9]{1,20}$",
        "description": format!(
            "{description} A string of digits, exactly as shown (e.g. \"1765432109876543210\")."
        ),
    })
}

/// The name of the [`Param::label`] parameter.
pub const LABEL: &str = "label";

/// A tool's parameter table (or that of the objects in an array parameter,
/// as MultiEdit's `edits`).
pub struct Params {
    params: Vec<Param>,
    names: Vec<&'static str>,
}

impl Params {
    /// The table of `params`, in the order the schema shows them.
    pub fn new(params: Vec<Param>) -> Params {
        let names = params.iter().map(|p| p.name).collect();
        Params { params, names }
    }

    /// The parameters' names, in order: what an arguments object may hold.
    pub fn names(&self) -> &[&'static str] {
        &self.names
    }

    /// The JSON Schema of the arguments object: an object with these
    /// properties (in order), the required ones, and no others.
    pub fn schema(&self) -> Value {
        let properties: Object = self
            .params
            .iter()
            .map(|p| (p.name.to_owned(), p.schema.clone()))
            .collect();
        let required: Vec<&str> = self
            .params
            .iter()
            .filter(|p| p.required)
            .map(|p| p.name)
            .collect();
        serde_json::json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        })
    }

    /// The arguments object a model would write, from a typed request's
    /// fields as JSON: each parameter's field in the table's order, unset
    /// ones left out so their defaults apply (`null`, an empty list of an
    /// optional parameter, `null` members of the objects in a list), and
    /// fields that are no parameter (the call id) dropped.
    pub fn arguments(&self, mut fields: Object) -> Object {
        let mut args = Object::new();
        for param in &self.params {
            let value = match fields.remove(param.name) {
                None | Some(Value::Null) => continue,
                Some(Value::Array(items)) if items.is_empty() && !param.required => continue,
                Some(Value::Array(items)) => Value::Array(
                    items
                        .into_iter()
                        .map(|item| match item {
                            Value::Object(o) => {
                                Value::Object(o.into_iter().filter(|(_, v)| !v.is_null()).collect())
                            }
                            other => other,
                        })
                        .collect(),
                ),
                Some(value) => value,
            };
            args.insert(param.name.to_owned(), value);
        }
        args
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arguments_leave_unset_fields_out() {
        let params = Params::new(vec![
            Param::required("path", json!({"type": "string"})),
            Param::optional("limit", json!({"type": "integer"})),
            Param::optional("ignore", json!({"type": "array"})),
            Param::required("edits", json!({"type": "array"})),
        ]);
        let fields = json!({
            "edits": [], "ignore": [], "limit": null, "path": "a", "tool_call_id": "t"
        });
        let args = params.arguments(fields.as_object().cloned().unwrap_or_default());
        assert_eq!(Value::Object(args), json!({"path": "a", "edits": []}));
        let fields = json!({"edits": [{"old_string": "x", "replace_all": null}], "path": ""});
        let args = params.arguments(fields.as_object().cloned().unwrap_or_default());
        assert_eq!(
            Value::Object(args).to_string(),
            r#"{"path":"","edits":[{"old_string":"x"}]}"#
        );
        assert_eq!(params.names(), ["path", "limit", "ignore", "edits"]);
        assert_eq!(params.schema()["required"], json!(["path", "edits"]));
    }
}
