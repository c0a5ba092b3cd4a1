/** `ringfence apps passkeys`: an app's passkey relying party (docs/cli.md). */
import { Command } from "commander";
import { documented, print, UsageError, type OpenStores } from "../command/command.js";
import type { Keys, RedisClient } from "../redis/client.js";
import type { AppStore } from "../apps/store.js";
import { MAX_ORIGINS, readOrigin, RelyingParties, rpIdProblem } from "./relying-party.js";

/** What the passkey command uses of the shared stores. */
export interface PasskeyCommandNeeds {
  redis: RedisClient;
  keys: Keys;
  apps: Pick<AppStore, "get">;
}

/** The `passkeys` subcommand of `apps`. */
export function passkeysCommand(open: OpenStores<PasskeyCommandNeeds>): Command {
  return documented(
    new Command("passkeys")
      .description("let an app's users register and log in with passkeys; prints {app_id, rp_id, origins}")
      .argument("<app_id>", "the app's id (app_…)")
      .requiredOption("--rp-id <domain>", "the WebAuthn relying party ID: the domain passkeys are scoped to")
      .requiredOption(
        "--origins <origins>",
        "comma list of the origins ceremonies run on: https://<rp-id or a subdomain>[:port] (http only for localhost)",
      ),
    "Setting them again replaces them; passkeys registered under another RP ID stop working.",
  ).action(async (appId: string, opts: { rpId: string; origins: string }) => {
    const rpId = opts.rpId.trim();
    const problem = rpIdProblem(rpId);
    if (problem !== undefined) throw new UsageError(`--rp-id ${problem}`);
    const listed = opts.origins
      .split(",")
      .map((o) => o.trim())
      .filter((o) => o !== "");
    if (listed.length === 0) throw new UsageError("--origins must name at least one origin");
    if (listed.length > MAX_ORIGINS)
      throw new UsageError(`--origins must name at most ${MAX_ORIGINS} origins`);
    const origins: string[] = [];
    for (const o of listed) {
      const read = readOrigin(o, rpId);
      if ("problem" in read) throw new UsageError(`--origins: ${read.problem}`);
      if (!origins.includes(read.origin)) origins.push(read.origin);
    }
    await open(async (r) => {
      const app = await r.apps.get(appId);
      if (app === undefined) throw new UsageError(`no app ${appId}`);
      await new RelyingParties(r.redis, r.keys).set(app.appId, { rpId, origins });
      print({ app_id: app.appId, rp_id: rpId, origins });
    });
  });
}
