import { readFileSync } from "node:fs";
import { expect } from "chai";
import { loadConfig, SETTING_DOCS, SETTING_SECTIONS, settingNames } from "../src/config.js";
import { renderSettings, SETTINGS_PATH, shownDefault } from "../src/config-docs.js";

/** docs/settings.md is generated from src/config.ts (`npm run generate`): these keep the two one. */
describe("docs/settings.md", function () {
  const doc = readFileSync(SETTINGS_PATH, "utf8");

  it("is what `npm run generate` writes from src/config.ts (run it when this fails)", async function () {
    expect(doc).to.equal(await renderSettings());
  });

  it("documents every setting the schema reads, once, and nothing else", function () {
    expect(Object.keys(SETTING_DOCS).sort()).to.deep.equal(settingNames().sort());
    for (const name of settingNames()) {
      const entries = doc.split("\n").filter((line) => line.startsWith(`- **\`${name}\`**: `));
      expect(entries, name).to.have.lengthOf(1);
      expect(SETTING_DOCS[name].text.trim(), name).to.not.equal("");
    }
  });

  it("keeps the section headings other documents link to", function () {
    const headings = [...doc.matchAll(/^## (.+)$/gm)].map((m) => m[1]);
    for (const { title } of Object.values(SETTING_SECTIONS)) expect(headings).to.include(title);
    for (const title of [
      "Service and network",
      "Message delivery",
      "One-time codes",
      "Session abuse limits",
      "Workers",
    ])
      expect(headings).to.include(title);
  });

  it("shows each default the way the environment spells it", function () {
    const defaults = loadConfig({}) as unknown as Record<string, unknown>;
    let checked = 0;
    for (const name of settingNames()) {
      const shown = /^`([^`]+)`/.exec(shownDefault(name))?.[1];
      if (shown === undefined) continue;
      const config = loadConfig({ [name]: shown }) as unknown as Record<string, unknown>;
      expect(config[name], `${name}=${shown}`).to.deep.equal(defaults[name]);
      checked += 1;
    }
    expect(checked).to.be.greaterThan(60);
  });
});
