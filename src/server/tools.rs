//! The `agentvfs.v1.Tools` service: a thin adapter from gRPC to
//! [`crate::tools::Tools`].
//!
//! Every RPC takes the [`crate::service::Caller`] attached by the interceptor and
//! returns an envelope; domain errors never fail the RPC (they are
//! `status: "error"` envelopes), only a request that skipped the interceptor
//! does. The typed RPCs turn their fields into the same JSON arguments object
//! a model would write, by the tool's parameter table
//! ([`crate::tools::Params::arguments`]: unset optional fields left out, so
//! defaults apply), and go through the same path as `Invoke`, so both answer
//! identically.

use super::caller::caller;
use crate::pb;
use crate::pb::tools_server::Tools as ToolsRpc;
use crate::tools::{Envelope, Object, ToolName, Tools};
use prost_types::value::Kind;
use serde::Serialize;
use serde_json::Value;
use tonic::{Request, Response, Status};

/// Serves the LLM tools over gRPC.
pub struct ToolsService {
    tools: Tools,
}

impl ToolsService {
    /// A service running `tools`.
    pub fn new(tools: Tools) -> Self {
        ToolsService { tools }
    }

    /// A typed RPC of `tool`: its request's fields become the arguments
    /// object by the tool's parameter table; `tool_call_id` names the call.
    async fn typed<R: Serialize>(
        &self,
        req: Request<R>,
        tool: ToolName,
    ) -> Result<Envelope, Status> {
        let caller = caller(&req)?;
        let fields = match serde_json::to_value(req.get_ref()) {
            Ok(Value::Object(fields)) => fields,
            _ => Object::new(),
        };
        let id = fields.get("tool_call_id").and_then(Value::as_str);
        let id = id.unwrap_or_default().to_owned();
        let args = tool.params().arguments(fields);
        Ok(self
            .tools
            .invoke_args(caller, tool.as_str(), Ok(args), &id)
            .await)
    }
}

/// The envelope as the protobuf message.
fn envelope_message(envelope: &Envelope) -> pb::Envelope {
    pb::Envelope {
        status: envelope.status.as_str().into(),
        data: Some(to_struct(&envelope.data)),
        text: envelope.text.clone(),
        stats: Some(to_struct(&envelope.stats)),
        context: Some(to_struct(&envelope.context)),
        error: envelope.error().map(|e| pb::EnvelopeError {
            code: e.code.into(),
            message: e.message.clone(),
        }),
    }
}

/// A JSON object as a `google.protobuf.Struct` (numbers become doubles, as
/// the well-known type requires).
fn to_struct(object: &Object) -> prost_types::Struct {
    prost_types::Struct {
        fields: object
            .iter()
            .map(|(k, v)| (k.clone(), to_proto_value(v)))
            .collect(),
    }
}

fn to_proto_value(v: &Value) -> prost_types::Value {
    let kind = match v {
        Value::Null => Kind::NullValue(0),
        Value::Bool(b) => Kind::BoolValue(*b),
        Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) => Kind::StringValue(s.clone()),
        Value::Array(items) => Kind::ListValue(prost_types::ListValue {
            values: items.iter().map(to_proto_value).collect(),
        }),
        Value::Object(o) => Kind::StructValue(to_struct(o)),
    };
    prost_types::Value { kind: Some(kind) }
}

type Reply<T> = Result<Response<T>, Status>;

macro_rules! reply {
    ($ty:ident, $envelope:expr) => {{
        let envelope = $envelope;
        Ok(Response::new(pb::$ty {
            envelope_json: envelope.to_json(),
            envelope: Some(envelope_message(&envelope)),
        }))
    }};
}

#[tonic::async_trait]
impl ToolsRpc for ToolsService {
    async fn list_tools(&self, _: Request<pb::ListToolsRequest>) -> Reply<pb::ListToolsResponse> {
        let tools = ToolName::ALL.map(|t| pb::ToolSpec {
            name: t.as_str().into(),
            description: t.description().into(),
            parameters_json_schema: t.schema().to_string(),
        });
        Ok(Response::new(pb::ListToolsResponse {
            tools: tools.into(),
        }))
    }

    async fn invoke(&self, req: Request<pb::InvokeRequest>) -> Reply<pb::InvokeResponse> {
        let caller = caller(&req)?;
        let r = req.into_inner();
        let envelope = self
            .tools
            .invoke(caller, &r.name, &r.arguments_json, &r.tool_call_id)
            .await;
        reply!(InvokeResponse, envelope)
    }

    async fn ls_tool(&self, req: Request<pb::LsToolRequest>) -> Reply<pb::LsToolResponse> {
        reply!(LsToolResponse, self.typed(req, ToolName::Ls).await?)
    }

    async fn glob_tool(&self, req: Request<pb::GlobToolRequest>) -> Reply<pb::GlobToolResponse> {
        reply!(GlobToolResponse, self.typed(req, ToolName::Glob).await?)
    }

    async fn grep_tool(&self, req: Request<pb::GrepToolRequest>) -> Reply<pb::GrepToolResponse> {
        reply!(GrepToolResponse, self.typed(req, ToolName::Grep).await?)
    }

    async fn read_tool(&self, req: Request<pb::ReadToolRequest>) -> Reply<pb::ReadToolResponse> {
        reply!(ReadToolResponse, self.typed(req, ToolName::Read).await?)
    }

    async fn write_tool(&self, req: Request<pb::WriteToolRequest>) -> Reply<pb::WriteToolResponse> {
        reply!(WriteToolResponse, self.typed(req, ToolName::Write).await?)
    }

    async fn edit_tool(&self, req: Request<pb::EditToolRequest>) -> Reply<pb::EditToolResponse> {
        reply!(EditToolResponse, self.typed(req, ToolName::Edit).await?)
    }

    async fn multi_edit_tool(
        &self,
        req: Request<pb::MultiEditToolRequest>,
    ) -> Reply<pb::MultiEditToolResponse> {
        let envelope = self.typed(req, ToolName::MultiEdit).await?;
        reply!(MultiEditToolResponse, envelope)
    }

    async fn history_tool(
        &self,
        req: Request<pb::HistoryToolRequest>,
    ) -> Reply<pb::HistoryToolResponse> {
        reply!(
            HistoryToolResponse,
            self.typed(req, ToolName::History).await?
        )
    }

    async fn apply_patch_tool(
        &self,
        req: Request<pb::ApplyPatchToolRequest>,
    ) -> Reply<pb::ApplyPatchToolResponse> {
        let envelope = self.typed(req, ToolName::ApplyPatch).await?;
        reply!(ApplyPatchToolResponse, envelope)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Field names of a typed request with every field set, as JSON.
    fn fields<R: Serialize>(request: R) -> Vec<String> {
        let value = serde_json::to_value(request).expect("a message serializes");
        let fields = value.as_object().cloned().unwrap_or_default();
        fields
            .keys()
            .filter(|k| *k != "tool_call_id")
            .cloned()
            .collect()
    }

    #[test]
    fn typed_requests_name_their_fields_after_the_parameter_tables() {
        let names = |t: ToolName| t.params().names().iter().map(|n| n.to_string()).collect();
        let cases: [(ToolName, Vec<String>); 9] = [
            (ToolName::Ls, fields(pb::LsToolRequest::default())),
            (ToolName::Glob, fields(pb::GlobToolRequest::default())),
            (ToolName::Grep, fields(pb::GrepToolRequest::default())),
            (ToolName::Read, fields(pb::ReadToolRequest::default())),
            (ToolName::Write, fields(pb::WriteToolRequest::default())),
            (ToolName::Edit, fields(pb::EditToolRequest::default())),
            (
                ToolName::MultiEdit,
                fields(pb::MultiEditToolRequest::default()),
            ),
            (ToolName::History, fields(pb::HistoryToolRequest::default())),
            (
                ToolName::ApplyPatch,
                fields(pb::ApplyPatchToolRequest::default()),
            ),
        ];
        for (tool, fields) in cases {
            let mut fields = fields;
            let mut expected: Vec<String> = names(tool);
            fields.sort();
            expected.sort();
            assert_eq!(fields, expected, "{}", tool.as_str());
        }
        let edit = fields(pb::ToolEdit::default());
        assert_eq!(edit, ["old_string", "new_string", "replace_all"]);
    }

    #[test]
    fn envelopes_carry_the_error_code() {
        let err = Envelope::from_error(
            crate::tools::ToolError::new(
                crate::Error::NotFound("/x".into()),
                "Path 'x' does not exist.",
            ),
            Object::new(),
            Object::new(),
        );
        assert_eq!(envelope_message(&err).error.unwrap().code, "NOT_FOUND");
    }

    #[test]
    fn structs_carry_nested_values() {
        let object = json!({"n": 3, "l": ["a", true, null]});
        let s = to_struct(object.as_object().unwrap_or(&Object::new()));
        assert_eq!(s.fields["n"].kind, Some(Kind::NumberValue(3.0)));
        let Some(Kind::ListValue(l)) = &s.fields["l"].kind else {
            panic!("list expected");
        };
        assert_eq!(l.values.len(), 3);
    }
}
