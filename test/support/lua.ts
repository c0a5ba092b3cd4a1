import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

/** A Lua file of its own holding `source`, for `defineScript` in tests of the script contract. */
export function luaFile(source: string): URL {
  const path = join(mkdtempSync(join(tmpdir(), "script-")), "probe.lua");
  writeFileSync(path, source);
  return pathToFileURL(path);
}
