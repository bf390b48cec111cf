/**
 * TypeScript client of agentvfs, the gRPC file system for AI agents (Node ≥ 20).
 *
 * ```ts
 * import { AgentVfs } from "@agentvfs/client";
 * const vfs = new AgentVfs("localhost:50051", { session: "demo" });
 * await vfs.filesystem.write({ path: "/notes/a.md", content: "hello\n" });
 * for await (const m of vfs.grep({ pattern: "hello", path: "/notes" })) console.log(m.path, m.lineNumber);
 * await vfs.commit([{ op: "write", path: "/notes/b.md", content: "b\n" }, { op: "delete", path: "/notes/a.md" }]);
 * for await (const e of vfs.watch("/notes", { stopAtHead: true })) console.log(e.kind, e.path, e.cursor);
 * ```
 */
export { AgentVfs, Download, Search, Watch, CHUNK_BYTES, NAMESPACE_HEADER, SESSION_HEADER, WATCH_RETRIES } from "./client.js";
export type {
  ChangesetOp,
  ConnectOptions,
  DeleteOp,
  DownloadOptions,
  EditOp,
  MoveOp,
  MultiEditOp,
  StreamOptions,
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
