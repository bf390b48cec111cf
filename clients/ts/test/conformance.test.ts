/**
 * The TypeScript runner of the shared conformance suite
 * (tests/conformance/README.md): every case against a real server, through
 * the AgentVfs client.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { fromJson, toJson, type DescMessage, type DescService, type JsonValue, type Message } from "@bufbuild/protobuf";
import {
  Access,
  AccessDeniedError,
  AgentVfs,
  AgentVfsError,
  AlreadyExistsError,
  ChangeEventSchema,
  CommitRequestSchema,
  CommitResponseSchema,
  RewindRequestSchema,
  RewindResponseSchema,
  ConflictError,
  FileInfoSchema,
  Filesystem,
  GrepMatchSchema,
  IsDirectoryError,
  NotDirectoryError,
  NotFoundError,
  SearchSummarySchema,
  Tools,
  WriteBytesHeaderSchema,
  type ChangesetOp,
  type RewindSelector,
  type FileInfo,
  type GrepMatch,
  type Search,
  type WatchRequest,
} from "../src/index.js";
import { Server } from "./server.js";

type Json = JsonValue;
type Obj = { [key: string]: Json };

interface Step {
  call: string;
  request?: Obj;
  expect?: Json;
  error?: Json;
  save?: Record<string, string>;
  session?: string;
  token?: string;
  namespace?: string;
  label?: string;
  branch?: string;
  cancel_after?: number;
}

interface Suite {
  server?: { config?: string };
  token?: string;
  cases: { name: string; steps: Step[] }[];
}

const SERVICES: Record<string, DescService> = { Filesystem, Tools, Access };
// dist/test/ → repository root
const CASES_DIR = join(dirname(fileURLToPath(import.meta.url)), "../../../../tests/conformance");
const files = readdirSync(CASES_DIR).filter((f) => f.endsWith(".json")).sort();

test("the suite has case files", () => {
  assert.ok(files.length >= 3, `no conformance files in ${CASES_DIR}`);
});

for (const file of files) {
  const suite = JSON.parse(readFileSync(join(CASES_DIR, file), "utf8")) as Suite;
  describe(file.replace(/\.json$/, ""), () => {
    let server: Server;
    const clients = new Map<string, AgentVfs>();
    before(async () => {
      server = await Server.start(suite.server?.config);
    });
    after(async () => {
      for (const c of clients.values()) c.close();
      await server.stop();
    });
    const client = (session: string, namespace: string | undefined, token: string): AgentVfs => {
      const key = `${session}\0${namespace ?? ""}\0${token}`;
      let c = clients.get(key);
      if (!c) {
        c = new AgentVfs(server.address, { session, token, ...(namespace === undefined ? {} : { namespace }) });
        clients.set(key, c);
      }
      return c;
    };
    for (const c of suite.cases) {
      test(c.name, async () => {
        const vars: Record<string, Json> = {};
        for (const [i, step] of c.steps.entries()) {
          const where = `step ${i} (${step.call})`;
          const session = `ts.${c.name}${step.session === undefined ? "" : `.${step.session}`}`;
          const namespace = step.namespace === undefined ? undefined : `ts.${c.name}.${step.namespace}`;
          const base = client(session, namespace, step.token ?? suite.token ?? "");
          const labelled = step.label === undefined ? base : base.withLabel(step.label);
          const vfs = step.branch === undefined ? labelled : labelled.withBranch(step.branch);
          let result: Json;
          try {
            result = await call(vfs, step.call, substitute(step.request ?? {}, vars) as Obj, step.cancel_after);
          } catch (err) {
            if (!(err instanceof AgentVfsError)) throw err;
            assert.ok(step.error !== undefined, `${where}: unexpected error ${err.message}`);
            check(where, substitute(step.error, vars), errorJson(err));
            continue;
          }
          assert.ok(step.error === undefined, `${where}: expected an error, got ${JSON.stringify(result)}`);
          if (step.expect !== undefined) check(where, substitute(step.expect, vars), result);
          for (const [name, path] of Object.entries(step.save ?? {})) {
            let v: Json | undefined = result;
            for (const key of path.split(".")) v = (v as Obj | undefined)?.[key];
            assert.ok(v !== undefined, `${where}: cannot save ${path} from ${JSON.stringify(result)}`);
            vars[name] = v;
          }
        }
      });
    }
  });
}

/** Each native error a runner reports, by its name (tests/conformance/README.md). */
const NATIVE: [typeof AgentVfsError, string][] = [
  [NotFoundError, "not_found"],
  [AlreadyExistsError, "exists"],
  [AccessDeniedError, "permission"],
  [IsDirectoryError, "is_directory"],
  [NotDirectoryError, "not_directory"],
  [ConflictError, "conflict"],
];

/** An error as every runner reports it, with the native error it is. */
function errorJson(err: AgentVfsError): Obj {
  const out: Obj = {
    grpc: err.grpcName,
    code: err.code,
    message: err.rawMessage,
    metadata: err.metadata,
    native: NATIVE.find(([kind]) => err instanceof kind)?.[1] ?? "",
  };
  if (err.operationIndex !== undefined) out.operation_index = err.operationIndex;
  if (err instanceof ConflictError) {
    out.conflict = { path: err.path, expected_version: String(err.expectedVersion), actual_version: String(err.actualVersion) };
  }
  return out;
}

const json = (desc: DescMessage, msg: Message | undefined): Json =>
  msg === undefined ? {} : toJson(desc, msg, { useProtoFieldName: true });

/** Makes one call by name; the result as proto JSON (README "Results"). */
async function call(vfs: AgentVfs, name: string, request: Obj, cancelAfter: number | undefined): Promise<Json> {
  const [serviceName, methodName] = name.split(".");
  const service = SERVICES[serviceName ?? ""];
  const method = service?.methods.find((m) => m.name === methodName);
  assert.ok(method, `no method ${name}`);
  if (method.methodKind === "client_streaming") {
    const header = fromJson(WriteBytesHeaderSchema, request.header ?? {});
    return json(method.output, await vfs.upload(header, pieces(request.data)));
  }
  if (name === "Filesystem.Commit") {
    return json(CommitResponseSchema, await vfs.commit(commitOps(request)));
  }
  if (name === "Filesystem.Rewind") {
    const { path, selector, dryRun, force } = fromJson(RewindRequestSchema, request);
    const sel = (selector.case === undefined ? {} : { [selector.case]: selector.value }) as unknown as RewindSelector;
    return json(RewindResponseSchema, await vfs.rewind(path, sel, { dryRun, force }));
  }
  const req = fromJson(method.input, request);
  if (method.methodKind === "server_streaming") {
    const ac = new AbortController();
    if (name === "Filesystem.ReadBytes") {
      const { path, version } = req as unknown as { path: string; version?: bigint };
      const download = vfs.download(path, { signal: ac.signal, version });
      const hash = createHash("sha256");
      let size = 0;
      for await (const chunk of download) {
        hash.update(chunk);
        size += chunk.length;
      }
      return { info: json(FileInfoSchema, download.info), size, sha256: hash.digest("hex") };
    }
    if (name === "Filesystem.Watch") {
      const { path, cursor, fromNow, stopAtHead } = req as unknown as WatchRequest;
      assert.ok(stopAtHead, "a Watch step must set stop_at_head");
      const watch = vfs.watch(path, { cursor, fromNow, stopAtHead, signal: ac.signal });
      const events: Json[] = [];
      for await (const event of watch) events.push(json(ChangeEventSchema, event));
      return { events, cursor: watch.cursor };
    }
    const [search, list, schema] =
      name === "Filesystem.Grep"
        ? [vfs.grep(req as never, { signal: ac.signal }) as Search<GrepMatch | FileInfo>, "matches", GrepMatchSchema]
        : [vfs.glob(req as never, { signal: ac.signal }) as Search<GrepMatch | FileInfo>, "entries", FileInfoSchema];
    const items: Json[] = [];
    if (cancelAfter === 0) ac.abort();
    for await (const item of search) {
      items.push(json(schema, item));
      if (cancelAfter !== undefined && items.length >= cancelAfter) ac.abort();
    }
    return { [list]: items, summary: json(SearchSummarySchema, search.summary) };
  }
  const stub = (vfs as unknown as Record<string, Record<string, (r: Message) => Promise<Message>>>)[serviceName!.toLowerCase()]!;
  return json(method.output, await stub[method.localName]!(req));
}

/** A Commit step's operations as the client's op objects. */
function commitOps(request: Obj): ChangesetOp[] {
  return fromJson(CommitRequestSchema, request).operations.map(({ operation: o }): ChangesetOp => {
    switch (o.case) {
      case "write":
        return { op: "write", ...o.value };
      case "edit":
        return { op: "edit", ...o.value };
      case "multiEdit":
        return { op: "multiEdit", path: o.value.path, edits: o.value.edits, ifVersion: o.value.ifVersion };
      case "delete":
        assert.ok(!o.value.recursive, "the client's delete op has no recursive");
        return { op: "delete", path: o.value.path, ifVersion: o.value.ifVersion };
      case "move":
        return { op: "move", ...o.value };
    }
    assert.fail(`an operation of no kind: ${JSON.stringify(request)}`);
  });
}

/** Concatenates [{"text"|"base64": ..., "repeat": n}]. */
function pieces(data: Json | undefined): Uint8Array {
  const parts = (data as Obj[] | undefined ?? []).map((p) => {
    const one = typeof p.text === "string" ? Buffer.from(p.text) : Buffer.from(String(p.base64), "base64");
    return Buffer.concat(Array(Number(p.repeat ?? 1)).fill(one));
  });
  return new Uint8Array(Buffer.concat(parts));
}

/** Replaces "${var}" strings by saved values, and ${var} inside a longer string by the value's text. */
function substitute(v: Json, vars: Record<string, Json>): Json {
  if (typeof v === "string") {
    const m = /^\$\{(.+)\}$/.exec(v);
    if (m && m[1]! in vars) return vars[m[1]!]!;
    return v.replace(/\$\{(\w+)\}/g, (token, name: string) => (name in vars ? text(vars[name]!) : token));
  }
  if (Array.isArray(v)) return v.map((x) => substitute(x, vars));
  if (v !== null && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, substitute(x, vars)]));
  return v;
}

/** A saved value inside a string: a string as is, a number in decimal. */
const text = (v: Json): string => (typeof v === "string" ? v : typeof v === "number" ? String(v) : JSON.stringify(v));

const MISSING = Symbol("missing");
type Actual = Json | typeof MISSING;

function check(where: string, expected: Json, actual: Json): void {
  const problems: string[] = [];
  checkAt("$", expected, actual, problems);
  assert.deepEqual(problems, [], `${where}: ${problems.join("; ")} in ${JSON.stringify(actual)}`);
}

function checkAt(at: string, expected: Json, actual: Actual, problems: string[]): void {
  const show = (a: Actual) => (a === MISSING ? "nothing" : JSON.stringify(a));
  if (expected !== null && typeof expected === "object" && !Array.isArray(expected)) {
    const ops = Object.keys(expected).filter((k) => k.startsWith("$"));
    if (ops.length > 0) {
      for (const op of ops) {
        const arg = expected[op]!;
        if (op === "$json" && typeof actual === "string") {
          let parsed: Json;
          try {
            parsed = JSON.parse(actual) as Json;
          } catch (err) {
            problems.push(`${at}: not JSON (${String(err)}): ${actual}`);
            continue;
          }
          checkAt(`${at}<json>`, arg, parsed, problems);
          continue;
        }
        const ok =
          (op === "$contains" && typeof actual === "string" && actual.includes(String(arg))) ||
          (op === "$gte" && num(actual) !== undefined && num(actual)! >= num(arg)!);
        if (!ok) problems.push(`${at}: ${show(actual)} fails ${op} ${JSON.stringify(arg)}`);
      }
      return;
    }
    if (actual !== MISSING && (actual === null || typeof actual !== "object" || Array.isArray(actual))) {
      problems.push(`${at}: expected an object, got ${show(actual)}`);
      return;
    }
    for (const [k, v] of Object.entries(expected)) {
      const got = actual === MISSING || !(k in (actual as Obj)) ? MISSING : (actual as Obj)[k]!;
      checkAt(`${at}.${k}`, v, got, problems);
    }
  } else if (Array.isArray(expected)) {
    const got = actual === MISSING ? [] : actual;
    if (!Array.isArray(got) || got.length !== expected.length) {
      problems.push(`${at}: expected ${expected.length} items, got ${show(actual)}`);
      return;
    }
    expected.forEach((e, i) => checkAt(`${at}[${i}]`, e, got[i]!, problems));
  } else if (actual === MISSING) {
    if (!isDefault(expected)) problems.push(`${at}: expected ${JSON.stringify(expected)}, got nothing`);
  } else if (typeof expected === "number" || typeof actual === "number") {
    if (num(expected) === undefined || num(expected) !== num(actual)) {
      problems.push(`${at}: expected ${JSON.stringify(expected)}, got ${show(actual)}`);
    }
  } else if (expected !== actual) {
    problems.push(`${at}: expected ${JSON.stringify(expected)}, got ${show(actual)}`);
  }
}

/** The values proto JSON omits. */
function isDefault(v: Json): boolean {
  return v === null || v === false || v === 0 || v === "" || v === "0" || (typeof v === "string" && v.endsWith("_UNSPECIFIED"));
}

function num(v: Actual): number | undefined {
  if (typeof v === "number") return v;
  if (typeof v === "string" && v.trim() !== "" && !Number.isNaN(Number(v))) return Number(v);
  return undefined;
}
