/**
 * Claude's own file tools on agentvfs, for Anthropic's TypeScript SDK
 * (`@anthropic-ai/sdk`, an optional peer dependency: import this module as
 * `@agentvfs/client/claude`).
 *
 * ```ts
 * import Anthropic from "@anthropic-ai/sdk";
 * import { AgentVfs } from "@agentvfs/client";
 * import { agentVfsMemoryTool, agentVfsTextEditorTool } from "@agentvfs/client/claude";
 * const vfs = new AgentVfs("localhost:50051", { session: "run-1" });
 * const final = await new Anthropic().beta.messages.toolRunner({
 *   model: "claude-sonnet-5-5", max_tokens: 1024, messages: [...],
 *   tools: [agentVfsMemoryTool(vfs), agentVfsTextEditorTool(vfs)],
 * });
 * ```
 *
 * - `AgentVfsMemoryTool` implements the SDK's `MemoryToolHandlers` (as its
 *   `BetaLocalFilesystemMemoryTool` does), so `betaMemoryTool(new
 *   AgentVfsMemoryTool(vfs))` keeps Claude's memories in agentvfs under
 *   `/memories`; `agentVfsMemoryTool(vfs)` is that in one call.
 * - `agentVfsTextEditorTool(vfs)` is Claude's text editor
 *   (`text_editor_20250728`, `str_replace_based_edit_tool`), which the SDK
 *   defines but does not run.
 *
 * Both are thin adapters: each command is one `Tools.Invoke` of the server's
 * `memory` or `str_replace_based_edit_tool` tool (src/tools/ in the server),
 * which answers with the texts of Anthropic's reference implementations (the
 * Python SDK's local memory tool; the README lists where the TypeScript SDK's
 * words differ). A success is the envelope's text; an error envelope is
 * thrown as the SDK's `ToolError`, which the runner hands Claude as an
 * `is_error` result.
 */
import { randomUUID } from "node:crypto";
import { betaMemoryTool, type MemoryToolHandlers } from "@anthropic-ai/sdk/helpers/beta/memory";
import type { BetaRunnableTool } from "@anthropic-ai/sdk/lib/tools/BetaRunnableTool";
import { ToolError } from "@anthropic-ai/sdk/lib/tools/ToolError";
import type {
  BetaMemoryTool20250818,
  BetaMemoryTool20250818Command,
  BetaToolTextEditor20250728,
} from "@anthropic-ai/sdk/resources/beta";
import type { AgentVfs } from "./client.js";

/** The server's tool behind the memory adapters. */
export const MEMORY_TOOL = "memory";
/** The server's tool behind the text-editor adapter (Claude's name for it). */
export const TEXT_EDITOR_TOOL = "str_replace_based_edit_tool";

/** One Invoke of `tool` with the input as Claude wrote it: the envelope's
 * text, or its error message thrown as the SDK's `ToolError`. */
async function invoke(vfs: AgentVfs, tool: string, input: unknown): Promise<string> {
  if (typeof input !== "object" || input === null || Array.isArray(input)) {
    throw new ToolError(`Tool input must be a JSON object, got ${JSON.stringify(input)}`);
  }
  const response = await vfs.tools.invoke({
    name: tool,
    argumentsJson: JSON.stringify(input),
    toolCallId: `${tool}-${randomUUID()}`,
  });
  const envelope = JSON.parse(response.envelopeJson) as { status: string; text: string; error?: { message: string } };
  if (envelope.status === "error") throw new ToolError(envelope.error?.message ?? envelope.text);
  return envelope.text;
}

type Command<K extends BetaMemoryTool20250818Command["command"]> = Extract<BetaMemoryTool20250818Command, { command: K }>;

/** Claude's memory tool with its files in agentvfs (`/memories`): the SDK's
 * `MemoryToolHandlers`, for `betaMemoryTool`. */
export class AgentVfsMemoryTool implements MemoryToolHandlers {
  constructor(private readonly vfs: AgentVfs) {}

  view(command: Command<"view">): Promise<string> {
    return invoke(this.vfs, MEMORY_TOOL, command);
  }

  create(command: Command<"create">): Promise<string> {
    return invoke(this.vfs, MEMORY_TOOL, command);
  }

  str_replace(command: Command<"str_replace">): Promise<string> {
    return invoke(this.vfs, MEMORY_TOOL, command);
  }

  insert(command: Command<"insert">): Promise<string> {
    return invoke(this.vfs, MEMORY_TOOL, command);
  }

  delete(command: Command<"delete">): Promise<string> {
    return invoke(this.vfs, MEMORY_TOOL, command);
  }

  rename(command: Command<"rename">): Promise<string> {
    return invoke(this.vfs, MEMORY_TOOL, command);
  }
}

/** The memory tool for the SDK's tool runner, on agentvfs. `extraProps` are
 * further tool properties for the API (`cache_control`, ...). */
export function agentVfsMemoryTool(
  vfs: AgentVfs,
  extraProps?: Omit<BetaMemoryTool20250818, "type" | "name">,
): BetaRunnableTool<BetaMemoryTool20250818Command> {
  return betaMemoryTool(new AgentVfsMemoryTool(vfs), extraProps);
}

/** Input of the text editor, as Claude writes it. */
export interface TextEditorInput {
  command: "view" | "create" | "str_replace" | "insert";
  path: string;
  [key: string]: unknown;
}

/** Claude's text editor (`str_replace_based_edit_tool`) on agentvfs, for the
 * SDK's tool runner. Paths are absolute logical paths (`/workspace/app.ts`)
 * inside the server's tools root; `max_characters` goes to Claude with the
 * tool and cuts every view. */
export function agentVfsTextEditorTool(
  vfs: AgentVfs,
  extraProps: Omit<BetaToolTextEditor20250728, "type" | "name"> = {},
): BetaRunnableTool<TextEditorInput> & BetaToolTextEditor20250728 {
  const max = extraProps.max_characters;
  return {
    ...extraProps,
    type: "text_editor_20250728",
    name: TEXT_EDITOR_TOOL,
    parse: (content: unknown) => content as TextEditorInput,
    run: (input: TextEditorInput) =>
      invoke(vfs, TEXT_EDITOR_TOOL, max != null && input.command === "view" ? { max_characters: max, ...input } : input),
  };
}
