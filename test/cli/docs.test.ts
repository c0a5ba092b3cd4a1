import { readFileSync } from "node:fs";
import { expect } from "chai";
import type { Command } from "commander";
import { CLI_DOCS_PATH, commandTree, renderCliDocs } from "../../src/cli/docs.js";

/** Every command below `cmd`, by its full name (`accounts create`). */
function paths(cmd: Command, parent = ""): string[] {
  return cmd.commands.flatMap((sub) => {
    const path = `${parent}${sub.name()}`;
    return [path, ...paths(sub, `${path} `)];
  });
}

/** docs/cli.md is generated from the command definitions (`npm run docs:cli`): these keep the two one. */
describe("docs/cli.md", function () {
  // The first import of the command tree compiles every domain's commands.
  this.timeout(30_000);
  const doc = readFileSync(CLI_DOCS_PATH, "utf8");

  it("is what `npm run docs:cli` writes from the commands (run it when this fails)", async function () {
    expect(doc).to.equal(await renderCliDocs());
  });

  it("has a section for every command the root mounts, each with a description", function () {
    const program = commandTree();
    const headings = [...doc.matchAll(/^#{2,6} `ringfence (.+)`$/gm)].map((m) => m[1]);
    expect(headings).to.deep.equal(paths(program));
    const described = (cmd: Command): Command[] => [cmd, ...cmd.commands.flatMap(described)];
    for (const cmd of described(program)) expect(cmd.description(), cmd.name()).to.not.equal("");
  });

  it("keeps the command names operators and scripts use", function () {
    expect(paths(commandTree())).to.deep.equal([
      "serve",
      "accounts",
      "accounts create",
      "accounts suspend",
      "accounts resume",
      "accounts credit",
      "accounts template",
      "accounts channels",
      "accounts show",
      "apps",
      "apps create",
      "apps show",
      "apps passkeys",
      "users",
      "users create",
      "keys",
      "keys rotate",
      "lookup-data",
      "lookup-data import",
      "fraud",
      "fraud mode",
      "fraud geo",
      "fraud trust",
      "fraud trust add",
      "fraud trust remove",
      "fraud decisions",
      "fraud insights",
      "fraud simulate",
      "routes",
      "routes set",
      "routes list",
      "routes remove",
      "routes insights",
    ]);
  });
});
