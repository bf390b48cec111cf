//! The Rust runner of the shared conformance suite: every case of
//! `tests/conformance/*.json` against the real server, the same cases the Go,
//! Python and TypeScript clients run (format: `tests/conformance/README.md`).
//!
//! Calls are made by name (`"Filesystem.Write"`) through the server's own
//! descriptor set and `prost-reflect`'s dynamic messages, so a case for a new
//! RPC of any service needs no change here. Requests and results are proto
//! JSON with the proto field names, as in every runner.

use crate::util::Server;
use agentvfs::pb::FILE_DESCRIPTOR_SET;
use base64::Engine;
use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor, SerializeOptions};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::PathBuf;
use tokio_stream::StreamExt;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::metadata::MetadataValue;
use tonic::transport::Channel;
use tonic::{Request, Status};
use tonic_types::StatusExt;

/// Bytes per WriteBytes data message (each client picks its own; the cases
/// do not depend on it).
const UPLOAD_CHUNK_BYTES: usize = 256 << 10;

/// The conformance files, sorted, each with its parsed suite.
fn suites() -> Vec<(String, Value)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/conformance");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/conformance exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no conformance files in {dir:?}");
    files
        .iter()
        .map(|file| {
            let text = std::fs::read_to_string(file).expect("readable case file");
            let suite = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{}: invalid JSON: {e}", file.display()));
            let name = file.file_name().expect("file name").to_string_lossy();
            (name.into_owned(), suite)
        })
        .collect()
}

/// Services the client libraries do not wrap yet, so the shared suite
/// cannot call them: the audit log's, an operator's (docs/audit.md § Query;
/// `tests/it/audit.rs` calls each of its RPCs).
const NOT_IN_CLIENTS: &[&str] = &["AuditLog"];

/// Every RPC of every service has at least one step in the suite, so every
/// client is proven to reach all of them (issue 7).
#[test]
fn every_rpc_of_every_service_has_a_conformance_step() {
    let called: std::collections::HashSet<String> = suites()
        .iter()
        .flat_map(|(_, suite)| suite["cases"].as_array().cloned().unwrap_or_default())
        .flat_map(|case| case["steps"].as_array().cloned().unwrap_or_default())
        .filter_map(|step| step["call"].as_str().map(str::to_owned))
        .collect();
    let pool = DescriptorPool::decode(FILE_DESCRIPTOR_SET).expect("valid descriptor set");
    let services: Vec<_> = pool
        .services()
        .filter(|s| s.package_name() == "agentvfs.v1")
        .filter(|s| !NOT_IN_CLIENTS.contains(&s.name()))
        .collect();
    assert_eq!(services.len(), 3, "Filesystem, Tools and Access");
    let missing: Vec<String> = services
        .iter()
        .flat_map(|s| {
            s.methods()
                .map(move |m| format!("{}.{}", s.name(), m.name()))
        })
        .filter(|call| !called.contains(call))
        .collect();
    assert!(
        missing.is_empty(),
        "RPCs without a conformance step: {missing:?}"
    );
}

/// Every case of every conformance file passes against the real server.
#[tokio::test]
async fn every_conformance_case_passes() {
    let pool = DescriptorPool::decode(FILE_DESCRIPTOR_SET).expect("valid descriptor set");
    let (mut passed, mut failures) = (0, Vec::new());
    for (name, suite) in suites() {
        let config = suite.pointer("/server/config").and_then(Value::as_str);
        let server = Server::start_with(config, &[]);
        let runner = Runner {
            pool: pool.clone(),
            channel: server.channel().await,
            token: suite["token"].as_str().unwrap_or("").to_owned(),
        };
        let cases = suite["cases"].as_array().expect("\"cases\" is an array");
        for case in cases {
            let case_name = case["name"].as_str().expect("case has a name");
            match runner.run_case(case_name, case).await {
                Ok(()) => passed += 1,
                Err(e) => failures.push(format!("{name} / {case_name}: {e}")),
            }
        }
    }
    println!("conformance: {passed} passed, {} failed", failures.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Runs cases against one server (and makes calls by name for
/// `tests/it/disclosure.rs`).
pub(crate) struct Runner {
    pub(crate) pool: DescriptorPool,
    pub(crate) channel: Channel,
    /// The file's default bearer token ("" for none).
    pub(crate) token: String,
}

impl Runner {
    async fn run_case(&self, case_name: &str, case: &Value) -> Result<(), String> {
        let mut vars = HashMap::new();
        let steps = case["steps"]
            .as_array()
            .ok_or("\"steps\" is not an array")?;
        for (i, step) in steps.iter().enumerate() {
            self.run_step(case_name, step, &mut vars)
                .await
                .map_err(|e| format!("step {i} ({}): {e}", step["call"]))?;
        }
        Ok(())
    }

    async fn run_step(
        &self,
        case_name: &str,
        step: &Value,
        vars: &mut HashMap<String, Value>,
    ) -> Result<(), String> {
        let session = match step["session"].as_str() {
            Some(s) => format!("{case_name}.{s}"),
            None => case_name.to_owned(),
        };
        let scope = Scope {
            session: &session,
            namespace: step["namespace"]
                .as_str()
                .map(|ns| format!("{case_name}.{ns}")),
            token: step["token"].as_str().unwrap_or(&self.token),
            label: step["label"].as_str(),
            branch: step["branch"].as_str(),
        };
        let request = substitute(&step["request"], vars);
        let outcome = self
            .call(
                step["call"].as_str().ok_or("no \"call\"")?,
                request,
                &scope,
                step["cancel_after"].as_u64(),
            )
            .await?;
        match (outcome, step.get("error")) {
            (Err(actual), Some(expected)) => {
                check(&without_native(substitute(expected, vars)), &actual)
            }
            (Err(actual), None) => Err(format!("unexpected error {actual}")),
            (Ok(actual), Some(_)) => Err(format!("expected an error, got {actual}")),
            (Ok(actual), None) => {
                if let Some(expected) = step.get("expect") {
                    check(&substitute(expected, vars), &actual)?;
                }
                for (var, path) in step["save"].as_object().into_iter().flatten() {
                    let path = path.as_str().ok_or("save paths are strings")?;
                    let value = lookup(&actual, path)
                        .ok_or_else(|| format!("cannot save {path}: not in {actual}"))?;
                    vars.insert(var.clone(), value.clone());
                }
                Ok(())
            }
        }
    }

    /// Makes one call; `Ok(Err(error))` is the RPC's error as the runners
    /// report it (`{"grpc", "code", "message", "metadata"}`), `Err` a broken case.
    pub(crate) async fn call(
        &self,
        call: &str,
        request: Value,
        scope: &Scope<'_>,
        cancel_after: Option<u64>,
    ) -> Result<Result<Value, Value>, String> {
        let (service, method) = call.split_once('.').ok_or("call is Service.Method")?;
        let method = self
            .pool
            .get_service_by_name(&format!("agentvfs.v1.{service}"))
            .and_then(|s| s.methods().find(|m| m.name() == method))
            .ok_or_else(|| format!("no method {call}"))?;
        let path = format!("/{}/{}", method.parent_service().full_name(), method.name())
            .parse()
            .map_err(|e| format!("{e}"))?;
        let codec = DynCodec(method.output());
        let mut grpc =
            tonic::client::Grpc::new(self.channel.clone()).max_decoding_message_size(256 << 20);
        grpc.ready().await.map_err(|e| e.to_string())?;
        let metadata = |msg| with_metadata(msg, scope);
        if method.is_client_streaming() {
            let msgs = upload_messages(&method.input(), &request)?;
            let response = grpc
                .client_streaming(with_metadata(tokio_stream::iter(msgs), scope), path, codec)
                .await;
            return Ok(response
                .map(|r| to_json(&r.into_inner()))
                .map_err(error_json));
        }
        let watch = call == "Filesystem.Watch";
        if watch && request["stop_at_head"] != json!(true) {
            // A Watch that follows would never end.
            return Err("a Watch step must set stop_at_head".into());
        }
        let start_cursor = request["cursor"].clone();
        let msg = DynamicMessage::deserialize(method.input(), request)
            .map_err(|e| format!("bad request: {e}"))?;
        if !method.is_server_streaming() {
            let response = grpc.unary(metadata(msg), path, codec).await;
            return Ok(response
                .map(|r| to_json(&r.into_inner()))
                .map_err(error_json));
        }
        let mut stream = match grpc.server_streaming(metadata(msg), path, codec).await {
            Ok(r) => r.into_inner(),
            Err(status) => return Ok(Err(error_json(status))),
        };
        let mut collected = Collected::default();
        if watch {
            // With no message, no event and the cursor the Watch started at.
            collected.fields.insert("events".into(), json!([]));
            let cursor = start_cursor.as_str().unwrap_or("");
            collected.fields.insert("cursor".into(), json!(cursor));
        }
        loop {
            if cancel_after.is_some_and(|n| collected.results() >= n) {
                // Dropping the stream is how a Rust client cancels; nothing
                // reports it back, so the runner records the status the other
                // languages observe.
                drop(stream);
                return Ok(Err(
                    json!({"grpc": "CANCELLED", "code": "", "message": "cancelled"}),
                ));
            }
            match stream.next().await {
                None => return Ok(Ok(collected.into_json())),
                Some(Err(status)) => return Ok(Err(error_json(status))),
                Some(Ok(msg)) => collected.add(to_json(&msg)),
            }
        }
    }
}

/// Who a step calls as: its session, its namespace (`<case>.<namespace>`
/// when the step names one), its bearer token ("" for none) and the label of
/// its changes and the branch it works in, if any.
pub(crate) struct Scope<'a> {
    pub(crate) session: &'a str,
    pub(crate) namespace: Option<String>,
    pub(crate) token: &'a str,
    pub(crate) label: Option<&'a str>,
    pub(crate) branch: Option<&'a str>,
}

/// A request carrying the session, the namespace, the label and the branch
/// if any and, unless the token is empty, the token.
fn with_metadata<T>(msg: T, scope: &Scope<'_>) -> Request<T> {
    let mut req = Request::new(msg);
    let md = req.metadata_mut();
    // Case names, namespaces and tokens are ASCII by the suite's rules; a bad
    // one fails the run.
    md.insert(
        "x-agentvfs-session",
        MetadataValue::try_from(scope.session).expect("ASCII session"),
    );
    if let Some(namespace) = &scope.namespace {
        md.insert(
            "x-agentvfs-namespace",
            MetadataValue::try_from(namespace.as_str()).expect("ASCII namespace"),
        );
    }
    if let Some(label) = scope.label {
        md.insert(
            "x-agentvfs-label",
            MetadataValue::try_from(label).expect("ASCII label"),
        );
    }
    if let Some(branch) = scope.branch {
        md.insert(
            "x-agentvfs-branch",
            MetadataValue::try_from(branch).expect("ASCII branch"),
        );
    }
    if !scope.token.is_empty() {
        let bearer = format!("Bearer {}", scope.token);
        md.insert(
            "authorization",
            MetadataValue::try_from(bearer).expect("ASCII token"),
        );
    }
    req
}

/// A server stream folded into one result: search batches concatenated with
/// their summary, downloaded chunks as size and SHA-256, or a Watch's events
/// concatenated with its last cursor.
#[derive(Default)]
struct Collected {
    fields: Map<String, Value>,
    data: Vec<u8>,
    chunked: bool,
}

impl Collected {
    fn add(&mut self, msg: Value) {
        let Value::Object(msg) = msg else { return };
        for (key, value) in msg {
            match (key.as_str(), value) {
                ("batch", Value::Object(batch)) => {
                    for (list, items) in batch {
                        let entry = self.fields.entry(list).or_insert_with(|| json!([]));
                        if let (Value::Array(all), Value::Array(items)) = (entry, items) {
                            all.extend(items);
                        }
                    }
                }
                ("events", Value::Array(events)) => {
                    let entry = self.fields.entry(key).or_insert_with(|| json!([]));
                    if let Value::Array(all) = entry {
                        all.extend(events);
                    }
                }
                ("cursor", cursor) => {
                    self.fields.insert(key, cursor);
                }
                ("data", Value::String(b64)) => {
                    self.chunked = true;
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(b64)
                        .expect("proto JSON bytes are base64");
                    self.data.extend(bytes);
                }
                (_, value) => {
                    self.fields.entry(key).or_insert(value);
                }
            }
        }
    }

    /// Search results received so far.
    fn results(&self) -> u64 {
        let lists = self.fields.values().filter_map(Value::as_array);
        lists.map(|l| l.len() as u64).sum()
    }

    fn into_json(mut self) -> Value {
        if self.chunked || self.fields.contains_key("info") {
            self.fields.insert("size".into(), json!(self.data.len()));
            let digest = Sha256::digest(&self.data);
            let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
            self.fields.insert("sha256".into(), json!(hex));
        }
        Value::Object(self.fields)
    }
}

/// The messages of a client-streaming upload: `{"header": …}` then the
/// concatenated `data` pieces in chunks.
fn upload_messages(
    input: &MessageDescriptor,
    request: &Value,
) -> Result<Vec<DynamicMessage>, String> {
    let header = json!({"header": request["header"]});
    let mut msgs =
        vec![DynamicMessage::deserialize(input.clone(), header).map_err(|e| e.to_string())?];
    let data = piece_bytes(&request["data"])?;
    for chunk in data.chunks(UPLOAD_CHUNK_BYTES) {
        let b64 = base64::engine::general_purpose::STANDARD.encode(chunk);
        msgs.push(
            DynamicMessage::deserialize(input.clone(), json!({"data": b64}))
                .map_err(|e| e.to_string())?,
        );
    }
    Ok(msgs)
}

/// Concatenates `[{"text"|"base64": …, "repeat": n}]`.
fn piece_bytes(pieces: &Value) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    for piece in pieces.as_array().ok_or("\"data\" is an array of pieces")? {
        let bytes = match (piece["text"].as_str(), piece["base64"].as_str()) {
            (Some(text), None) => text.as_bytes().to_vec(),
            (None, Some(b64)) => base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map_err(|e| e.to_string())?,
            _ => return Err(format!("a piece has text or base64: {piece}")),
        };
        out.extend(bytes.repeat(piece["repeat"].as_u64().unwrap_or(1) as usize));
    }
    Ok(out)
}

fn to_json(msg: &DynamicMessage) -> Value {
    let options = SerializeOptions::new().use_proto_field_name(true);
    msg.serialize_with_options(serde_json::value::Serializer, &options)
        .expect("a decoded message serializes")
}

/// An error pattern without what only clients report: the native error
/// they raise and a typed conflict's versions (tests/conformance/README.md).
fn without_native(mut pattern: Value) -> Value {
    if let Some(keys) = pattern.as_object_mut() {
        keys.remove("native");
        keys.remove("conflict");
    }
    pattern
}

/// `{"grpc": "NOT_FOUND", "code": <ErrorInfo.reason or "">, "message": …,
/// "metadata": <ErrorInfo.metadata>}`, and `"operation_index": n` when the
/// metadata names a failing changeset operation.
fn error_json(status: Status) -> Value {
    let camel = format!("{:?}", status.code());
    let mut grpc = String::new();
    for (i, c) in camel.chars().enumerate() {
        if i > 0 && c.is_ascii_uppercase() {
            grpc.push('_');
        }
        grpc.push(c.to_ascii_uppercase());
    }
    let (code, metadata) = status
        .get_details_error_info()
        .map(|i| (i.reason, i.metadata))
        .unwrap_or_default();
    // The failing changeset operation, which the clients' errors carry parsed.
    let operation_index = metadata
        .get("operation_index")
        .and_then(|i| i.parse::<u64>().ok());
    let mut out =
        json!({"grpc": grpc, "code": code, "message": status.message(), "metadata": metadata});
    if let Some(index) = operation_index {
        out["operation_index"] = json!(index);
    }
    out
}

/// Replaces `"${var}"` strings by saved values (keeping their JSON type),
/// and `${var}` inside a longer string by the value's text.
fn substitute(value: &Value, vars: &HashMap<String, Value>) -> Value {
    match value {
        Value::String(s) => s
            .strip_prefix("${")
            .and_then(|s| s.strip_suffix('}'))
            .and_then(|var| vars.get(var))
            .cloned()
            .unwrap_or_else(|| {
                let mut s = s.clone();
                for (var, saved) in vars {
                    s = s.replace(&format!("${{{var}}}"), &text(saved));
                }
                Value::String(s)
            }),
        Value::Array(items) => Value::Array(items.iter().map(|v| substitute(v, vars)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), substitute(v, vars)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// A saved value inside a string: a string as is, a number in decimal.
fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => u.to_string(),
            (_, Some(i), _) => i.to_string(),
            (_, _, Some(f)) if f.fract() == 0.0 => format!("{f:.0}"),
            _ => n.to_string(),
        },
        other => other.to_string(),
    }
}

fn lookup<'a>(value: &'a Value, dotted: &str) -> Option<&'a Value> {
    dotted.split('.').try_fold(value, |v, key| v.get(key))
}

/// Checks `actual` against the `expected` pattern (README: subset match,
/// defaults for omitted fields, numbers equal to decimal strings, `$contains`,
/// `$gte`, `$json`).
fn check(expected: &Value, actual: &Value) -> Result<(), String> {
    let mut problems = Vec::new();
    check_at("$", expected, Some(actual), &mut problems);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!("{} in {actual}", problems.join("; ")))
    }
}

fn check_at(at: &str, expected: &Value, actual: Option<&Value>, problems: &mut Vec<String>) {
    match expected {
        Value::Object(ops) if ops.keys().any(|k| k.starts_with('$')) => {
            for (op, arg) in ops {
                let ok = match (op.as_str(), actual) {
                    ("$contains", Some(Value::String(s))) => {
                        arg.as_str().is_some_and(|a| s.contains(a))
                    }
                    ("$gte", a) => number(a)
                        .zip(number(Some(arg)))
                        .is_some_and(|(a, b)| a >= b),
                    ("$json", Some(Value::String(s))) => match serde_json::from_str(s) {
                        Ok(parsed) => {
                            check_at(&format!("{at}<json>"), arg, Some(&parsed), problems);
                            true
                        }
                        Err(e) => {
                            problems.push(format!("{at}: not JSON ({e}): {s}"));
                            true
                        }
                    },
                    _ => false,
                };
                if !ok {
                    problems.push(format!("{at}: {actual:?} fails {op} {arg}"));
                }
            }
        }
        Value::Object(fields) => {
            if let Some(a) = actual.filter(|a| !a.is_object()) {
                problems.push(format!("{at}: expected an object, got {a}"));
                return;
            }
            for (key, value) in fields {
                check_at(
                    &format!("{at}.{key}"),
                    value,
                    actual.and_then(|a| a.get(key)),
                    problems,
                );
            }
        }
        Value::Array(items) => {
            let empty = Vec::new();
            let got = match actual {
                None => &empty,
                Some(Value::Array(got)) => got,
                Some(other) => {
                    problems.push(format!("{at}: expected an array, got {other}"));
                    return;
                }
            };
            if got.len() != items.len() {
                problems.push(format!(
                    "{at}: expected {} items, got {}",
                    items.len(),
                    got.len()
                ));
                return;
            }
            for (i, (e, a)) in items.iter().zip(got).enumerate() {
                check_at(&format!("{at}[{i}]"), e, Some(a), problems);
            }
        }
        scalar => {
            let ok = match actual {
                None => is_default(scalar),
                Some(a) => match (number(Some(scalar)), number(Some(a))) {
                    (Some(en), Some(an)) if scalar.is_number() || a.is_number() => en == an,
                    _ => scalar == a,
                },
            };
            if !ok {
                problems.push(format!("{at}: expected {scalar}, got {actual:?}"));
            }
        }
    }
}

/// The value proto JSON omits: false, 0, "0", "", null, an `*_UNSPECIFIED` enum.
fn is_default(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty() || s == "0" || s.ends_with("_UNSPECIFIED"),
        _ => false,
    }
}

/// A JSON number, or a decimal string (proto JSON's 64-bit integers).
fn number(v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// A tonic codec for messages known only by their descriptor.
struct DynCodec(MessageDescriptor);

struct DynEncoder;

struct DynDecoder(MessageDescriptor);

impl Codec for DynCodec {
    type Encode = DynamicMessage;
    type Decode = DynamicMessage;
    type Encoder = DynEncoder;
    type Decoder = DynDecoder;

    fn encoder(&mut self) -> DynEncoder {
        DynEncoder
    }

    fn decoder(&mut self) -> DynDecoder {
        DynDecoder(self.0.clone())
    }
}

impl Encoder for DynEncoder {
    type Item = DynamicMessage;
    type Error = Status;

    fn encode(&mut self, item: DynamicMessage, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        item.encode(dst)
            .map_err(|e| Status::internal(format!("encode: {e}")))
    }
}

impl Decoder for DynDecoder {
    type Item = DynamicMessage;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<DynamicMessage>, Status> {
        DynamicMessage::decode(self.0.clone(), src)
            .map(Some)
            .map_err(|e| Status::internal(format!("decode: {e}")))
    }
}
