/**
 * Options every streaming helper of {@link AgentVfs} takes; their own
 * module, so the helpers' modules (`client.ts`, `branch.ts`) need not
 * import each other.
 */

/** Options of a streaming helper. */
export interface StreamOptions {
  /** Aborting it cancels the call, which stops the work on the server. */
  signal?: AbortSignal;
}
