/**
 * TypeScript client of agentvfs, the gRPC file system for AI agents (Node ≥ 20).
 *
 * ```ts
 * import { AgentVfs } from "@agentvfs/client";
 * const vfs = new AgentVfs("localhost:50051", { session: "demo" });
 * await vfs.filesystem.write({ path: "/notes/a.md", content: "hello\n" });
 * for await (const m of vfs.grep({ pattern: "hello", path: "/notes" })) console.log(m.path, m.lineNumber);
 * const res = await vfs.withLabel("turn-1").commit([{ op: "write", path: "/notes/b.md", content: "b\n" }, { op: "delete", path: "/notes/a.md" }]);
 * await vfs.rewind("/notes", { changeset: res.changeset }); // or { label: "turn-1" }
 * await vfs.createBranch("try-1", "/notes");
 * await vfs.withBranch("try-1").filesystem.write({ path: "/notes/c.md", content: "c\n" });
 * for await (const d of vfs.diffBranch("try-1")) console.log(d.kind, d.path);
 * await vfs.mergeBranch("try-1", { discard: true }); // conflicts: their three versions, nothing applied
 * for await (const e of vfs.watch("/notes", { stopAtHead: true })) console.log(e.kind, e.path, e.cursor);
 * ```
 */
export { AgentVfs, Download, Search, Watch, BRANCH_HEADER, CHUNK_BYTES, LABEL_HEADER, NAMESPACE_HEADER, SESSION_HEADER, WATCH_RETRIES } from "./client.js";
export { DELETE } from "./branch.js";
export type { DiffBranchOptions, MergeOptions, Resolution } from "./branch.js";
export type { StreamOptions } from "./options.js";
export type {
  ChangesetOp,
  ConnectOptions,
  DeleteOp,
  DownloadOptions,
  EditOp,
  MoveOp,
  MultiEditOp,
  RewindOptions,
  RewindSelector,
  WatchOptions,
  WriteOp,
} from "./client.js";
export {
  AccessDeniedError,
  AgentVfsError,
  AlreadyExistsError,
  ConflictError,
  ErrorCode,
  ERROR_DOMAIN,
  grpcCodeName,
  IsDirectoryError,
  NotDirectoryError,
  NotFoundError,
} from "./errors.js";
export * from "./gen/agentvfs/v1/filesystem_pb.js";
export * from "./gen/agentvfs/v1/tools_pb.js";
export * from "./gen/agentvfs/v1/access_pb.js";
export * from "./gen/agentvfs/v1/errors_pb.js";
