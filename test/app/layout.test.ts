import { expect } from "chai";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The shape issue 21 gave the code, held by a test so that it stays: a short composition root,
 * modules that do not reach into one another, one home for the rate-limit window keys, a grant
 * without a queue, a verify store of one job, and a test tree that mirrors src/.
 */
const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const SRC = join(ROOT, "src");

/** Every hand-written TypeScript file under src/ (generated code in src/gen/ is not ours to shape). */
function sources(dir = SRC): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return path === join(SRC, "gen") ? [] : sources(path);
    return entry.name.endsWith(".ts") ? [path] : [];
  });
}

const lines = (path: string) => readFileSync(path, "utf8").split("\n").length;
const where = (path: string) => relative(ROOT, path);

describe("code layout: the composition root and module boundaries stay as issue 21 left them", () => {
  const files = sources().map((path) => ({ path, text: readFileSync(path, "utf8") }));

  it("keeps src/app.ts, the composition root, to at most 200 lines", () => {
    expect(lines(join(SRC, "app.ts"))).to.be.at.most(200);
  });

  it("splices no handler set with Omit<Handlers, and types no caller as unknown", () => {
    expect(files.filter((f) => f.text.includes("Omit<Handlers")).map((f) => where(f.path))).to.deep.equal([]);
    expect(files.filter((f) => /caller\?: unknown/.test(f.text)).map((f) => where(f.path))).to.deep.equal([]);
  });

  it("lets at most one stepup/ file import from session/", () => {
    const importers = files.filter(
      (f) => f.path.startsWith(join(SRC, "stepup")) && /from "\.\.\/session\//.test(f.text),
    );
    expect(importers.map((f) => where(f.path))).to.have.length.at.most(1);
  });

  it("builds the rl window keys in one module, src/otp/window-keys.ts", () => {
    const builders = files.filter((f) => /["']rl["']/.test(f.text)).map((f) => where(f.path));
    expect(builders).to.deep.equal(["src/otp/window-keys.ts"]);
  });

  it("keeps the token grant free of a queue: no class, no waiting line", () => {
    const grant = readFileSync(join(SRC, "oauth", "grant.ts"), "utf8");
    expect(grant).not.to.match(/\bclass\s/);
    const oauth = files.filter((f) => f.path.startsWith(join(SRC, "oauth")));
    expect(
      oauth.filter((f) => /\b(Waiter|WaitingLine)\b/.test(f.text)).map((f) => where(f.path)),
    ).to.deep.equal([]);
  });

  it("keeps src/verify/store.ts to at most 350 lines", () => {
    expect(lines(join(SRC, "verify", "store.ts"))).to.be.at.most(350);
  });

  it("keeps at most 12 test files directly under test/, the rest in folders beside src/'s", () => {
    const top = readdirSync(join(ROOT, "test")).filter((name) => name.endsWith(".test.ts"));
    expect(top).to.have.length.at.most(12);
  });
});
