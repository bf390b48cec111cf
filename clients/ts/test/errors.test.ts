/** Errors: the codes are the contract's reasons, and each kind with one of its own is a subclass. */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import {
  AgentVfs,
  AgentVfsError,
  AlreadyExistsError,
  ConflictError,
  ErrorCode,
  ErrorReason,
  ErrorReasonSchema,
  IsDirectoryError,
  NotDirectoryError,
  NotFoundError,
} from "../src/index.js";
import { Server } from "./server.js";

let server: Server;
before(async () => {
  server = await Server.start();
});
after(async () => {
  await server.stop();
});

test("the codes are the ErrorReason names without their prefix, one for each reason", () => {
  const reasons = ErrorReasonSchema.values.filter((v) => v.number !== 0).map((v) => v.name.replace(/^ERROR_REASON_/, ""));
  assert.deepEqual(Object.values(ErrorCode), reasons);
});

test("each kind of error is its class, with the reason and, for a conflict, the versions", async () => {
  const vfs = new AgentVfs(server.address, { session: `ts-errors-${randomUUID()}` });
  const v1 = (await vfs.filesystem.write({ path: "/f.txt", content: "1" })).version;
  const v2 = (await vfs.filesystem.write({ path: "/f.txt", content: "2" })).version;
  const missing = await vfs.filesystem.read({ path: "/missing" }).catch((e: unknown) => e);
  assert.ok(missing instanceof NotFoundError && missing instanceof AgentVfsError);
  assert.equal(missing.reason, ErrorReason.NOT_FOUND);
  assert.equal(missing.name, "NotFoundError");
  await assert.rejects(vfs.filesystem.write({ path: "/f.txt", content: "x", createOnly: true }), AlreadyExistsError);
  const stale = await vfs.filesystem.write({ path: "/f.txt", content: "x", ifVersion: v1 }).catch((e: unknown) => e);
  assert.ok(stale instanceof ConflictError);
  assert.deepEqual([stale.path, stale.expectedVersion, stale.actualVersion], ["/f.txt", v1, v2]);
  await assert.rejects(vfs.filesystem.read({ path: "/" }), IsDirectoryError);
  await assert.rejects(vfs.filesystem.listInfo({ path: "/f.txt" }), NotDirectoryError);
  const bad = await vfs.filesystem.read({ path: "/f.txt", offset: 9n }).catch((e: unknown) => e);
  assert.ok(bad instanceof AgentVfsError && bad.constructor === AgentVfsError);
  assert.equal(bad.reason, ErrorReason.INVALID_PARAM);
  await assert.rejects(
    (async () => {
      for await (const _ of vfs.glob({ pattern: "*", path: "/missing" })) assert.fail("no entries");
    })(),
    NotFoundError,
  );
  vfs.close();
});
