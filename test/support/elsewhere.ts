import { expect } from "chai";
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import type { Config } from "../../src/config.js";
import type { NumberRecord } from "../../src/lookup/lookup-data.js";

/**
 * Another process that changes what an app keeps (accounts, number data) through the stores, as
 * the CLI does. Not stores in the test's process: their announcements are also heard there, at
 * once, through the in-process emitter, and would not show that the app's subscriber hears them.
 * Started once, so that no change waits on a process start.
 */
export interface Elsewhere {
  /** Sets an account's status; resolves once it is written and announced. */
  setStatus(customerUuid: string, status: "active" | "suspended"): Promise<void>;
  /** Imports number records; resolves once they are written and announced. */
  putNumbers(records: [string, NumberRecord][]): Promise<void>;
  close(): void;
}

const SCRIPT = `
  import { createInterface } from "node:readline";
  import { Redis } from "ioredis";
  import { Keys } from "./src/redis/client.ts";
  import { Secrets } from "./src/crypto/secrets.ts";
  import { RedisAccountStore } from "./src/accounts/store.ts";
  import { RedisLookupData } from "./src/lookup/lookup-data.ts";
  const env = process.env;
  const redis = new Redis(env.REDIS_URL);
  const keys = new Keys(env.REDIS_KEY_PREFIX);
  const accounts = new RedisAccountStore(redis, keys, new Secrets(Buffer.from(env.SECRETS_KEY, "base64")));
  const numbers = new RedisLookupData(redis, keys);
  await redis.ping();
  console.log("ready");
  for await (const line of createInterface({ input: process.stdin })) {
    const [op, ...args] = JSON.parse(line);
    if (op === "status") console.log(String(await accounts.setStatus(args[0], args[1])));
    else if (op === "numbers") console.log(String(await numbers.put(args[0]) ?? true));
    else console.log("unknown " + op);
  }
  redis.disconnect();
`;

export async function startElsewhere(config: Config): Promise<Elsewhere> {
  const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", SCRIPT], {
    cwd: fileURLToPath(new URL("../..", import.meta.url)),
    env: {
      PATH: process.env.PATH ?? "",
      REDIS_URL: config.REDIS_URL,
      REDIS_KEY_PREFIX: config.REDIS_KEY_PREFIX,
      SECRETS_KEY: config.SECRETS_KEY.toString("base64"),
    },
    stdio: ["pipe", "pipe", "inherit"],
  });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const nextLine = async () => {
    const line = await lines.next();
    if (line.done === true) throw new Error("the other process ended");
    return line.value;
  };
  const run = async (...op: unknown[]) => {
    child.stdin.write(`${JSON.stringify(op)}\n`);
    expect(await nextLine(), `${String(op[0])} in the other process`).to.equal("true");
  };
  expect(await nextLine()).to.equal("ready");
  return {
    setStatus: (customerUuid, status) => run("status", customerUuid, status),
    putNumbers: (records) => run("numbers", records),
    close() {
      child.stdin.end();
    },
  };
}
