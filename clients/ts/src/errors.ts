/**
 * Errors: every failed call throws an {@link AgentVfsError} carrying the
 * envelope code, read from the google.rpc.ErrorInfo detail the server attaches
 * (its `reason`), and the gRPC code; where a reason has a kind of its own, a
 * subclass of it: {@link NotFoundError}, {@link AlreadyExistsError},
 * {@link ConflictError} (with the versions), {@link AccessDeniedError},
 * {@link IsDirectoryError}, {@link NotDirectoryError}. The codes are the
 * contract's `ErrorReason` names (proto/agentvfs/v1/errors.proto, which
 * documents each one's gRPC codes and metadata).
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { BinaryReader } from "@bufbuild/protobuf/wire";
import { ErrorReason } from "./gen/agentvfs/v1/errors_pb.js";

/** google.rpc.ErrorInfo.domain of the server's errors. */
export const ERROR_DOMAIN = "agentvfs";

/** The envelope codes (ErrorInfo.reason), the same as the Tools envelope's:
 * the `ErrorReason` names, which protoc-gen-es spells without their prefix. */
export const ErrorCode = {
  InvalidParam: ErrorReason[ErrorReason.INVALID_PARAM],
  NotFound: ErrorReason[ErrorReason.NOT_FOUND],
  AccessDenied: ErrorReason[ErrorReason.ACCESS_DENIED],
  Conflict: ErrorReason[ErrorReason.CONFLICT],
  IsDirectory: ErrorReason[ErrorReason.IS_DIRECTORY],
  BinaryFile: ErrorReason[ErrorReason.BINARY_FILE],
  Timeout: ErrorReason[ErrorReason.TIMEOUT],
  InternalError: ErrorReason[ErrorReason.INTERNAL_ERROR],
} as const;

/** A failed call. */
export class AgentVfsError extends Error {
  override name = "AgentVfsError";
  /** {@link code} as the contract's enum; `UNSPECIFIED` when the code is ""
   * (or new to this client). */
  readonly reason: ErrorReason;
  /** The index (from 0) of the changeset operation that failed, when the
   * error is a `commit`'s naming one (ErrorInfo metadata `operation_index`). */
  readonly operationIndex: number | undefined;

  constructor(
    /** The envelope code (`NOT_FOUND`, `CONFLICT`, ...), or "" when the error
     * did not come from the agentvfs server (cancelled, unreachable, ...). */
    readonly code: string,
    /** The gRPC status code. */
    readonly grpcCode: Code,
    /** The server's explanation. */
    readonly rawMessage: string,
    /** ErrorInfo.metadata (`path`, `expected_version`, ...). */
    readonly metadata: Record<string, string>,
    options?: { cause?: unknown },
  ) {
    super(`${code || Code[grpcCode]}: ${rawMessage}`, options);
    const reason: unknown = Object.hasOwn(ErrorReason, code) ? ErrorReason[code as keyof typeof ErrorReason] : undefined;
    this.reason = typeof reason === "number" ? reason : ErrorReason.UNSPECIFIED;
    const index = metadata.operation_index;
    this.operationIndex = index !== undefined && /^\d+$/.test(index) ? Number(index) : undefined;
  }

  /** The canonical gRPC name of {@link grpcCode}: `NOT_FOUND`, `CANCELLED`. */
  get grpcName(): string {
    return grpcCodeName(this.grpcCode);
  }

  /** Converts anything a call threw (ConnectError, AbortError, ...), as the
   * subclass its reason, gRPC code and metadata call for. */
  static from(err: unknown): AgentVfsError {
    if (err instanceof AgentVfsError) return err;
    const ce = ConnectError.from(err);
    for (const d of ce.details) {
      if ("type" in d && d.type === "google.rpc.ErrorInfo") {
        const info = decodeErrorInfo(d.value);
        if (info.domain === ERROR_DOMAIN) {
          const kind = errorClass(info.reason, ce.code, info.metadata);
          return new kind(info.reason, ce.code, ce.rawMessage, info.metadata, { cause: err });
        }
      }
    }
    return new AgentVfsError("", ce.code, ce.rawMessage, {}, { cause: err });
  }
}

/** NOT_FOUND: the path does not exist, or the file keeps no such version. */
export class NotFoundError extends AgentVfsError {
  override name = "NotFoundError";
}

/** CONFLICT of a create-only write (gRPC ALREADY_EXISTS): the file is there. */
export class AlreadyExistsError extends AgentVfsError {
  override name = "AlreadyExistsError";
}

/** CONFLICT of a conditional write (gRPC ABORTED): the file's version was
 * not the `ifVersion` the call expected; read it again and retry. */
export class ConflictError extends AgentVfsError {
  override name = "ConflictError";
  /** The file's path. */
  readonly path: string = this.metadata.path ?? "";
  /** The version the call expected. */
  readonly expectedVersion: bigint = BigInt(this.metadata.expected_version ?? 0);
  /** The file's version (0 when it does not exist). */
  readonly actualVersion: bigint = BigInt(this.metadata.actual_version ?? 0);
}

/** ACCESS_DENIED: no grant for the operation on the path, or no (known) token. */
export class AccessDeniedError extends AgentVfsError {
  override name = "AccessDeniedError";
}

/** IS_DIRECTORY: a file operation named a directory. */
export class IsDirectoryError extends AgentVfsError {
  override name = "IsDirectoryError";
}

/** INVALID_PARAM with gRPC FAILED_PRECONDITION and a `path`: a directory
 * operation named a file, or a path below a file. */
export class NotDirectoryError extends AgentVfsError {
  override name = "NotDirectoryError";
}

/** The class of the error with this code, gRPC code and metadata (the
 * subclasses above say which each one is). */
function errorClass(code: string, grpcCode: Code, metadata: Record<string, string>): typeof AgentVfsError {
  switch (code) {
    case ErrorCode.NotFound:
      return NotFoundError;
    case ErrorCode.Conflict:
      return grpcCode === Code.AlreadyExists ? AlreadyExistsError : ConflictError;
    case ErrorCode.AccessDenied:
      return AccessDeniedError;
    case ErrorCode.IsDirectory:
      return IsDirectoryError;
    case ErrorCode.InvalidParam:
      if (grpcCode === Code.FailedPrecondition && Object.hasOwn(metadata, "path")) return NotDirectoryError;
  }
  return AgentVfsError;
}

/** `Code.NotFound` → "NOT_FOUND" (and `Canceled` → "CANCELLED", gRPC's spelling). */
export function grpcCodeName(code: Code): string {
  if (code === Code.Canceled) return "CANCELLED";
  return Code[code].replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
}

/** Decodes google.rpc.ErrorInfo {reason = 1, domain = 2, metadata = 3 (map)}. */
function decodeErrorInfo(bytes: Uint8Array): { reason: string; domain: string; metadata: Record<string, string> } {
  const out = { reason: "", domain: "", metadata: {} as Record<string, string> };
  const r = new BinaryReader(bytes);
  while (r.pos < r.len) {
    const [field, wire] = r.tag();
    if (field === 1) out.reason = r.string();
    else if (field === 2) out.domain = r.string();
    else if (field === 3) {
      const entry = new BinaryReader(r.bytes());
      let key = "";
      let value = "";
      while (entry.pos < entry.len) {
        const [f, w] = entry.tag();
        if (f === 1) key = entry.string();
        else if (f === 2) value = entry.string();
        else entry.skip(w);
      }
      out.metadata[key] = value;
    } else r.skip(wire);
  }
  return out;
}
