/**
 * `ringfence lookup-data import` runs here, in a worker thread with a small young generation:
 * a million rows allocate fast (libphonenumber parses every number), and V8 would otherwise grow
 * its young generation, and the process's memory, by a hundred megabytes. The file is streamed
 * twice: every row is checked before anything is written (one bad row rejects the file).
 */
import { createReadStream } from "node:fs";
import { once } from "node:events";
import { parentPort, workerData } from "node:worker_threads";
import { connectRedis, createRedis, keyPrefix, Keys } from "../redis/client.js";
import { loadSettings } from "../settings/load.js";
import { ImportError, readImport, RedisLookupData } from "./lookup-data.js";

/** What the worker tells the CLI: progress, then one end. */
export type ImportMessage =
  | { type: "progress"; pass: "checked" | "written"; rows: number; of?: number }
  | { type: "done"; imported: number }
  | { type: "failed"; message: string; usage: boolean };

const { file } = workerData as { file: string };
const tell = (m: ImportMessage) => {
  parentPort?.postMessage(m);
};

async function open() {
  const input = createReadStream(file);
  try {
    await once(input, "open");
  } catch (err) {
    throw new ImportError(`cannot read ${file}: ${err instanceof Error ? err.message : String(err)}`);
  }
  return input;
}

/** Progress at most every second, and at the end of each pass. */
function ticker(pass: "checked" | "written", of?: number) {
  let lastMs = Date.now();
  return (rows: number, final = false) => {
    if (!final && Date.now() - lastMs < 1_000) return;
    lastMs = Date.now();
    tell({ type: "progress", pass, rows, ...(of === undefined ? {} : { of }) });
  };
}

async function run(): Promise<number> {
  const checked = ticker("checked");
  let rows = 0;
  for await (const _row of readImport(await open())) {
    rows += 1;
    checked(rows);
  }
  checked(rows, true);
  // The command checked every setting before it started this thread: Redis is all it needs.
  const config = loadSettings([]);
  const redis = createRedis(config);
  // Its failures end the import, reported by the command in its one line: nothing else to say
  // (without a listener ioredis would print each error's stack).
  redis.on("error", () => undefined);
  try {
    await connectRedis(redis);
    const data = new RedisLookupData(redis, new Keys(keyPrefix(config)));
    const written = ticker("written", rows);
    const n = await data.putAll(readImport(await open()), (w) => {
      written(w);
    });
    written(n, true);
    return n;
  } finally {
    await redis.quit().catch(() => undefined);
  }
}

run().then(
  (imported) => {
    tell({ type: "done", imported });
  },
  (err: unknown) => {
    tell({
      type: "failed",
      message: err instanceof Error ? err.message : String(err),
      usage: err instanceof ImportError,
    });
  },
);
