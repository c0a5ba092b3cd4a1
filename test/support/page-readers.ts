/**
 * Readers walking an account's insights in pages of 1000 as fast as they can, as a process of
 * their own (an attacker's, not the neighbour's client): `node --import tsx page-readers.ts
 * <baseUrl> <apiKey> <readers>`. They start at once, stop when stdin ends or says `stop`, and then
 * print one JSON line: each page's time in ms and the number of 429 answers.
 */
import { performance } from "node:perf_hooks";

const [baseUrl, apiKey, readersArg] = process.argv.slice(2);
if (baseUrl === undefined || apiKey === undefined) {
  console.error("usage: page-readers.ts <baseUrl> <apiKey> [readers]");
  process.exit(2);
}
let running = true;
const pageMs: number[] = [];
let refused = 0;
const failures: string[] = [];

async function reader(): Promise<void> {
  let token = "";
  while (running) {
    const t0 = performance.now();
    const page = token === "" ? "" : `&page_token=${encodeURIComponent(token)}`;
    const res = await fetch(`${baseUrl}/v2/insights/verifications?group_by=prefix&limit=1000${page}`, {
      headers: { authorization: `Bearer ${apiKey}` },
    });
    // The token without parsing the whole page.
    const text = await res.text();
    if (res.status === 429) {
      refused += 1;
      continue;
    }
    if (res.status !== 200) {
      failures.push(`${res.status} ${text.slice(0, 200)}`);
      return;
    }
    pageMs.push(performance.now() - t0);
    token = /"next_page_token":"([^"]+)"/.exec(text)?.[1] ?? "";
  }
}

const readers = Array.from({ length: Number(readersArg ?? "4") }, reader);
const stop = () => {
  running = false;
};
process.stdin.on("data", (chunk: Buffer) => {
  if (chunk.toString().includes("stop")) stop();
});
process.stdin.on("end", stop);
console.log(JSON.stringify({ started: true }));
void Promise.all(readers).then(() => {
  console.log(JSON.stringify({ pageMs, refused, failures }));
  process.exit(0);
});
