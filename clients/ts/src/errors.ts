/**
 * Errors: every failed call throws an {@link AgentVfsError} carrying the
 * envelope code, read from the google.rpc.ErrorInfo detail the server attaches
 * (its `reason`), and the gRPC code.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { BinaryReader } from "@bufbuild/protobuf/wire";

/** google.rpc.ErrorInfo.domain of the server's errors. */
export const ERROR_DOMAIN = "agentvfs";

/** The envelope codes (ErrorInfo.reason), the same as the Tools envelope's. */
export const ErrorCode = {
  InvalidParam: "INVALID_PARAM",
  NotFound: "NOT_FOUND",
  AccessDenied: "ACCESS_DENIED",
  Conflict: "CONFLICT",
  IsDirectory: "IS_DIRECTORY",
  BinaryFile: "BINARY_FILE",
  Timeout: "TIMEOUT",
  InternalError: "INTERNAL_ERROR",
} as const;

/** A failed call. */
export class AgentVfsError extends Error {
  override name = "AgentVfsError";

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
  }

  /** The canonical gRPC name of {@link grpcCode}: `NOT_FOUND`, `CANCELLED`. */
  get grpcName(): string {
    return grpcCodeName(this.grpcCode);
  }

  /** Converts anything a call threw (ConnectError, AbortError, ...). */
  static from(err: unknown): AgentVfsError {
    if (err instanceof AgentVfsError) return err;
    const ce = ConnectError.from(err);
    for (const d of ce.details) {
      if ("type" in d && d.type === "google.rpc.ErrorInfo") {
        const info = decodeErrorInfo(d.value);
        if (info.domain === ERROR_DOMAIN) {
          return new AgentVfsError(info.reason, ce.code, ce.rawMessage, info.metadata, { cause: err });
        }
      }
    }
    return new AgentVfsError("", ce.code, ce.rawMessage, {}, { cause: err });
  }
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
