// The branch helpers against the real server: withBranch, createBranch,
// listBranches, diffBranch's pages, mergeBranch's conflicts and resolutions,
// discardBranch.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { AgentVfs, BRANCH_HEADER, DELETE, NotFoundError } from "../src/index.js";
import { Server } from "./server.js";

let server: Server;
before(async () => {
  server = await Server.start();
});
after(async () => {
  await server.stop();
});

const text = (bytes: Uint8Array | undefined) => (bytes === undefined ? undefined : new TextDecoder().decode(bytes));

test("a branch's changes are its own until a merge applies them; a conflict answers its three versions", async () => {
  const vfs = new AgentVfs(server.address, { session: `ts-branch-${randomUUID()}` });
  const name = `try-${randomUUID()}`;
  await vfs.filesystem.write({ path: "/b/a.txt", content: "one\ntwo\n" });
  await vfs.filesystem.write({ path: "/b/d.txt", content: "d\n" });
  const created = await vfs.createBranch(name, "/b");
  assert.equal(created.root, "/b");
  const inBranch = vfs.withBranch(name);
  await inBranch.filesystem.write({ path: "/b/a.txt", content: "ONE\ntwo\n" });
  await inBranch.filesystem.write({ path: "/b/n.txt", content: "new\n" });
  await inBranch.filesystem.delete({ path: "/b/d.txt" });
  assert.equal((await vfs.filesystem.read({ path: "/b/a.txt" })).content, "one\ntwo\n");
  assert.equal((await vfs.filesystem.read({ path: "/b/a.txt" }, { headers: { [BRANCH_HEADER]: name } })).content, "ONE\ntwo\n");
  const diff = [];
  for await (const d of vfs.diffBranch(name, { pageSize: 1 })) diff.push(`${d.kind} ${d.path}`);
  assert.deepEqual(diff, ["changed /b/a.txt", "deleted /b/d.txt", "added /b/n.txt"]);
  const listed = (await vfs.listBranches()).find((b) => b.name === name);
  assert.equal(listed?.filesChanged, 3n);

  await vfs.filesystem.write({ path: "/b/a.txt", content: "uno\ntwo\n" });
  const conflicted = await vfs.mergeBranch(name);
  assert.equal(conflicted.changeset, "");
  assert.deepEqual(
    conflicted.conflicts.map((c) => [c.path, text(c.ancestor), text(c.branch), text(c.base)]),
    [["/b/a.txt", "one\ntwo\n", "ONE\ntwo\n", "uno\ntwo\n"]],
  );
  assert.equal((await vfs.filesystem.read({ path: "/b/d.txt" })).content, "d\n");

  const merged = await vfs.mergeBranch(name, { resolutions: { "/b/a.txt": "merged\n" }, discard: true });
  assert.ok(merged.changeset);
  assert.equal(merged.discarded, true);
  assert.deepEqual(merged.files.map((f) => f.path), ["/b/a.txt", "/b/d.txt", "/b/n.txt"]);
  assert.equal((await vfs.filesystem.read({ path: "/b/a.txt" })).content, "merged\n");
  assert.equal((await vfs.filesystem.read({ path: "/b/n.txt" })).content, "new\n");
  await assert.rejects(vfs.filesystem.read({ path: "/b/d.txt" }), NotFoundError);
  await assert.rejects(vfs.discardBranch(name), NotFoundError);
  vfs.close();
});

test("a conflict settled by DELETE; a discarded branch leaves the base as it was", async () => {
  const vfs = new AgentVfs(server.address, { session: `ts-branch-${randomUUID()}` });
  const [one, two] = [`one-${randomUUID()}`, `two-${randomUUID()}`];
  await vfs.filesystem.write({ path: "/r/a.txt", content: "a\n" });
  await vfs.filesystem.write({ path: "/r/keep.txt", content: "keep\n" });
  await vfs.createBranch(one, "/r");
  await vfs.withBranch(one).filesystem.write({ path: "/r/a.txt", content: "branch\n" });
  await vfs.filesystem.write({ path: "/r/a.txt", content: "base\n" });
  const res = await vfs.mergeBranch(one, { resolutions: { "/r/a.txt": DELETE } });
  assert.deepEqual(res.conflicts, []);
  await assert.rejects(vfs.filesystem.read({ path: "/r/a.txt" }), NotFoundError);
  await vfs.createBranch(two, "/r");
  await vfs.withBranch(two).filesystem.write({ path: "/r/b.txt", content: "b\n" });
  await vfs.discardBranch(two);
  await assert.rejects(vfs.filesystem.read({ path: "/r/b.txt" }), NotFoundError);
  await assert.rejects(vfs.withBranch(two).filesystem.read({ path: "/r/b.txt" }), NotFoundError);
  vfs.close();
});

test("a branch's version (past 2^53) round-trips exactly through the tools' envelope and the RPCs", async () => {
  const vfs = new AgentVfs(server.address, { session: `ts-branch-${randomUUID()}` });
  const name = `v-${randomUUID()}`;
  await vfs.filesystem.write({ path: "/v/a.txt", content: "one\n" });
  await vfs.createBranch(name, "/v");
  const inBranch = vfs.withBranch(name);
  const written = await inBranch.filesystem.write({ path: "/v/a.txt", content: "two\n" });
  assert.ok(written.version > 2n ** 53n, `a branch's version has bit 63 set: ${written.version}`);
  // The envelope shows versions as strings of digits: JSON.parse keeps them exact.
  const invoke = async (tool: string, args: object) =>
    JSON.parse((await inBranch.tools.invoke({ name: tool, argumentsJson: JSON.stringify(args) })).envelopeJson);
  const read = await invoke("Read", { path: "v/a.txt" });
  assert.equal(typeof read.stats.version, "string", JSON.stringify(read));
  assert.equal(BigInt(read.stats.version), written.version);
  const edited = await invoke("Edit", {
    path: "v/a.txt",
    old_string: "two",
    new_string: "three",
    expected_version: read.stats.version,
  });
  assert.equal(edited.status, "success", JSON.stringify(edited));
  const now = await inBranch.filesystem.read({ path: "/v/a.txt" });
  assert.equal(now.content, "three\n");
  assert.equal(BigInt(edited.stats.version), now.version);
  // The RPCs take the version back as the bigint they gave.
  const again = await inBranch.filesystem.write({ path: "/v/a.txt", content: "four\n", ifVersion: now.version });
  assert.ok(again.version > now.version);
  vfs.close();
});
