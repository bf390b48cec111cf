//! The LLM tool layer: LS, Glob, Grep, Read, Write, Edit, MultiEdit,
//! History, ApplyPatch, Delete, Move and Copy over the one logical path
//! space, each answering in the standard envelope; Claude's own file
//! tools, `memory` and `str_replace_based_edit_tool`, with the texts of
//! Anthropic's reference implementations ([`memory`], [`text_editor`]);
//! and the branch tools, BranchCreate, BranchList, BranchDiff, BranchMerge
//! and BranchDiscard ([`branch`]).
//!
//! Request flow: the `agentvfs.v1.Tools` adapter (`server/tools.rs`) takes the
//! [`Caller`] from the interceptor and calls [`Tools::invoke`] (tool name +
//! JSON arguments as the model wrote them, or the typed RPC's fields turned
//! into the same JSON). `invoke` parses the arguments, dispatches by name to
//! one file per tool (like mini-redis's `cmd/`), then the output budget
//! ([`budget`]) bounds the text. Tools make their calls through the
//! application layer ([`Service`]: grants, size limits, blocking work, the
//! shared search engine), exactly as the Filesystem service does; there is
//! no gRPC loopback.
//!
//! Invariants:
//! - every call returns an envelope: malformed JSON, an unknown tool, a bad
//!   argument, a missing grant or a storage fault are `status: "error"`
//!   envelopes, never failed RPCs, because a model reads them;
//! - paths are resolved against the configured project root ([`Call::resolve`]):
//!   relative paths below it, absolute logical paths must lie inside it
//!   (ACCESS_DENIED otherwise); result paths are shown relative to it, POSIX;
//! - each tool checks the caller's grants exactly like the Filesystem service
//!   (LS/Glob `list`, Grep `read_re`, Read `read_file`, Write `write`,
//!   Edit/MultiEdit `read_file` + `write`; History by action: `file`,
//!   `read_file`, `read_file` + `write`; ApplyPatch as a changeset's
//!   operations; Delete `delete`; Move `write` + `delete` on the source and
//!   `write` on the destination; Copy `read_file` on the source and `write`
//!   on the destination; the branch tools as the branch RPCs:
//!   docs/branches.md);
//! - `stats.time_ms` and `context.cwd` / `context.params_input` are in every
//!   envelope, `context.path_resolved` once a path was resolved;
//! - messages quote raw input (paths, names, strings) through
//!   [`crate::error::echo`], so a 16 KiB argument never comes back whole.
//!
//! Performance: tools reuse the Filesystem service's machinery (one backend
//! call on a blocking thread, the streaming search engine), so a call costs
//! little beyond it. Measured end to end through gRPC on loopback (20 calls
//! each, State tier, 2 shared cores): ListTools 0.2 ms, LS of 20 entries
//! 0.3 ms, Read of 500 lines 0.6 ms, Glob over 2,000 files 0.6 ms, Grep over
//! 2,000 files 6 ms, Edit's not-found hint on a 10,000-line file 8–18 ms.
//! Grep and Glob collect hits before rendering (Grep must sort by mtime), so
//! their specs cap `max_results` to bound memory.

/// Builds a JSON object from `key => value` pairs, in order (defined before
/// the tool modules so they can use it).
macro_rules! object {
    ($($key:literal => $value:expr),* $(,)?) => {{
        #[allow(unused_mut)]
        let mut o = $crate::tools::Object::new();
        $(o.insert($key.into(), serde_json::Value::from($value));)*
        o
    }};
}

mod apply_patch;
mod args;
mod branch;
pub mod budget;
mod claude;
mod copy;
mod delete;
mod edit;
pub mod envelope;
mod glob;
mod grep;
mod hint;
mod history;
mod ls;
pub mod media;
mod memory;
mod multi_edit;
mod mv;
pub mod params;
mod read;
mod text_editor;
mod write;

pub use envelope::{Envelope, EnvelopeError, Object, Outcome, Status, ToolError};
pub use params::Params;

use crate::access::Op;
use crate::error::{Error, echo};
use crate::path::VfsPath;
use crate::search::{Hit, SearchSpec, Summary};
use crate::service::{Caller, Service};
use serde_json::Value;
use std::time::Instant;

/// Default logical directory where tool results over the output budget are
/// saved in full (one file per tool call id).
pub const DEFAULT_LARGE_RESULT_PREFIX: &str = "/large_tool_results";
/// Default most lines of one tool envelope's text.
pub const DEFAULT_MAX_OUTPUT_LINES: u64 = 2000;
/// Default most bytes of one tool envelope's text (50 KiB, about 12k tokens).
pub const DEFAULT_MAX_OUTPUT_BYTES: u64 = 51200;

/// The Tools service's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolsConfig {
    /// Logical project root of the tools.
    pub root: VfsPath,
    /// Where results over the output budget are saved in full.
    pub large_result_prefix: VfsPath,
    /// Most lines of one envelope's text.
    pub max_output_lines: u64,
    /// Most bytes of one envelope's text.
    pub max_output_bytes: u64,
}

/// The tools, by their exposed names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolName {
    /// List a directory (docs/contract.md § LS).
    Ls,
    /// Find files by glob (docs/contract.md § Glob and Grep).
    Glob,
    /// Search file contents.
    Grep,
    /// Read a text file with line numbers.
    Read,
    /// Create or replace a file.
    Write,
    /// Replace a string in a file.
    Edit,
    /// Several edits of one file, all or nothing.
    MultiEdit,
    /// A file's versions, a diff between two, or a restore.
    History,
    /// An OpenAI apply_patch patch, as one changeset (docs/changesets.md).
    ApplyPatch,
    /// Claude's memory tool (`memory_20250818`) over `/memories`.
    Memory,
    /// Claude's text-editor tool (`text_editor_20250728`).
    TextEditor,
    /// Delete a file or a directory tree.
    Delete,
    /// Move a file or a directory tree within one mount.
    Move,
    /// Copy a file within one mount.
    Copy,
    /// Fork a directory into a branch (docs/branches.md).
    BranchCreate,
    /// The caller's branches.
    BranchList,
    /// What a branch changed against its base.
    BranchDiff,
    /// Merge a branch into its base, three-way, as one changeset.
    BranchMerge,
    /// Delete a branch and its changes.
    BranchDiscard,
}

impl ToolName {
    /// Every tool, in the order ListTools shows them.
    pub const ALL: [ToolName; 19] = [
        ToolName::Ls,
        ToolName::Glob,
        ToolName::Grep,
        ToolName::Read,
        ToolName::Write,
        ToolName::Edit,
        ToolName::MultiEdit,
        ToolName::History,
        ToolName::ApplyPatch,
        ToolName::Memory,
        ToolName::TextEditor,
        ToolName::Delete,
        ToolName::Move,
        ToolName::Copy,
        ToolName::BranchCreate,
        ToolName::BranchList,
        ToolName::BranchDiff,
        ToolName::BranchMerge,
        ToolName::BranchDiscard,
    ];

    /// The exposed name (`LS`, `Glob`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ToolName::Ls => "LS",
            ToolName::Glob => "Glob",
            ToolName::Grep => "Grep",
            ToolName::Read => "Read",
            ToolName::Write => "Write",
            ToolName::Edit => "Edit",
            ToolName::MultiEdit => "MultiEdit",
            ToolName::History => "History",
            ToolName::ApplyPatch => "ApplyPatch",
            ToolName::Memory => "memory",
            ToolName::TextEditor => text_editor::NAME,
            ToolName::Delete => "Delete",
            ToolName::Move => "Move",
            ToolName::Copy => "Copy",
            ToolName::BranchCreate => "BranchCreate",
            ToolName::BranchList => "BranchList",
            ToolName::BranchDiff => "BranchDiff",
            ToolName::BranchMerge => "BranchMerge",
            ToolName::BranchDiscard => "BranchDiscard",
        }
    }

    /// The tool with this exposed name (exact match).
    pub fn parse(name: &str) -> Option<ToolName> {
        ToolName::ALL.into_iter().find(|t| t.as_str() == name)
    }

    /// The description a model is given.
    pub fn description(self) -> &'static str {
        match self {
            ToolName::Ls => ls::DESCRIPTION,
            ToolName::Glob => glob::DESCRIPTION,
            ToolName::Grep => grep::DESCRIPTION,
            ToolName::Read => read::DESCRIPTION,
            ToolName::Write => write::DESCRIPTION,
            ToolName::Edit => edit::DESCRIPTION,
            ToolName::MultiEdit => multi_edit::DESCRIPTION,
            ToolName::History => history::DESCRIPTION,
            ToolName::ApplyPatch => apply_patch::DESCRIPTION,
            ToolName::Memory => memory::DESCRIPTION,
            ToolName::TextEditor => text_editor::DESCRIPTION,
            ToolName::Delete => delete::DESCRIPTION,
            ToolName::Move => mv::DESCRIPTION,
            ToolName::Copy => copy::DESCRIPTION,
            ToolName::BranchCreate => branch::create::DESCRIPTION,
            ToolName::BranchList => branch::list::DESCRIPTION,
            ToolName::BranchDiff => branch::diff::DESCRIPTION,
            ToolName::BranchMerge => branch::merge::DESCRIPTION,
            ToolName::BranchDiscard => branch::discard::DESCRIPTION,
        }
    }

    /// The parameter table (`params`): the schema, the accepted names and
    /// the typed RPCs' arguments all come from it.
    pub fn params(self) -> &'static Params {
        match self {
            ToolName::Ls => &ls::PARAMS,
            ToolName::Glob => &glob::PARAMS,
            ToolName::Grep => &grep::PARAMS,
            ToolName::Read => &read::PARAMS,
            ToolName::Write => &write::PARAMS,
            ToolName::Edit => &edit::PARAMS,
            ToolName::MultiEdit => &multi_edit::PARAMS,
            ToolName::History => &history::PARAMS,
            ToolName::ApplyPatch => &apply_patch::PARAMS,
            ToolName::Memory => &memory::PARAMS,
            ToolName::TextEditor => &text_editor::PARAMS,
            ToolName::Delete => &delete::PARAMS,
            ToolName::Move => &mv::PARAMS,
            ToolName::Copy => &copy::PARAMS,
            ToolName::BranchCreate => &branch::create::PARAMS,
            ToolName::BranchList => &branch::list::PARAMS,
            ToolName::BranchDiff => &branch::diff::PARAMS,
            ToolName::BranchMerge => &branch::merge::PARAMS,
            ToolName::BranchDiscard => &branch::discard::PARAMS,
        }
    }

    /// The JSON Schema of the arguments object (docs/contract.md § LS, § Glob and Grep).
    pub fn schema(self) -> Value {
        self.params().schema()
    }
}

/// The tool layer over the application layer. Cloning is cheap.
#[derive(Clone)]
pub struct Tools {
    service: Service,
    config: ToolsConfig,
}

/// One tool invocation: who calls, where the root is, what was resolved.
pub struct Call {
    /// The application layer every step goes through.
    pub service: Service,
    /// Rights and scope of the caller.
    pub caller: Caller,
    /// The project root.
    pub root: VfsPath,
    /// The envelope's context, filled as the call proceeds.
    pub context: Object,
    started: Instant,
}

impl Call {
    /// Resolves a path argument: relative to the project root, or an absolute
    /// logical path inside it. `.` and `..` segments are resolved lexically
    /// and `\` is read as `/`; leaving the root is ACCESS_DENIED with
    /// `outside` as the message (docs/contract.md words it differently per tool).
    /// Records `context.path_resolved`.
    pub fn resolve(&mut self, raw: &str, outside: &str) -> Result<VfsPath, ToolError> {
        let posix = raw.replace('\\', "/");
        let denied = || {
            ToolError::new(
                Error::PermissionDenied(format!("{} is outside the project root", echo(raw))),
                outside,
            )
        };
        let mut segments: Vec<&str> = if posix.starts_with('/') {
            Vec::new()
        } else {
            self.root.segments().collect()
        };
        for segment in posix.split('/') {
            match segment {
                "" | "." => {}
                ".." => {
                    segments.pop().ok_or_else(denied)?;
                }
                s => segments.push(s),
            }
        }
        let path = VfsPath::parse(&format!("/{}", segments.join("/"))).map_err(|e| {
            let reason = match e.kind() {
                Error::InvalidPath { reason, .. } => reason.clone(),
                other => other.to_string(),
            };
            ToolError::new(e, format!("Invalid path '{}': {reason}.", echo(raw)))
        })?;
        if !path.is_within(&self.root) {
            return Err(denied());
        }
        self.context
            .insert("path_resolved".into(), self.display(&path).into());
        Ok(path)
    }

    /// How a path is shown to the model: relative to the project root
    /// (`.` for the root itself), absolute when outside it.
    pub fn display(&self, path: &VfsPath) -> String {
        match path.relative_to(&self.root) {
            Some("") => ".".into(),
            Some(rel) => rel.into(),
            None => path.to_string(),
        }
    }

    /// Checks one grant; a denial is ACCESS_DENIED "Permission denied
    /// accessing '{shown}'."
    pub fn check(&self, path: &VfsPath, op: Op) -> Result<(), ToolError> {
        self.caller.check(path, op).map_err(|e| {
            let message = format!("Permission denied accessing '{}'.", self.display(path));
            ToolError::new(e, message)
        })
    }

    /// Milliseconds since the call started.
    pub fn elapsed_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Runs the search `spec` builds through the application layer (grants
    /// applied as for the Filesystem service) and collects its hits and
    /// summary. The spec's `max_results` bounds the memory this takes.
    pub async fn search(
        &self,
        op: Op,
        spec: impl FnOnce() -> crate::Result<SearchSpec> + Send + 'static,
    ) -> Result<(Vec<Hit>, Summary), Error> {
        let events = self.service.search(&self.caller, op, false, spec).await?;
        crate::service::collect(events).await
    }
}

impl Tools {
    /// The tools over `service` with `config`'s root and output budget.
    pub fn new(service: Service, config: ToolsConfig) -> Tools {
        Tools { service, config }
    }

    /// The project root: where relative paths start and what the tools may reach.
    pub fn root(&self) -> &VfsPath {
        &self.config.root
    }

    /// Runs one tool call given as JSON text. Empty text means no arguments;
    /// anything but a JSON object is an INVALID_PARAM envelope.
    pub async fn invoke(
        &self,
        caller: Caller,
        name: &str,
        arguments_json: &str,
        tool_call_id: &str,
    ) -> Envelope {
        let args = if arguments_json.trim().is_empty() {
            Ok(Object::new())
        } else {
            match serde_json::from_str::<Value>(arguments_json) {
                Ok(Value::Object(map)) => Ok(map),
                Ok(_) => Err(ToolError::invalid(
                    "Malformed arguments: arguments_json must be a JSON object, e.g. {\"path\": \".\"}.",
                )),
                Err(e) => Err(ToolError::invalid(format!(
                    "Malformed arguments: arguments_json is not valid JSON ({e})."
                ))),
            }
        };
        self.invoke_args(caller, name, args, tool_call_id).await
    }

    /// Runs one tool call given as an arguments object (or the error that
    /// parsing it produced), and records it in the audit log: the one
    /// place every tool call of every front end (gRPC Tools, MCP) passes
    /// (docs/audit.md § Coverage). The caller's trail, when its front end
    /// opened one (MCP, with its surface and session), is used; otherwise
    /// a gRPC one is opened here.
    pub async fn invoke_args(
        &self,
        mut caller: Caller,
        name: &str,
        args: Result<Object, ToolError>,
        tool_call_id: &str,
    ) -> Envelope {
        let audit = self.service.audit().clone();
        if !caller.trail.is_on() {
            caller = caller.with_trail(audit.trail(crate::audit::Surface::Grpc));
        }
        let trail = caller.trail.clone();
        let operation = ToolName::parse(name).map_or("tool/unknown".into(), |tool| {
            format!("tool/{}", tool.as_str())
        });
        trail.operation(&operation, tool_call_id);
        let started = Instant::now();
        let envelope = match audit.admit() {
            Ok(()) => self.run_call(caller, name, args, tool_call_id).await,
            Err(refused) => Envelope::from_error(refused.into(), Object::new(), Object::new()),
        };
        let error = envelope.error();
        let outcome = crate::audit::Outcome::of_envelope_code(error.map(|e| e.code));
        let message = error.map_or("", |e| e.message.as_str());
        match audit.finish(&trail, outcome, message, started).await {
            Ok(()) => envelope,
            Err(unrecorded) => {
                Envelope::from_error(unrecorded.into(), Object::new(), Object::new())
            }
        }
    }

    /// Runs one tool call: [`Tools::invoke_args`] without its audit.
    async fn run_call(
        &self,
        mut caller: Caller,
        name: &str,
        args: Result<Object, ToolError>,
        tool_call_id: &str,
    ) -> Envelope {
        let args = args.and_then(|args| {
            label_argument(&args, &mut caller)?;
            Ok(args)
        });
        let mut context = Object::new();
        context.insert("cwd".into(), ".".into());
        context.insert(
            "params_input".into(),
            Value::Object(args.as_ref().cloned().unwrap_or_default()),
        );
        let mut call = Call {
            service: self.service.clone(),
            caller,
            root: self.config.root.clone(),
            context,
            started: Instant::now(),
        };
        let tool = ToolName::parse(name);
        let result = match (tool, args) {
            (_, Err(e)) => Err(e),
            (None, _) => Err(ToolError::invalid(format!(
                "Unknown tool '{}'. Available tools: {}.",
                echo(name),
                ToolName::ALL.map(ToolName::as_str).join(", ")
            ))),
            (Some(tool), Ok(args)) => run(tool, &mut call, &args).await,
        };
        let mut stats = Object::new();
        stats.insert("time_ms".into(), call.elapsed_ms().into());
        let envelope = match result {
            Ok(outcome) => {
                stats.extend(outcome.stats);
                let outcome = Outcome { stats, ..outcome };
                let outcome = budget::apply(&call, &self.config, outcome, tool_call_id).await;
                Envelope::from_outcome(outcome, call.context)
            }
            Err(e) => Envelope::from_error(e, stats, call.context),
        };
        tracing::info!(
            tool = name,
            status = envelope.status.as_str(),
            code = envelope.error().map_or("", |e| e.code),
            "tool call"
        );
        envelope
    }
}

/// Applies a `label` argument ([`params::Param::label`]) to the caller's
/// scope, where the changes it makes pick it up; a malformed one is
/// INVALID_PARAM. Tools that take no label refuse the argument themselves.
fn label_argument(args: &Object, caller: &mut Caller) -> Result<(), ToolError> {
    match args.get(params::LABEL) {
        None | Some(Value::Null) => Ok(()),
        Some(Value::String(label)) => {
            crate::scope::Scope::check_label(label).map_err(|_| {
                ToolError::invalid(format!(
                    "Invalid parameter 'label': {} is not 1-{} letters, digits or -_.@+:~/#=.",
                    serde_json::Value::String(echo(label).into_owned()),
                    crate::scope::MAX_LABEL
                ))
            })?;
            caller.scope.label = label.clone();
            Ok(())
        }
        Some(_) => Err(ToolError::invalid(
            "Invalid parameter 'label': expected a string.",
        )),
    }
}

async fn run(tool: ToolName, call: &mut Call, args: &Object) -> Result<Outcome, ToolError> {
    match tool {
        ToolName::Ls => ls::run(call, args).await,
        ToolName::Glob => glob::run(call, args).await,
        ToolName::Grep => grep::run(call, args).await,
        ToolName::Read => read::run(call, args).await,
        ToolName::Write => write::run(call, args).await,
        ToolName::Edit => edit::run(call, args).await,
        ToolName::MultiEdit => multi_edit::run(call, args).await,
        ToolName::History => history::run(call, args).await,
        ToolName::ApplyPatch => apply_patch::run(call, args).await,
        ToolName::Memory => memory::run(call, args).await,
        ToolName::TextEditor => text_editor::run(call, args).await,
        ToolName::Delete => delete::run(call, args).await,
        ToolName::Move => mv::run(call, args).await,
        ToolName::Copy => copy::run(call, args).await,
        ToolName::BranchCreate => branch::create::run(call, args).await,
        ToolName::BranchList => branch::list::run(call, args).await,
        ToolName::BranchDiff => branch::diff::run(call, args).await,
        ToolName::BranchMerge => branch::merge::run(call, args).await,
        ToolName::BranchDiscard => branch::discard::run(call, args).await,
    }
}
