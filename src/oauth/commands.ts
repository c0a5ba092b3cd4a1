/** `ringfence keys`: the keys that sign tokens (docs/cli.md). */
import { Command } from "commander";
import type { RedisSigningKeys } from "./keys/signing-keys.js";
import { documented, print, type OpenStores } from "../command/command.js";

/** What the key commands use of the shared stores. */
export interface KeyCommandNeeds {
  signingKeys: Pick<RedisSigningKeys, "rotate">;
}

export function oauthCommands(program: Command, open: OpenStores<KeyCommandNeeds>): void {
  program
    .command("keys")
    .description("token signing keys")
    .addCommand(
      documented(
        new Command("rotate").description(
          "add a signing key that new tokens use; the old one stays in the JWKS until its tokens expire",
        ),
        "Prints {kid}, the new key's id.",
      ).action(async () => {
        await open(async (r) => {
          print(await r.signingKeys.rotate());
        });
      }),
    );
}
