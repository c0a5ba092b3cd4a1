import { expect } from "chai";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { BUS_OFFSET, testPort } from "../support/ports.js";

/**
 * A port found free by listening on 0 and closing is in the ephemeral range, where any outgoing
 * connection of the run may take it before the test binds it (EADDRINUSE on a newcomer's first
 * `npm test`). Tests listen on 0 and read the port, or take one of test/support/ports.ts.
 */
const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const ALLOCATOR = join(ROOT, "test", "support", "ports.ts");

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === "fixtures" ? [] : sources(path);
    return entry.name.endsWith(".ts") ? [path] : [];
  });
}

/** The first port of the kernel's ephemeral range (Linux); 32768, the lowest any system uses, elsewhere. */
function ephemeralStart(): number {
  try {
    return Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]);
  } catch {
    return 32_768;
  }
}

/** The text between the parenthesis at `open` and the one that closes it. */
function inside(text: string, open: number): string {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    if (text[i] === "(") depth += 1;
    else if (text[i] === ")" && --depth === 0) return text.slice(open + 1, i);
  }
  return text.slice(open + 1);
}

describe("test ports: none is found free and bound later in the ephemeral range", () => {
  it("leaves no helper in test/ or bench/ that listens on 0 only to close at once and hand the port on", () => {
    const files = [...sources(join(ROOT, "test")), ...sources(join(ROOT, "bench"))].filter(
      (path) => path !== ALLOCATOR && path !== fileURLToPath(import.meta.url),
    );
    const offenders = files.flatMap((path) => {
      const text = readFileSync(path, "utf8");
      const found = /\bfreePort\b/.test(text) ? ["freePort"] : [];
      for (const m of text.matchAll(/\.listen\(\s*(0\b|\{\s*port:\s*0\b)/g)) {
        // A server closed in its own listen callback was opened only to learn a free port.
        if (inside(text, m.index + m[0].indexOf("(")).includes(".close("))
          found.push(`listen(0) closed in its callback, line ${text.slice(0, m.index).split("\n").length}`);
      }
      return found.map((what) => `${relative(ROOT, path)}: ${what}`);
    });
    expect(offenders).to.deep.equal([]);
  });

  it("hands out ports below the ephemeral range, each once, Redis Cluster bus ports included", async () => {
    const start = ephemeralStart();
    const ports: number[] = [];
    for (let i = 0; i < 50; i++) ports.push(await testPort());
    const clustered: number[] = [];
    for (let i = 0; i < 10; i++) clustered.push(await testPort({ bus: true }));
    const all = [...ports, ...clustered];
    expect(new Set(all).size, "each port once").to.equal(all.length);
    expect(all.filter((p) => p < 1024 || p >= start)).to.deep.equal([]);
    expect(clustered.filter((p) => p + BUS_OFFSET >= start)).to.deep.equal([]);
    expect(all.filter((p) => all.includes(p - BUS_OFFSET))).to.deep.equal([]);
  });
});
