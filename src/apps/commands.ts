/** `ringfence apps`: the apps of the session service (docs/cli.md). */
import { Command } from "commander";
import { NewAppInput } from "./app.js";
import type { AppStore } from "./store.js";
import { documented, parseOrThrow, print, UsageError, type OpenStores } from "../command/command.js";

/** What the app commands use of the shared stores. */
export interface AppCommandNeeds {
  apps: Pick<AppStore, "create" | "get" | "scopes" | "messageCounts">;
}

/** `more`: subcommands other domains keep of an app (its passkey relying party). */
export function appsCommands(
  program: Command,
  open: OpenStores<AppCommandNeeds>,
  more: readonly Command[] = [],
): void {
  const apps = program
    .command("apps")
    .description("manage apps of the session service")
    .addCommand(
      new Command("create")
        .description("create an app; prints {app_id, management_api_key} (the key is shown only once)")
        .requiredOption("--name <name>", "app name")
        .action(async (opts: { name: string }) => {
          const { name } = parseOrThrow(NewAppInput, { name: opts.name });
          await open(async (r) => {
            const { app, managementApiKey } = await r.apps.create(name);
            print({ app_id: app.appId, management_api_key: managementApiKey });
          });
        }),
    )
    .addCommand(
      documented(
        new Command("show")
          .description("print an app: {app_id, name, created_at, scopes, messages: {sms_sent, email_sent}}")
          .argument("<app_id>", "the app's id (app_…)"),
        "`messages` counts the login and step-up codes sent; the app's key is never shown.",
      ).action(async (appId: string) => {
        await open(async (r) => {
          const app = await r.apps.get(appId);
          if (app === undefined) throw new UsageError(`no app ${appId}`);
          print({
            app_id: app.appId,
            name: app.name,
            created_at: app.createdAt,
            scopes: await r.apps.scopes(app.appId),
            messages: await r.apps.messageCounts(app.appId),
          });
        });
      }),
    );
  for (const command of more) apps.addCommand(command);
}
