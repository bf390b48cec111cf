//! The `agentvfs.v1.Tools` service: a thin adapter from gRPC to
//! [`crate::tools::Tools`].
//!
//! Every RPC takes the [`crate::service::Caller`] attached by the interceptor and
//! returns an envelope; domain errors never fail the RPC (they are
//! `status: "error"` envelopes), only a request that skipped the interceptor
//! does. The typed RPCs turn their fields into the same JSON arguments object
//! a model would write (unset optional fields left out, so defaults apply) and
//! go through the same path as `Invoke`, so both answer identically.

use super::caller::caller;
use crate::pb;
use crate::pb::tools_server::Tools as ToolsRpc;
use crate::service::Caller;
use crate::tools::{Envelope, Object, ToolName, Tools};
use prost_types::value::Kind;
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

    async fn typed(
        &self,
        caller: Caller,
        tool: ToolName,
        args: Object,
        tool_call_id: &str,
    ) -> Envelope {
        self.tools
            .invoke_args(caller, tool.as_str(), Ok(args), tool_call_id)
            .await
    }
}

/// Adds `key` when the optional field is set.
fn put<T: Into<Value>>(args: &mut Object, key: &str, value: Option<T>) {
    if let Some(v) = value {
        args.insert(key.into(), v.into());
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
        let caller = caller(&req)?;
        let r = req.into_inner();
        let mut args = Object::new();
        put(&mut args, "path", r.path);
        put(&mut args, "offset", r.offset);
        put(&mut args, "limit", r.limit);
        put(&mut args, "include_hidden", r.include_hidden);
        put(
            &mut args,
            "ignore",
            (!r.ignore.is_empty()).then_some(r.ignore),
        );
        reply!(
            LsToolResponse,
            self.typed(caller, ToolName::Ls, args, &r.tool_call_id)
                .await
        )
    }

    async fn glob_tool(&self, req: Request<pb::GlobToolRequest>) -> Reply<pb::GlobToolResponse> {
        let caller = caller(&req)?;
        let r = req.into_inner();
        let mut args = Object::new();
        put(&mut args, "pattern", Some(r.pattern));
        put(&mut args, "path", r.path);
        put(&mut args, "limit", r.limit);
        put(&mut args, "include_hidden", r.include_hidden);
        put(&mut args, "include_ignored", r.include_ignored);
        reply!(
            GlobToolResponse,
            self.typed(caller, ToolName::Glob, args, &r.tool_call_id)
                .await
        )
    }

    async fn grep_tool(&self, req: Request<pb::GrepToolRequest>) -> Reply<pb::GrepToolResponse> {
        let caller = caller(&req)?;
        let r = req.into_inner();
        let mut args = Object::new();
        put(&mut args, "pattern", Some(r.pattern));
        put(&mut args, "path", r.path);
        put(&mut args, "include", r.include);
        put(&mut args, "case_sensitive", r.case_sensitive);
        put(&mut args, "output_mode", r.output_mode);
        put(&mut args, "limit", r.limit);
        put(&mut args, "context", r.context);
        put(&mut args, "include_hidden", r.include_hidden);
        put(&mut args, "include_ignored", r.include_ignored);
        reply!(
            GrepToolResponse,
            self.typed(caller, ToolName::Grep, args, &r.tool_call_id)
                .await
        )
    }

    async fn read_tool(&self, req: Request<pb::ReadToolRequest>) -> Reply<pb::ReadToolResponse> {
        let caller = caller(&req)?;
        let r = req.into_inner();
        let mut args = Object::new();
        put(&mut args, "path", Some(r.path));
        put(&mut args, "start_line", r.start_line);
        put(&mut args, "limit", r.limit);
        reply!(
            ReadToolResponse,
            self.typed(caller, ToolName::Read, args, &r.tool_call_id)
                .await
        )
    }

    async fn write_tool(&self, req: Request<pb::WriteToolRequest>) -> Reply<pb::WriteToolResponse> {
        let caller = caller(&req)?;
        let r = req.into_inner();
        let mut args = Object::new();
        put(&mut args, "path", Some(r.path));
        put(&mut args, "content", Some(r.content));
        put(&mut args, "dry_run", r.dry_run);
        put(&mut args, "expected_version", r.expected_version);
        reply!(
            WriteToolResponse,
            self.typed(caller, ToolName::Write, args, &r.tool_call_id)
                .await
        )
    }

    async fn edit_tool(&self, req: Request<pb::EditToolRequest>) -> Reply<pb::EditToolResponse> {
        let caller = caller(&req)?;
        let r = req.into_inner();
        let mut args = Object::new();
        put(&mut args, "path", Some(r.path));
        put(&mut args, "old_string", Some(r.old_string));
        put(&mut args, "new_string", Some(r.new_string));
        put(&mut args, "replace_all", r.replace_all);
        put(&mut args, "dry_run", r.dry_run);
        put(&mut args, "expected_version", r.expected_version);
        reply!(
            EditToolResponse,
            self.typed(caller, ToolName::Edit, args, &r.tool_call_id)
                .await
        )
    }

    async fn multi_edit_tool(
        &self,
        req: Request<pb::MultiEditToolRequest>,
    ) -> Reply<pb::MultiEditToolResponse> {
        let caller = caller(&req)?;
        let r = req.into_inner();
        let mut args = Object::new();
        let edits: Vec<Value> = r
            .edits
            .into_iter()
            .map(|e| {
                let mut edit = Object::new();
                put(&mut edit, "old_string", Some(e.old_string));
                put(&mut edit, "new_string", Some(e.new_string));
                put(&mut edit, "replace_all", e.replace_all);
                Value::Object(edit)
            })
            .collect();
        put(&mut args, "path", Some(r.path));
        put(&mut args, "edits", Some(edits));
        put(&mut args, "dry_run", r.dry_run);
        put(&mut args, "expected_version", r.expected_version);
        reply!(
            MultiEditToolResponse,
            self.typed(caller, ToolName::MultiEdit, args, &r.tool_call_id)
                .await
        )
    }

    async fn history_tool(
        &self,
        req: Request<pb::HistoryToolRequest>,
    ) -> Reply<pb::HistoryToolResponse> {
        let caller = caller(&req)?;
        let r = req.into_inner();
        let mut args = Object::new();
        put(&mut args, "path", Some(r.path));
        put(&mut args, "action", r.action);
        put(&mut args, "version", r.version);
        put(&mut args, "to_version", r.to_version);
        put(&mut args, "expected_version", r.expected_version);
        reply!(
            HistoryToolResponse,
            self.typed(caller, ToolName::History, args, &r.tool_call_id)
                .await
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
