/**
 * The operator CLI's root (docs/cli.md): the program, `serve`, then each domain's commands in the
 * order --help lists them, each given the stores it needs.
 */
import { readFileSync } from "node:fs";
import { Command } from "commander";
import { accountsCommands } from "./accounts/commands.js";
import { appsCommands } from "./apps/commands.js";
import { passkeysCommand } from "./passkeys/commands.js";
import { sessionCommands } from "./session/commands.js";
import { oauthCommands } from "./oauth/commands.js";
import { lookupCommands } from "./lookup/commands.js";
import { fraudCommands } from "./fraud/commands.js";
import { routesCommands } from "./delivery/commands.js";
import { closeServeLog, serveCommand } from "./cli/serve.js";
import { documented, runProgram } from "./command/command.js";
import { withRegistry } from "./cli/registry.js";

/** The version in the package's package.json, beside src/ and dist/ alike. */
function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as {
    version?: unknown;
  };
  return typeof pkg.version === "string" ? pkg.version : "unknown";
}

/** Every command, as `ringfence` runs them and docs/cli.md lists them. */
export function buildProgram(): Command {
  const program = documented(
    new Command("ringfence")
      .description("Ringfence: phone verification (V1, deprecated) and session authentication service")
      .addHelpText(
        "after",
        "\nEvery setting comes from the environment; see docs/settings.md. Commands print JSON on stdout.",
      )
      .version(packageVersion(), "-V, --version", "print the version of ringfence")
      .exitOverride()
      .configureOutput({ outputError: () => undefined }),
    "Every setting comes from the environment: [settings.md](settings.md).",
  );
  serveCommand(program);
  accountsCommands(program, withRegistry);
  appsCommands(program, withRegistry, [passkeysCommand(withRegistry)]);
  sessionCommands(program, withRegistry);
  oauthCommands(program, withRegistry);
  lookupCommands(program);
  fraudCommands(program, withRegistry);
  routesCommands(program, withRegistry);
  return program;
}

/** Runs the command line (src/cli.ts, the entry point, calls this). */
export function runCommandLine(): Promise<void> {
  return runProgram(buildProgram(), closeServeLog);
}
