/** `ringfence lookup-data`: the operator's own data for lookups (docs/cli.md). */
import { Worker } from "node:worker_threads";
import { Command } from "commander";
import { IMPORT_COLUMNS } from "./import-format.js";
import type { ImportMessage } from "./import-worker.js";
import { documented, print, UsageError } from "../command/command.js";

/** Young generation of the import's worker (V8's default grows to 48 MB under a fast allocator). */
const IMPORT_YOUNG_GENERATION_MB = 4;

export function lookupCommands(program: Command): void {
  program
    .command("lookup-data")
    .description("operator data for lookups")
    .addCommand(
      documented(
        new Command("import")
          .argument("<file>", `CSV file with a header row of: ${IMPORT_COLUMNS.join(", ")}`)
          .description(
            "import ported numbers, caller names, disposable-number and line-type overrides; an empty cell changes nothing, and one bad row rejects the file; prints {imported: rows}, progress on stderr",
          ),
        "The header holds any subset of these columns with `phone_number`. Every row is checked before any is written; the file is streamed in bounded memory (1,000,000 rows: about 30 s, under 160 MB), and every instance uses the data within a second.",
      ).action(async (file: string) => {
        const { imported } = await importInWorker(file);
        print({ imported });
      }),
    );
}

/**
 * Runs `lookup-data import` in a worker thread with a small young generation, so a file of any
 * size is imported in bounded memory; its progress goes to stderr (stdout keeps the JSON answer).
 */
async function importInWorker(file: string): Promise<{ imported: number }> {
  const options = {
    workerData: { file },
    resourceLimits: { maxYoungGenerationSizeMb: IMPORT_YOUNG_GENERATION_MB },
  };
  // From the sources (tests, tsx), the worker registers tsx itself: loader hooks stay in their thread.
  const fromSources = import.meta.url.endsWith(".ts");
  const entry = new URL(`./import-worker.${fromSources ? "ts" : "js"}`, import.meta.url);
  const worker = fromSources
    ? new Worker(
        `import(${JSON.stringify(import.meta.resolve("tsx/esm/api"))}).then((tsx) => { tsx.register(); return import(${JSON.stringify(entry.href)}); });`,
        { ...options, eval: true },
      )
    : new Worker(entry, options);
  const startedMs = Date.now();
  return new Promise((resolve, reject) => {
    worker.on("message", (m: ImportMessage) => {
      if (m.type === "progress") {
        const seconds = ((Date.now() - startedMs) / 1000).toFixed(1);
        const peakMb = Math.round(process.resourceUsage().maxRSS / 1024);
        const count = m.of === undefined ? `${m.rows} rows` : `${m.rows} of ${m.of} rows`;
        process.stderr.write(
          `ringfence: lookup-data import: ${m.pass} ${count} (${seconds} s, peak ${peakMb} MB)\n`,
        );
      } else if (m.type === "done") {
        resolve({ imported: m.imported });
      } else {
        reject(m.usage ? new UsageError(m.message) : new Error(m.message));
      }
    });
    worker.on("error", reject);
    worker.on("exit", (code) => {
      reject(new Error(`the import stopped (exit ${code})`));
    });
  });
}
