/**
 * Run as its own process with --expose-gc: loads every calling code's carrier table
 * (src/lookup/carriers.ts) and prints the heap each took and all of them together, as JSON.
 */
import { callingCodesWithCarriers, carrierOf } from "../../src/lookup/carriers.js";

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error("run with --expose-gc");
const heap = () => {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
};
const codes = await callingCodesWithCarriers();
const start = heap();
const perCode: Record<string, number> = {};
for (const code of codes) {
  const before = heap();
  await carrierOf(code, "0");
  perCode[code] = heap() - before;
}
console.log(JSON.stringify({ tables: codes.length, total: heap() - start, perCode }));
