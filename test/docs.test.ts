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

/** The README stays short, and every topic it leaves out is a link away. */
describe("README.md and docs/*.md", () => {
  const pages = [
    "README.md",
    ...readdirSync(join(ROOT, "docs"))
      .filter((f) => f.endsWith(".md"))
      .map((f) => `docs/${f}`),
  ];
  const anchorsOf = (path: string): string[] => {
    const text = readFileSync(join(ROOT, path), "utf8").replace(/^```[\s\S]*?^```/gm, "");
    return [...text.matchAll(/^#{1,6} (.+)$/gm)].map((h) => slug(h[1] ?? ""));
  };

  it("keeps the README at most 250 lines, none of them longer than 110 characters", () => {
    const lines = readFileSync(join(ROOT, "README.md"), "utf8").split("\n");
    expect(lines.length).to.be.at.most(250);
    expect(lines.filter((l) => l.length > 110)).to.deep.equal([]);
  });

  it("links from the README to every file of docs/", () => {
    const readme = readFileSync(join(ROOT, "README.md"), "utf8");
    const missing = readdirSync(join(ROOT, "docs"))
      .filter((f) => f.endsWith(".md") && f !== "README.md")
      .filter((f) => !readme.includes(`](docs/${f}`));
    expect(missing).to.deep.equal([]);
  });

  it("has no relative link to a missing file or heading", () => {
    const broken: string[] = [];
    let links = 0;
    for (const page of pages) {
      const text = readFileSync(join(ROOT, page), "utf8").replace(/^```[\s\S]*?^```/gm, "");
      for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1] ?? "";
        if (/^[a-z]+:/.test(target)) continue;
        links += 1;
        const [file = "", anchor] = target.split("#");
        const path = file === "" ? page : join(page, "..", file);
        let exists = true;
        try {
          statSync(join(ROOT, path));
        } catch {
          exists = false;
        }
        if (!exists) broken.push(`${page}: ${target}`);
        else if (anchor !== undefined && !anchorsOf(path).includes(anchor)) broken.push(`${page}: ${target}`);
      }
    }
    expect(broken).to.deep.equal([]);
    expect(links).to.be.greaterThan(40);
  });
});
