import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { expect } from "chai";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

function files(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) {
      if (name !== "gen") files(path, out);
    } else if (/\.(ts|lua)$/.test(name)) out.push(path);
  }
  return out;
}

/** GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s-]/gu, "")
    .replace(/\s/g, "-");
}

/** Source comments cite docs/ in the repository, never documents that live elsewhere. */
describe("docs/ citations in the source", () => {
  const sources = files(join(ROOT, "src")).map((path) => ({ path, text: readFileSync(path, "utf8") }));

  it("point to a docs/ file and heading that exist", () => {
    const broken: string[] = [];
    let cited = 0;
    for (const { path, text } of sources) {
      for (const m of text.matchAll(/docs\/([\w-]+\.md)(?:#([\w-]+))?/g)) {
        cited += 1;
        const [, file = "", anchor] = m;
        let doc: string;
        try {
          doc = readFileSync(join(ROOT, "docs", file), "utf8");
        } catch {
          broken.push(`${path}: docs/${file} does not exist`);
          continue;
        }
        const anchors = [...doc.matchAll(/^#{1,6} (.+)$/gm)].map((h) => slug(h[1] ?? ""));
        if (anchor !== undefined && !anchors.includes(anchor)) broken.push(`${path}: docs/${file}#${anchor}`);
      }
    }
    expect(broken).to.deep.equal([]);
    expect(cited).to.be.greaterThan(30);
  });

  it("cite no document outside the repository (decisions sections, the specification)", () => {
    const outside = sources.flatMap(({ path, text }) =>
      /decisions section|\bthe specification\b|[Ss]pecification "/.test(text) ? [path] : [],
    );
    expect(outside).to.deep.equal([]);
  });
});
