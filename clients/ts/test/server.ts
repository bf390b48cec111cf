/** Starting the real agentvfs server ($AGENTVFS_BIN) for the tests. */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

const PREFIX = "agentvfs listening on ";

/** A running `agentvfs serve`, on an ephemeral loopback port unless `listen`
 * names one, in a temporary working directory unless `cwd` names one (where a
 * relative Store `path` lies). */
export class Server {
  private constructor(
    /** `127.0.0.1:PORT`. */
    readonly address: string,
    private readonly proc: ChildProcess,
    private readonly dir: string,
    /** What the server logged so far. */
    readonly log: string[],
  ) {}

  /** Starts a server, with `config` (TOML) when given. */
  static async start(config?: string, options: { listen?: string; cwd?: string } = {}): Promise<Server> {
    const bin = process.env.AGENTVFS_BIN;
    if (!bin) throw new Error("AGENTVFS_BIN must name the agentvfs binary (scripts/test-ts sets it)");
    const dir = mkdtempSync(join(tmpdir(), "agentvfs-ts-"));
    const args = ["serve", "--listen", options.listen ?? "127.0.0.1:0"];
    if (config) {
      writeFileSync(join(dir, "agentvfs.toml"), config);
      args.push("--config", join(dir, "agentvfs.toml"));
    }
    // The default Store data directory is the user's; each test server keeps its
    // own, outside the working directory it serves at /workspace.
    const cwd = options.cwd ?? join(dir, "cwd");
    const data = join(dir, "data");
    if (options.cwd === undefined) mkdirSync(cwd);
    mkdirSync(data);
    const env = { ...process.env, XDG_DATA_HOME: data };
    const proc = spawn(bin, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    const log: string[] = [];
    proc.stderr?.on("data", (chunk: Buffer) => log.push(chunk.toString()));
    const lines = createInterface({ input: proc.stdout! });
    const first = await new Promise<string>((resolve, reject) => {
      lines.once("line", resolve);
      proc.once("exit", (code) => reject(new Error(`server exited (${code}): ${log.join("")}`)));
    });
    lines.close();
    if (!first.startsWith(PREFIX)) {
      proc.kill("SIGKILL");
      throw new Error(`server did not start: ${first}`);
    }
    return new Server(first.slice(PREFIX.length), proc, dir, log);
  }

  /** Kills the process (SIGKILL, as a crash would) and removes its directory. */
  async stop(): Promise<void> {
    const exited = new Promise((resolve) => this.proc.once("exit", resolve));
    this.proc.kill("SIGKILL");
    await exited;
    rmSync(this.dir, { recursive: true, force: true });
  }
}
