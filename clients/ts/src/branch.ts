/**
 * What the branch helpers of {@link AgentVfs} build: the settling of a
 * merge's conflicts (docs/branches.md § Merge).
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { MergeResolutionSchema } from "./gen/agentvfs/v1/filesystem_pb.js";
import type { StreamOptions } from "./options.js";

/** A resolution of {@link MergeOptions.resolutions} that deletes the file. */
export const DELETE: unique symbol = Symbol("agentvfs.DELETE");

/** How a merge settles one conflicting file: its new content (text is
 * UTF-8), or {@link DELETE}. */
export type Resolution = Uint8Array | string | typeof DELETE;

/** Options of {@link AgentVfs.mergeBranch}. */
export interface MergeOptions extends StreamOptions {
  /** Settles conflicts, by path: one each at most. */
  resolutions?: Readonly<Record<string, Resolution>>;
  /** Delete the branch once the merge applied. */
  discard?: boolean;
}

/** Options of {@link AgentVfs.diffBranch}. */
export interface DiffBranchOptions extends StreamOptions {
  /** Most files each call asks for (1-1000; default the server's 1000). */
  pageSize?: number;
}

/** The MergeBranchRequest's resolutions of `resolutions`. */
export function mergeResolutions(
  resolutions: Readonly<Record<string, Resolution>>,
): MessageInitShape<typeof MergeResolutionSchema>[] {
  return Object.entries(resolutions).map(([path, r]) => ({
    path,
    resolution:
      r === DELETE
        ? { case: "delete", value: true }
        : { case: "content", value: typeof r === "string" ? new TextEncoder().encode(r) : r },
  }));
}
