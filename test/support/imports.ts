import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

/**
 * The import graph of src/ as the layout test reads it: every relative import and re-export of
 * every hand-written file, type-only ones included (a type import ties two files as much as any).
 */
export interface SourceFile {
  /** Path from src/, e.g. `verify/engine.ts`. */
  readonly path: string;
  readonly text: string;
  /** The src/ files it imports, by path from src/. */
  readonly imports: readonly string[];
}

const IMPORT =
  /(?:import|export)\s+(?:type\s+)?(?:[^'";]*?\sfrom\s+)?["'](\.{1,2}\/[^"']+)["']|import\(\s*["'](\.{1,2}\/[^"']+)["']\s*\)/g;

export function sourceGraph(src: string): SourceFile[] {
  const paths: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        if (path !== join(src, "gen")) walk(path);
      } else if (entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts")) paths.push(path);
    }
  };
  walk(src);
  return paths.map((path) => {
    const text = readFileSync(path, "utf8");
    const imports = new Set<string>();
    for (const m of text.matchAll(IMPORT)) {
      const target = resolve(dirname(path), (m[1] ?? m[2] ?? "").replace(/\.js$/, ".ts"));
      if (existsSync(target)) imports.add(relative(src, target));
    }
    return { path: relative(src, path), text, imports: [...imports] };
  });
}

/** The import cycles: each strongly connected set of more than one file (Tarjan's algorithm). */
export function importCycles(files: readonly SourceFile[]): string[][] {
  const edges = new Map(files.map((f) => [f.path, f.imports]));
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  let next = 0;
  const visit = (v: string) => {
    index.set(v, next);
    low.set(v, next);
    next += 1;
    stack.push(v);
    onStack.add(v);
    for (const w of edges.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) ?? 0, low.get(w) ?? 0));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v) ?? 0, index.get(w) ?? 0));
    }
    if (low.get(v) === index.get(v)) {
      const set: string[] = [];
      let w: string | undefined;
      do {
        w = stack.pop();
        if (w === undefined) break;
        onStack.delete(w);
        set.push(w);
      } while (w !== v);
      if (set.length > 1 || (edges.get(v) ?? []).includes(v)) cycles.push(set.sort());
    }
  };
  for (const f of files) if (!index.has(f.path)) visit(f.path);
  return cycles;
}
