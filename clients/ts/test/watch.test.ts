/**
 * `AgentVfs.watch`: changes in commit order, the end at the head, resuming
 * from a saved cursor, the expired-cursor error, and a watcher that
 * reconnects by itself across a server restart.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code } from "@connectrpc/connect";
import { AgentVfs, AgentVfsError, ChangeKind, ErrorCode, type ChangeEvent, type Watch } from "../src/index.js";
import { Server } from "./server.js";

const EXPIRING = '[[mount]]\nprefix = "/"\ntier = "state"\nchange_log = 3\n';

let server: Server;
let expiring: Server;
before(async () => {
  [server, expiring] = await Promise.all([Server.start(), Server.start(EXPIRING)]);
});
after(async () => {
  await Promise.all([server.stop(), expiring.stop()]);
});

const connect = (address = server.address) => new AgentVfs(address, { session: `ts-watch-${randomUUID()}` });

/** Every event of a watch that ends. */
async function all(watch: Watch): Promise<ChangeEvent[]> {
  const events: ChangeEvent[] = [];
  for await (const e of watch) events.push(e);
  return events;
}

const summary = (events: ChangeEvent[]) => events.map((e) => `${ChangeKind[e.kind]} ${e.path} ${e.operation}`);

test("watch yields writes, edits and deletes in commit order and stops at the head", async () => {
  const vfs = connect();
  const w = await vfs.filesystem.write({ path: "/w/a.md", content: "alpha\n" });
  const e = await vfs.filesystem.edit({ path: "/w/a.md", oldString: "alpha", newString: "beta" });
  await vfs.filesystem.delete({ path: "/w/a.md" });
  const watch = vfs.watch("/w", { stopAtHead: true });
  const events = await all(watch);
  assert.deepEqual(summary(events), ["CREATED /w/a.md write", "MODIFIED /w/a.md edit", "DELETED /w/a.md delete"]);
  assert.deepEqual([events[0]!.version, events[1]!.version], [w.version, e.version]);
  assert.ok(events[2]!.version > e.version);
  assert.ok(watch.cursor !== "" && watch.cursor === events[2]!.cursor);

  // Following: a change made after the watch started arrives; an abort ends it.
  const ac = new AbortController();
  const follow = vfs.watch("/w", { cursor: watch.cursor, signal: ac.signal });
  const first = (async () => {
    for await (const event of follow) return event;
    throw new Error("the watch ended");
  })();
  const later = await vfs.filesystem.write({ path: "/w/later.md", content: "x" });
  const got = await first;
  assert.deepEqual([got.path, got.version], ["/w/later.md", later.version]);
  const aborted = vfs.watch("/w", { cursor: got.cursor, signal: ac.signal });
  const ended = all(aborted);
  ac.abort();
  await assert.rejects(ended, (err: unknown) => err instanceof AgentVfsError && err.grpcCode === Code.Canceled);
  vfs.close();
});

test("watch resumes from a saved cursor with exactly what came after it", async () => {
  const vfs = connect();
  for (const name of ["1", "2"]) await vfs.filesystem.write({ path: `/w/${name}`, content: name });
  const saved = vfs.watch("/w", { stopAtHead: true });
  assert.equal((await all(saved)).length, 2);
  for (const name of ["3", "4", "5"]) await vfs.filesystem.write({ path: `/w/${name}`, content: name });
  const paths = async (cursor: string) => (await all(vfs.watch("/w", { cursor, stopAtHead: true }))).map((e) => e.path);
  assert.deepEqual(await paths(saved.cursor), ["/w/3", "/w/4", "/w/5"]);
  // A loop left early: the cursor resumes right after the last event yielded.
  const partial = vfs.watch("/w", { cursor: saved.cursor, stopAtHead: true });
  for await (const e of partial) {
    assert.equal(e.path, "/w/3");
    break;
  }
  assert.deepEqual(await paths(partial.cursor), ["/w/4", "/w/5"]);
  vfs.close();
});

test("an expired cursor is FAILED_PRECONDITION naming the oldest one, thrown without retrying", async () => {
  const vfs = connect(expiring.address);
  await vfs.filesystem.write({ path: "/a", content: "1" });
  const saved = vfs.watch("/", { stopAtHead: true });
  await all(saved);
  for (const name of "bcdef") await vfs.filesystem.write({ path: `/${name}`, content: "x" });
  const started = Date.now();
  const err = await all(vfs.watch("/", { cursor: saved.cursor, stopAtHead: true })).catch((e: unknown) => e);
  assert.ok(err instanceof AgentVfsError, String(err));
  assert.equal(err.grpcCode, Code.FailedPrecondition);
  assert.equal(err.code, ErrorCode.InvalidParam);
  const oldest = err.metadata.oldest_cursor ?? "";
  assert.ok(oldest !== "" && err.rawMessage.includes(`the oldest cursor still available is ${oldest}`), err.rawMessage);
  const resumed = await all(vfs.watch("/", { cursor: oldest, stopAtHead: true }));
  assert.deepEqual(resumed.map((e) => e.path), ["/d", "/e", "/f"]);
  await assert.rejects(
    all(vfs.watch("/", { cursor: oldest, fromNow: true, stopAtHead: true })),
    (e: unknown) => e instanceof AgentVfsError && e.grpcCode === Code.InvalidArgument,
  );
  // Retried, the two failures would have taken over 25 s of backoff.
  assert.ok(Date.now() - started < 5000, `${Date.now() - started} ms: were the failures retried?`);
  vfs.close();
});

test("a watcher resumes across a server restart with exactly the writes after its last event", async () => {
  const dir = mkdtempSync(join(tmpdir(), "agentvfs-ts-restart-"));
  const config = `[[mount]]\nprefix = "/"\ntier = "state"\n\n[[mount]]\nprefix = "/memories"\ntier = "store"\npath = ${JSON.stringify(join(dir, "store"))}\n`;
  let current = await Server.start(config, { cwd: dir });
  const address = current.address;
  const watcher = connect(address);
  const ac = new AbortController();
  const watch = watcher.watch("/memories", { signal: ac.signal });
  const events = watch[Symbol.asyncIterator]();
  const expect = async (path: string, version: bigint) => {
    const timeout = setTimeout(() => ac.abort(new Error(`${path} never came`)), 30_000);
    const next = await events.next().finally(() => clearTimeout(timeout));
    assert.ok(!next.done, "the watch ended");
    assert.deepEqual([next.value.path, next.value.version, next.value.kind], [path, version, ChangeKind.CREATED]);
  };
  try {
    const before = connect(address);
    for (const name of ["m1", "m2"]) {
      await expect(`/memories/${name}`, (await before.filesystem.write({ path: `/memories/${name}`, content: name })).version);
    }
    before.close();
    const cursor = watch.cursor;
    await current.stop();
    current = await Server.start(config, { cwd: dir, listen: address });
    const afterRestart = connect(address);
    for (const name of ["m3", "m4", "m5"]) {
      await expect(`/memories/${name}`, (await afterRestart.filesystem.write({ path: `/memories/${name}`, content: name })).version);
    }
    afterRestart.close();
    // Nothing more: no event came twice.
    const extra = events.next();
    const quiet = new Promise((resolve) => setTimeout(resolve, 300, "quiet"));
    assert.equal(await Promise.race([extra, quiet]), "quiet");
    assert.notEqual(watch.cursor, cursor);
    ac.abort();
    await assert.rejects(extra, (e: unknown) => e instanceof AgentVfsError && e.grpcCode === Code.Canceled);
  } finally {
    ac.abort();
    watcher.close();
    await current.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
