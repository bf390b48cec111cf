/**
 * The agentvfs client: Connect's promise clients of every service over the
 * gRPC protocol (HTTP/2), with an interceptor that adds the token and session
 * metadata and turns every failure into an {@link AgentVfsError}; plus
 * streaming helpers: `grep`/`glob` as async iterables that an AbortSignal (or
 * leaving the loop) cancels, `watch` as an async iterable of changes that
 * reconnects by itself, and chunked `upload`/`download`.
 */
import type * as http2 from "node:http2";
import * as net from "node:net";
import * as tls from "node:tls";
import { setTimeout as sleep } from "node:timers/promises";
import { Code, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import type { MessageInitShape } from "@bufbuild/protobuf";
import {
  Filesystem,
  type ChangeEvent,
  type ChangesetOperationSchema,
  type Branch,
  type BranchFileDiff,
  type CommitResponse,
  type MergeBranchResponse,
  type RewindResponse,
  type FileInfo,
  type GlobBatch,
  type GrepBatch,
  type GlobRequestSchema,
  type GrepMatch,
  type GrepRequestSchema,
  type SearchSummary,
  type WatchRequestSchema,
  type WatchResponse,
  type WriteBytesHeader,
  type WriteBytesRequestSchema,
  type WriteBytesResponse,
} from "./gen/agentvfs/v1/filesystem_pb.js";
import { Tools } from "./gen/agentvfs/v1/tools_pb.js";
import { Access } from "./gen/agentvfs/v1/access_pb.js";
import { AgentVfsError } from "./errors.js";
import { mergeResolutions, type DiffBranchOptions, type MergeOptions } from "./branch.js";
import type { StreamOptions } from "./options.js";

/** Metadata key of the State session. */
export const SESSION_HEADER = "x-agentvfs-session";
/** Metadata key narrowing the Store namespace. */
export const NAMESPACE_HEADER = "x-agentvfs-namespace";
/** Metadata key of the label kept with every change a call makes. */
export const LABEL_HEADER = "x-agentvfs-label";
/** Metadata key of the branch a call works in. */
export const BRANCH_HEADER = "x-agentvfs-branch";
/** Bytes per upload message: few messages per file, far below gRPC's 4 MiB default limit. */
export const CHUNK_BYTES = 1 << 20;
/** Largest message accepted: a Read of a large text file is one message. */
const MAX_MESSAGE_BYTES = 256 << 20;

/** Who is calling. */
export interface ConnectOptions {
  /** Bearer token of the principal (none with the default configuration). */
  token?: string;
  /** The State session (`x-agentvfs-session`). */
  session?: string;
  /** Narrows the Store namespace of a principal configured without one. */
  namespace?: string;
  /**
   * Kept with every change the client's calls make (`x-agentvfs-label`; 1-128
   * of letters, digits and `-_.@+:~/#=`), for Watch, history and
   * {@link AgentVfs.rewind} to name. {@link AgentVfs.withLabel} changes it for
   * some calls; a call's own `headers` with the key win too.
   */
  label?: string;
  /**
   * The branch every call works in (`x-agentvfs-branch`;
   * {@link AgentVfs.createBranch}, docs/branches.md); the base when omitted.
   * {@link AgentVfs.withBranch} changes it for some calls; a call's own
   * `headers` with the key win too.
   */
  branch?: string;
}

/** Options of {@link AgentVfs.download}. */
export interface DownloadOptions extends StreamOptions {
  /** Download this retained version (see `listVersions`) instead of the current content. */
  version?: bigint;
}

/** Where a {@link Watch} starts, whether it ends, and how often it reconnects. */
export interface WatchOptions extends StreamOptions {
  /** Resume exactly after this cursor (an event's, or an earlier {@link Watch.cursor}). */
  cursor?: string;
  /** Start at the head: only changes committed after the call. With neither
   * `cursor` nor `fromNow`, start at the oldest change the server keeps. */
  fromNow?: boolean;
  /** End once caught up instead of following new changes. */
  stopAtHead?: boolean;
  /** Reconnects in a row that may fail with UNAVAILABLE before the watch
   * throws (default {@link WATCH_RETRIES}; 0 never reconnects). The count
   * starts over whenever the server answers. */
  retries?: number;
}

/** A write of a changeset: creates `path` (and missing parents) or replaces it. */
export interface WriteOp {
  /** The kind of operation. */
  op: "write";
  /** The file. */
  path: string;
  /** Its new text. */
  content: string;
  /** Refuse an existing file (an {@link AlreadyExistsError}). */
  createOnly?: boolean;
  /** The file's version as the operations before it left it (0n: it must not exist). */
  ifVersion?: bigint;
}

/** An edit of a changeset: `oldString`, which must occur exactly once (every
 * occurrence with `replaceAll`), becomes `newString`. */
export interface EditOp {
  /** The kind of operation. */
  op: "edit";
  /** The file. */
  path: string;
  /** The text to replace (not empty). */
  oldString: string;
  /** Its replacement. */
  newString: string;
  /** Replace every occurrence. */
  replaceAll?: boolean;
  /** The file's version as the operations before it left it. */
  ifVersion?: bigint;
}

/** Several edits of one file in a changeset, each matched against its text before any of them. */
export interface MultiEditOp {
  /** The kind of operation. */
  op: "multiEdit";
  /** The file. */
  path: string;
  /** The edits, as {@link EditOp}'s fields. */
  edits: { oldString: string; newString: string; replaceAll?: boolean }[];
  /** The file's version as the operations before it left it. */
  ifVersion?: bigint;
}

/** A delete of a changeset (of a file: a changeset deletes no directories). */
export interface DeleteOp {
  /** The kind of operation. */
  op: "delete";
  /** The file. */
  path: string;
  /** The file's version as the operations before it left it. */
  ifVersion?: bigint;
}

/** A move of a file within the changeset's mount. */
export interface MoveOp {
  /** The kind of operation. */
  op: "move";
  /** The file to move. */
  source: string;
  /** Its new path. */
  destination: string;
  /** The source's version as the operations before it left it. */
  ifVersion?: bigint;
  /** Refuse an existing destination (an {@link AlreadyExistsError}). */
  createOnly?: boolean;
}

/** One operation of {@link AgentVfs.commit}: the request of the single-file
 * RPC of the same name, with its meaning (docs/changesets.md). */
export type ChangesetOp = WriteOp | EditOp | MultiEditOp | DeleteOp | MoveOp;

/** The ChangesetOperation message of an operation. */
function operationOf(o: ChangesetOp): MessageInitShape<typeof ChangesetOperationSchema> {
  switch (o.op) {
    case "write":
      return { operation: { case: "write", value: { path: o.path, content: o.content, createOnly: o.createOnly ?? false, ifVersion: o.ifVersion } } };
    case "edit":
      return {
        operation: {
          case: "edit",
          value: { path: o.path, oldString: o.oldString, newString: o.newString, replaceAll: o.replaceAll ?? false, ifVersion: o.ifVersion },
        },
      };
    case "multiEdit":
      return {
        operation: {
          case: "multiEdit",
          value: { path: o.path, edits: o.edits.map((e) => ({ ...e, replaceAll: e.replaceAll ?? false })), ifVersion: o.ifVersion },
        },
      };
    case "delete":
      return { operation: { case: "delete", value: { path: o.path, ifVersion: o.ifVersion } } };
    case "move":
      return {
        operation: {
          case: "move",
          value: { source: o.source, destination: o.destination, ifVersion: o.ifVersion, createOnly: o.createOnly ?? false },
        },
      };
  }
}

type OneOf<K extends string> = { [P in K]: { [Q in P]: string } & { [Q in Exclude<K, P>]?: undefined } }[K];

/**
 * Which changes {@link AgentVfs.rewind} undoes: exactly one of those made in
 * a State `session`, through a `handle`, under a `label`, by a `changeset`
 * (`CommitResponse.changeset`), or every change after `sinceCursor` (an
 * event's cursor, {@link Watch.cursor}).
 */
export type RewindSelector = OneOf<"session" | "handle" | "label" | "changeset" | "sinceCursor">;

/** Options of {@link AgentVfs.rewind}. */
export interface RewindOptions extends StreamOptions {
  /** Change nothing: answer the files and the unified diff of what the rewind would do. */
  dryRun?: boolean;
  /** Undo a file even when a change not selected came after the selected ones (it is undone too). */
  force?: boolean;
}

const REWIND_SELECTORS = ["session", "handle", "label", "changeset", "sinceCursor"] as const;

/** The RewindRequest's selector, checking there is exactly one. */
function rewindSelector(selector: RewindSelector): { case: (typeof REWIND_SELECTORS)[number]; value: string } {
  const given = REWIND_SELECTORS.filter((k) => selector[k] !== undefined);
  const [only] = given;
  if (given.length !== 1 || only === undefined) {
    throw new TypeError(`rewind takes exactly one of ${REWIND_SELECTORS.join(", ")}; got ${given.join(", ") || "none"}`);
  }
  return { case: only, value: selector[only] as string };
}

/** Default of {@link WatchOptions.retries}. */
export const WATCH_RETRIES = 10;
/** Delay before a Watch's first reconnect, doubling up to {@link WATCH_MAX_DELAY_MS}. */
const WATCH_FIRST_DELAY_MS = 100;
const WATCH_MAX_DELAY_MS = 5000;

/** A connection to an agentvfs server. */
export class AgentVfs {
  /** Every Filesystem RPC (listInfo, stat, read, write, edit, delete, move, ...). */
  readonly filesystem: Client<typeof Filesystem>;
  /** Every Tools RPC (the LLM tools in the standard envelope). */
  readonly tools: Client<typeof Tools>;
  /** Every Access RPC (handles and grants). */
  readonly access: Client<typeof Access>;
  private readonly session: Http2SessionManager;
  private readonly baseUrl: string;
  private readonly options: ConnectOptions;

  /**
   * @param address `host:port` ("localhost:50051") or a URL
   *   ("http://localhost:50051"); plaintext unless the URL is https.
   * @param shared internal: the connection of the client {@link withLabel} or
   *   {@link withBranch} was called on.
   */
  constructor(address: string, options: ConnectOptions = {}, shared?: Http2SessionManager) {
    const baseUrl = /^https?:\/\//.test(address) ? address : `http://${address}`;
    this.baseUrl = baseUrl;
    this.options = options;
    this.session =
      shared ??
      new TunedSessionManager(baseUrl, undefined, {
        settings: { initialWindowSize: STREAM_WINDOW_BYTES },
        createConnection: connectNoDelay,
      });
    const transport = createGrpcTransport({
      baseUrl,
      sessionManager: this.session,
      interceptors: [callerMetadata(options)],
      readMaxBytes: MAX_MESSAGE_BYTES,
    });
    this.filesystem = withErrors(createClient(Filesystem, transport));
    this.tools = withErrors(createClient(Tools, transport));
    this.access = withErrors(createClient(Access, transport));
  }

  /**
   * This client with the label `label` for the changes its calls make,
   * sharing the connection (closing either closes both):
   *
   * ```ts
   * await vfs.withLabel("turn-7").commit([...]);
   * await vfs.rewind("/src", { label: "turn-7" });
   * ```
   */
  withLabel(label: string): AgentVfs {
    return new AgentVfs(this.baseUrl, { ...this.options, label }, this.session);
  }

  /**
   * This client working in the branch `branch`, sharing the connection
   * (closing either closes both):
   *
   * ```ts
   * await vfs.createBranch("try-1", "/src");
   * await vfs.withBranch("try-1").filesystem.write({ path: "/src/a.py", content: "..." });
   * await vfs.mergeBranch("try-1");
   * ```
   */
  withBranch(branch: string): AgentVfs {
    return new AgentVfs(this.baseUrl, { ...this.options, branch }, this.session);
  }

  /** Forks the directory `path` (State, Store or object mount) into the
   * branch `name`, copy-on-write (docs/branches.md § Fork). */
  async createBranch(name: string, path: string, options: StreamOptions = {}): Promise<Branch> {
    const { branch } = await this.filesystem.createBranch({ name, path }, options);
    if (branch === undefined) throw new TypeError("CreateBranch answered no branch");
    return branch;
  }

  /** The caller's branches: name, root, creation time, creator, files changed and bytes held. */
  async listBranches(options: StreamOptions = {}): Promise<Branch[]> {
    return (await this.filesystem.listBranches({}, options)).branches;
  }

  /**
   * The files the branch changed against its base now, in path order
   * (`added`, `changed`, `deleted` or `moved`, each with its unified diff),
   * asking for the next page as the loop goes on; leaving the loop asks for
   * no more.
   *
   * ```ts
   * for await (const d of vfs.diffBranch("try-1")) console.log(d.kind, d.path);
   * ```
   */
  async *diffBranch(name: string, options: DiffBranchOptions = {}): AsyncGenerator<BranchFileDiff> {
    const { pageSize = 0, ...call } = options;
    let after = "";
    do {
      const page = await this.filesystem.diffBranch({ name, after, limit: pageSize }, call);
      yield* page.files;
      after = page.nextAfter;
    } while (after !== "");
  }

  /**
   * Merges the branch into its base as one changeset, three-way
   * (docs/branches.md § Merge). Files that do not merge are answered in
   * `conflicts`, each with its three versions (`ancestor`, `branch`, `base`;
   * undefined when there was no file), and nothing is applied: merge again
   * with a resolution for each.
   *
   * ```ts
   * const res = await vfs.mergeBranch("try-1");
   * const resolutions = Object.fromEntries(res.conflicts.map((c) => [c.path, settle(c)]));
   * await vfs.mergeBranch("try-1", { resolutions, discard: true }); // or DELETE
   * ```
   */
  mergeBranch(name: string, options: MergeOptions = {}): Promise<MergeBranchResponse> {
    const { resolutions = {}, discard = false, ...call } = options;
    return this.filesystem.mergeBranch({ name, resolutions: mergeResolutions(resolutions), discard }, call);
  }

  /** Deletes the branch and everything it holds; the base is untouched. */
  async discardBranch(name: string, options: StreamOptions = {}): Promise<void> {
    await this.filesystem.discardBranch({ name }, options);
  }

  /** Searches file contents; the matches arrive in path order. */
  grep(request: MessageInitShape<typeof GrepRequestSchema>, options: StreamOptions = {}): Search<GrepMatch> {
    const stream = () => batches<GrepBatch, GrepMatch>(this.filesystem.grep(request, options), (batch) => batch.matches);
    return new Search(stream, options.signal);
  }

  /** Finds paths by glob; the entries arrive in path order. */
  glob(request: MessageInitShape<typeof GlobRequestSchema>, options: StreamOptions = {}): Search<FileInfo> {
    const stream = () => batches<GlobBatch, FileInfo>(this.filesystem.glob(request, options), (batch) => batch.entries);
    return new Search(stream, options.signal);
  }

  /**
   * Applies `ops`, all on one mount, as one changeset: in order, each seeing
   * what the ones before it did, all or nothing. The answer's `files` are
   * every file touched, in path order. When an operation fails nothing is
   * applied and the error's {@link AgentVfsError.operationIndex} names it.
   *
   * ```ts
   * await vfs.commit([
   *   { op: "write", path: "/src/new.py", content: "print('hi')\n", createOnly: true },
   *   { op: "edit", path: "/src/app.py", oldString: "old()", newString: "new()", ifVersion: seen },
   *   { op: "move", source: "/src/a.py", destination: "/src/b.py" },
   *   { op: "delete", path: "/src/old.py" },
   * ]);
   * ```
   */
  commit(ops: readonly ChangesetOp[], options: StreamOptions = {}): Promise<CommitResponse> {
    return this.filesystem.commit({ operations: ops.map(operationOf) }, options);
  }

  /**
   * Undoes, as one changeset, the changes under `path` ("" is "/") that
   * `selector` picks (exactly one key, else a TypeError before any call):
   * each file goes back to its content before the first of them
   * (docs/changesets.md § Rewind). The answer's `files` (`fromVersion`,
   * `toVersion`, `version`, `deleted`, in path order), `diff` (a `dryRun`'s
   * unified diff; nothing changes) and `changeset` (the rewind's id). A file
   * that a change not selected changed afterwards rejects with a
   * {@link ConflictError} and nothing applies, unless `force`.
   *
   * ```ts
   * console.log((await vfs.rewind("/src", { label: "turn-7" }, { dryRun: true })).diff);
   * await vfs.rewind("/src", { label: "turn-7" });
   * ```
   */
  async rewind(path: string, selector: RewindSelector, options: RewindOptions = {}): Promise<RewindResponse> {
    const { dryRun = false, force = false, ...call } = options;
    return this.filesystem.rewind({ path, selector: rewindSelector(selector), dryRun, force }, call);
  }

  /** Writes bytes, or chunks from an (async) iterable, to a file in {@link CHUNK_BYTES} messages. */
  async upload(
    header: Partial<Pick<WriteBytesHeader, "path" | "createOnly" | "ifVersion">> & { path: string },
    data: Uint8Array | Iterable<Uint8Array> | AsyncIterable<Uint8Array>,
    options: StreamOptions = {},
  ): Promise<WriteBytesResponse> {
    async function* messages(): AsyncGenerator<MessageInitShape<typeof WriteBytesRequestSchema>> {
      yield { kind: { case: "header", value: header } };
      const pieces = data instanceof Uint8Array ? [data] : data;
      for await (const piece of pieces) {
        for (let at = 0; at < piece.length; at += CHUNK_BYTES) {
          yield { kind: { case: "data", value: piece.subarray(at, at + CHUNK_BYTES) } };
        }
      }
    }
    return this.filesystem.writeBytes(messages(), options);
  }

  /** Downloads a file (or a retained version) as it streams: iterate the chunks; `info` is set with the first. */
  download(path: string, options: DownloadOptions = {}): Download {
    const { version, ...call } = options;
    return new Download(() => this.filesystem.readBytes({ path, version }, call));
  }

  /**
   * Streams the changes under `path` in commit order, reconnecting by itself
   * (see {@link Watch}):
   *
   * ```ts
   * const watch = vfs.watch("/memories", { cursor: saved });
   * for await (const e of watch) { handle(e); saved = watch.cursor; }
   * ```
   */
  watch(path: string, options: WatchOptions = {}): Watch {
    const open = (request: MessageInitShape<typeof WatchRequestSchema>, signal: AbortSignal, onHeader: () => void) =>
      this.filesystem.watch(request, { signal, onHeader });
    return new Watch(open, path, options);
  }

  /** Closes the connection (and every open stream). */
  close(): void {
    this.session.abort();
  }
}

/** A running Grep or Glob: `for await` its results; then `summary` is set. */
export class Search<T> implements AsyncIterable<T> {
  /** The final counts; set when the stream ended normally. */
  summary: SearchSummary | undefined;

  /**
   * @param start opens the stream: each batch's results, then the summary.
   * @param signal the caller's; checked between results too, so an abort
   *   stops the loop at once rather than after the batch in hand.
   */
  constructor(
    private readonly start: () => AsyncIterable<T[] | SearchSummary>,
    private readonly signal?: AbortSignal,
  ) {}

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    // Leaving the loop early (break, throw) returns Connect's stream, which
    // cancels the call.
    for await (const part of this.start()) {
      if (!Array.isArray(part)) {
        this.summary = part;
        continue;
      }
      for (const item of part) {
        if (this.signal?.aborted) throw AgentVfsError.from(this.signal.reason);
        yield item;
      }
    }
  }
}

/** A Grep/Glob response stream as each batch's results, then the summary. */
async function* batches<B, T>(
  stream: AsyncIterable<{ result: { case: "batch"; value: B } | { case: "summary"; value: SearchSummary } | { case: undefined } }>,
  items: (batch: B) => T[],
): AsyncGenerator<T[] | SearchSummary> {
  for await (const msg of stream) {
    if (msg.result.case === "batch") yield items(msg.result.value);
    else if (msg.result.case === "summary") yield msg.result.value;
  }
}

/**
 * A running Filesystem/Watch that survives dropped connections and server
 * restarts: `for await` its change events in commit order; {@link cursor}
 * is where it stands, to persist and resume from later.
 *
 * When a call fails with UNAVAILABLE (the connection dropped, the server
 * restarted; Connect may report it as a CANCELLED the watch did not ask
 * for), it calls again from {@link cursor} after 100 ms, 200 ms, ... up to
 * 5 s, so each change comes once. Every other error is thrown:
 * FAILED_PRECONDITION for an expired cursor (`metadata.oldest_cursor` names
 * the oldest one left), INVALID_PARAM, ACCESS_DENIED, ... A `fromNow` watch
 * that has received nothing yet starts from now again when it reconnects.
 * Aborting the signal or leaving the loop cancels the call.
 */
export class Watch implements AsyncIterable<ChangeEvent> {
  /** Resumes after the last event yielded (set before it is yielded), or
   * further, past changes the caller may not see; `options.cursor` before any. */
  cursor: string;

  constructor(
    private readonly open: (
      request: MessageInitShape<typeof WatchRequestSchema>,
      signal: AbortSignal,
      onHeader: () => void,
    ) => AsyncIterable<WatchResponse>,
    private readonly path: string,
    private readonly options: WatchOptions,
  ) {
    this.cursor = options.cursor ?? "";
  }

  async *[Symbol.asyncIterator](): AsyncIterator<ChangeEvent> {
    const { signal, stopAtHead = false, retries = WATCH_RETRIES } = this.options;
    let failures = 0;
    for (;;) {
      // Nothing received yet: start where the caller asked.
      const fromNow = this.cursor === (this.options.cursor ?? "") && (this.options.fromNow ?? false);
      const request = { path: this.path, cursor: this.cursor, fromNow, stopAtHead };
      // The call's own signal: the caller's abort, or leaving the loop
      // early, cancels it (a following Watch never ends by itself).
      const call = new AbortController();
      const abort = () => call.abort(signal?.reason);
      signal?.addEventListener("abort", abort);
      try {
        if (signal?.aborted) abort();
        for await (const msg of this.open(request, call.signal, () => (failures = 0))) {
          failures = 0;
          for (const event of msg.events) {
            if (signal?.aborted) throw AgentVfsError.from(signal.reason);
            this.cursor = event.cursor;
            yield event;
          }
          this.cursor = msg.cursor;
        }
        return;
      } catch (err) {
        const e = AgentVfsError.from(err);
        // Connect reports a connection the server dropped as UNAVAILABLE or,
        // when it closed the HTTP/2 stream, as CANCELLED: a CANCELLED that
        // this watch did not cause is a dropped connection too.
        const dropped = e.grpcCode === Code.Unavailable || (e.grpcCode === Code.Canceled && !call.signal.aborted);
        if (!dropped || failures >= retries) throw e;
      } finally {
        signal?.removeEventListener("abort", abort);
        call.abort();
      }
      failures += 1;
      const delay = Math.min(WATCH_FIRST_DELAY_MS * 2 ** (failures - 1), WATCH_MAX_DELAY_MS);
      await sleep(delay, undefined, { signal }).catch((err: unknown) => {
        throw AgentVfsError.from(err);
      });
    }
  }
}

/** A running download: `for await` its chunks; `info` is the file's metadata. */
export class Download implements AsyncIterable<Uint8Array> {
  /** Metadata of the file, from the first message. */
  info: FileInfo | undefined;

  constructor(private readonly start: () => AsyncIterable<{ data: Uint8Array; info?: FileInfo }>) {}

  async *[Symbol.asyncIterator](): AsyncIterator<Uint8Array> {
    for await (const msg of this.start()) {
      this.info ??= msg.info;
      yield msg.data;
    }
  }
}

/** Per-stream receive window: Node's default (64 KiB) stalls a large message on round trips. */
const STREAM_WINDOW_BYTES = 4 << 20;
/** Connection-level receive window: a whole search batch or download chunk in flight. */
const CONNECTION_WINDOW_BYTES = 16 << 20;

/**
 * Opens the TCP (or TLS) connection with TCP_NODELAY: without it, Nagle held
 * HTTP/2's small WINDOW_UPDATE and END_STREAM frames for a delayed ACK
 * (measured: a 1.4 MB download took 714 ms, 28 ms with these settings).
 */
function connectNoDelay(url: URL): net.Socket {
  const https = url.protocol === "https:";
  const port = Number(url.port || (https ? 443 : 80));
  const options = { host: url.hostname, port, noDelay: true };
  return https ? tls.connect({ ...options, servername: url.hostname, ALPNProtocols: ["h2"] }) : net.connect(options);
}

/** An HTTP/2 session with a large receive window and TCP_NODELAY. */
class TunedSessionManager extends Http2SessionManager {
  private tuned = new WeakSet<http2.Http2Session>();

  override async request(...args: Parameters<Http2SessionManager["request"]>): Promise<http2.ClientHttp2Stream> {
    const stream = await super.request(...args);
    const session = stream.session;
    if (session && !this.tuned.has(session)) {
      this.tuned.add(session);
      session.setLocalWindowSize(CONNECTION_WINDOW_BYTES);
    }
    return stream;
  }
}

/** Adds the caller's metadata to every call. */
function callerMetadata(options: ConnectOptions): Interceptor {
  return (next) => (req) => {
    if (options.token) req.header.set("authorization", `Bearer ${options.token}`);
    if (options.session) req.header.set(SESSION_HEADER, options.session);
    if (options.namespace) req.header.set(NAMESPACE_HEADER, options.namespace);
    // A label the call's own headers carry wins.
    if (options.label && !req.header.has(LABEL_HEADER)) req.header.set(LABEL_HEADER, options.label);
    if (options.branch && !req.header.has(BRANCH_HEADER)) req.header.set(BRANCH_HEADER, options.branch);
    return next(req);
  };
}

/**
 * The client with every method's failures (a rejected promise, or an error
 * in the middle of a stream, an abort included) turned into AgentVfsError.
 * Done around the client rather than in an interceptor because Connect wraps
 * whatever is not a ConnectError that an interceptor throws.
 */
function withErrors<C extends object>(client: C): C {
  return new Proxy(client, {
    get(target, prop, receiver) {
      const method: unknown = Reflect.get(target, prop, receiver);
      if (typeof method !== "function") return method;
      return (...args: unknown[]) => {
        const result: unknown = method.apply(target, args);
        if (result instanceof Promise) {
          return result.catch((err: unknown) => {
            throw AgentVfsError.from(err);
          });
        }
        if (typeof result === "object" && result !== null && Symbol.asyncIterator in result) {
          return guard(result as AsyncIterable<unknown>);
        }
        return result;
      };
    },
  });
}

async function* guard<T>(messages: AsyncIterable<T>): AsyncIterable<T> {
  try {
    yield* messages;
  } catch (err) {
    throw AgentVfsError.from(err);
  }
}
