/** What the wrapper adds over Connect's clients: metadata, errors, cancellation, chunking. */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { Code } from "@connectrpc/connect";
import { AgentVfs, AgentVfsError, CHUNK_BYTES, ConflictError, ErrorCode, LABEL_HEADER, NotFoundError, type RewindSelector } from "../src/index.js";
import { Server } from "./server.js";

let server: Server;
before(async () => {
  server = await Server.start();
});
after(async () => {
  await server.stop();
});

const connect = () => new AgentVfs(server.address, { session: `ts-client-${randomUUID()}` });

test("errors carry the envelope code, gRPC code and ErrorInfo metadata", async () => {
  const vfs = connect();
  const v1 = (await vfs.filesystem.write({ path: "/v.txt", content: "1" })).version;
  await vfs.filesystem.write({ path: "/v.txt", content: "2" });
  const err = await vfs.filesystem.write({ path: "/v.txt", content: "3", ifVersion: v1 }).catch((e: unknown) => e);
  assert.ok(err instanceof AgentVfsError);
  assert.equal(err.code, ErrorCode.Conflict);
  assert.equal(err.grpcCode, Code.Aborted);
  assert.equal(err.metadata.expected_version, String(v1));
  vfs.close();
});

test("sessions come from the client", async () => {
  const a = connect();
  const b = connect();
  await a.filesystem.write({ path: "/mine.txt", content: "a" });
  await assert.rejects(b.filesystem.stat({ path: "/mine.txt" }), (e: unknown) => e instanceof AgentVfsError && e.code === ErrorCode.NotFound);
  a.close();
  b.close();
});

test("an AbortSignal stops a search at once, and breaking out of the loop cancels it", async () => {
  const vfs = connect();
  await vfs.upload({ path: "/many.txt" }, new TextEncoder().encode("needle\n".repeat(100_000)));
  const ac = new AbortController();
  let seen = 0;
  await assert.rejects(
    (async () => {
      for await (const m of vfs.grep({ pattern: "needle", path: "/" }, { signal: ac.signal })) {
        assert.equal(m.line, "needle");
        seen += 1;
        ac.abort();
      }
    })(),
    (e: unknown) => e instanceof AgentVfsError && e.grpcCode === Code.Canceled && e.code === "",
  );
  assert.equal(seen, 1);
  const search = vfs.grep({ pattern: "needle", path: "/" });
  for await (const m of search) {
    assert.equal(m.lineNumber, 1n);
    break;
  }
  assert.equal(search.summary, undefined, "a search left early has no summary");
  const all = vfs.glob({ pattern: "*.txt", path: "/" });
  const paths: string[] = [];
  for await (const e of all) paths.push(e.path);
  assert.deepEqual(paths, ["/many.txt"]);
  assert.equal(all.summary?.matched, 1n);
  vfs.close();
});

test("upload takes an async iterable in chunks and download streams it back", async () => {
  const vfs = connect();
  const piece = new Uint8Array(CHUNK_BYTES + 123).map((_, i) => i % 251);
  async function* pieces() {
    yield piece;
    yield piece;
  }
  const w = await vfs.upload({ path: "/blob.bin", createOnly: true }, pieces());
  assert.equal(w.bytesWritten, BigInt(2 * piece.length));
  const download = vfs.download("/blob.bin");
  const chunks: Uint8Array[] = [];
  for await (const c of download) chunks.push(c);
  const data = Buffer.concat(chunks);
  assert.equal(data.length, 2 * piece.length);
  assert.deepEqual(data.subarray(piece.length), Buffer.from(piece));
  assert.equal(download.info?.size, BigInt(2 * piece.length));
  await assert.rejects(vfs.upload({ path: "/blob.bin", createOnly: true }, piece), (e: unknown) => e instanceof AgentVfsError && e.code === ErrorCode.Conflict);
  vfs.close();
});

test("move renames a file and a tree; conflicts and a move across mounts are AgentVfsError", async () => {
  const vfs = connect();
  const isError = (code: string, grpcCode: Code, text = "") => (e: unknown) =>
    e instanceof AgentVfsError && e.code === code && e.grpcCode === grpcCode && e.rawMessage.includes(text);
  const v1 = (await vfs.filesystem.write({ path: "/a.txt", content: "alpha" })).version;
  await vfs.filesystem.write({ path: "/b.txt", content: "beta" });
  await assert.rejects(vfs.filesystem.move({ source: "/a.txt", destination: "/b.txt", createOnly: true }), isError(ErrorCode.Conflict, Code.AlreadyExists));
  const v2 = (await vfs.filesystem.write({ path: "/a.txt", content: "alpha 2" })).version;
  await assert.rejects(vfs.filesystem.move({ source: "/a.txt", destination: "/c.txt", ifVersion: v1 }), isError(ErrorCode.Conflict, Code.Aborted));
  await assert.rejects(
    vfs.filesystem.move({ source: "/a.txt", destination: "/memories/a.txt" }),
    isError(ErrorCode.InvalidParam, Code.InvalidArgument, "cannot move across mounts"),
  );

  const moved = await vfs.filesystem.move({ source: "/a.txt", destination: "/new/a.txt", ifVersion: v2 });
  assert.equal(moved.filesMoved, 1n);
  assert.ok(moved.version > v2, "a moved file gets a new version");
  const read = await vfs.filesystem.read({ path: "/new/a.txt" });
  assert.equal(read.content, "alpha 2");
  assert.equal(read.version, moved.version);
  await assert.rejects(vfs.filesystem.stat({ path: "/a.txt" }), isError(ErrorCode.NotFound, Code.NotFound));

  await vfs.filesystem.write({ path: "/tree/one.txt", content: "1" });
  await vfs.filesystem.write({ path: "/tree/sub/two.txt", content: "2" });
  const tree = await vfs.filesystem.move({ source: "/tree", destination: "/moved/tree" });
  assert.equal(tree.filesMoved, 2n);
  assert.equal(tree.version, 0n);
  assert.equal((await vfs.filesystem.read({ path: "/moved/tree/sub/two.txt" })).content, "2");
  vfs.close();
});

test("copy copies a file; create_only, a stale if_version and a copy across mounts are AgentVfsError", async () => {
  const vfs = connect();
  const isError = (code: string, grpcCode: Code, text = "") => (e: unknown) =>
    e instanceof AgentVfsError && e.code === code && e.grpcCode === grpcCode && e.rawMessage.includes(text);
  const source = await vfs.filesystem.write({ path: "/cp/a.txt", content: "alpha" });
  const copied = await vfs.filesystem.copy({ source: "/cp/a.txt", destination: "/cp/new/b.txt" });
  assert.equal(copied.bytesWritten, 5n);
  assert.equal(copied.created, true);
  const read = await vfs.filesystem.read({ path: "/cp/new/b.txt" });
  assert.equal(read.content, "alpha");
  assert.equal(read.version, copied.version);
  assert.equal((await vfs.filesystem.read({ path: "/cp/a.txt" })).version, source.version);
  await assert.rejects(vfs.filesystem.copy({ source: "/cp/a.txt", destination: "/cp/new/b.txt", createOnly: true }), isError(ErrorCode.Conflict, Code.AlreadyExists));
  await assert.rejects(
    vfs.filesystem.copy({ source: "/cp/a.txt", destination: "/cp/new/b.txt", ifVersion: copied.version + 1n }),
    isError(ErrorCode.Conflict, Code.Aborted),
  );
  await assert.rejects(
    vfs.filesystem.copy({ source: "/cp/a.txt", destination: "/memories/a.txt" }),
    isError(ErrorCode.InvalidParam, Code.InvalidArgument, "cannot copy across mounts"),
  );
  vfs.close();
});

test("commit applies a changeset; a failing operation is named on the native error", async () => {
  const vfs = connect();
  const err = await vfs
    .commit([
      { op: "write", path: "/c/a.txt", content: "a\n" },
      { op: "edit", path: "/c/missing.txt", oldString: "x", newString: "y" },
    ])
    .catch((e: unknown) => e);
  assert.ok(err instanceof NotFoundError);
  assert.equal(err.operationIndex, 1);
  const stat = await vfs.filesystem.stat({ path: "/c/a.txt" }).catch((e: unknown) => e);
  assert.ok(stat instanceof NotFoundError);
  assert.equal(stat.operationIndex, undefined);
  const done = await vfs.commit([
    { op: "write", path: "/c/a.txt", content: "one two\n", createOnly: true },
    { op: "multiEdit", path: "/c/a.txt", edits: [{ oldString: "one", newString: "1" }, { oldString: "two", newString: "2", replaceAll: true }] },
  ]);
  assert.deepEqual(done.files.map((f) => [f.path, f.size]), [["/c/a.txt", 4n]]);
  vfs.close();
});

test("labels come from the client, withLabel or a call's headers; rewind by label undoes them", async () => {
  const vfs = new AgentVfs(server.address, { session: `ts-client-${randomUUID()}`, label: "client-label" });
  await vfs.filesystem.write({ path: "/l/a.txt", content: "one\n" });
  const res = await vfs.withLabel("turn-2").commit([
    { op: "edit", path: "/l/a.txt", oldString: "one", newString: "two" },
    { op: "write", path: "/l/b.txt", content: "b\n" },
  ]);
  assert.ok(res.changeset);
  await vfs.filesystem.write({ path: "/l/c.txt", content: "c\n" }, { headers: { [LABEL_HEADER]: "own" } });
  const versions = (await vfs.filesystem.listVersions({ path: "/l/a.txt" })).versions;
  assert.deepEqual(
    versions.map((v) => [v.label, v.changeset]),
    [["turn-2", res.changeset], ["client-label", ""]],
  );
  assert.equal((await vfs.filesystem.listVersions({ path: "/l/c.txt" })).versions[0]?.label, "own");
  const dry = await vfs.rewind("/l", { label: "turn-2" }, { dryRun: true });
  assert.equal(dry.files.length, 2);
  assert.equal(dry.changeset, "");
  assert.match(dry.diff, /-two\n\+one/);
  await vfs.withLabel("other").filesystem.edit({ path: "/l/a.txt", oldString: "two", newString: "three" });
  await assert.rejects(vfs.rewind("/l", { label: "turn-2" }), (e: unknown) => e instanceof ConflictError && e.path === "/l/a.txt");
  const undo = await vfs.rewind("/l", { label: "turn-2" }, { force: true });
  assert.ok(undo.changeset);
  assert.deepEqual(undo.files.map((f) => [f.path, f.deleted]), [["/l/a.txt", false], ["/l/b.txt", true]]);
  assert.equal((await vfs.filesystem.read({ path: "/l/a.txt" })).content, "one\n");
  await assert.rejects(vfs.rewind("/l", {} as RewindSelector), TypeError);
  await assert.rejects(vfs.rewind("/l", { label: "a", changeset: "b" } as unknown as RewindSelector), TypeError);
  vfs.close();
});
