/** `ringfence users`: the users of an app (docs/cli.md). */
import { Command } from "commander";
import type { Identifier } from "./identity.js";
import type { UserStore } from "./users.js";
import type { AppStore } from "../apps/store.js";
import { documented, print, UsageError, type OpenStores } from "../command/command.js";

/** What the user commands use of the shared stores. */
export interface UserCommandNeeds {
  apps: Pick<AppStore, "get">;
  users: Pick<UserStore, "create">;
}

export function sessionCommands(program: Command, open: OpenStores<UserCommandNeeds>): void {
  program
    .command("users")
    .description("manage users of an app")
    .addCommand(
      documented(
        new Command("create")
          .description("create a user holding an email address and/or a phone number; prints {user_id}")
          .requiredOption("--app <app_id>", "the app")
          .option("--email <address>", "email address")
          .option("--phone <number>", "phone number, E.164")
          .option("--password <password>", "initial password (8 to 128 characters), stored as argon2id"),
        "Give `--email`, `--phone` or both.",
      ).action(async (opts: { app: string; email?: string; phone?: string; password?: string }) => {
        const [{ isEmailAddress }, { parseE164 }, { checkPasswordPolicy, hashPassword }] = await Promise.all([
          import("../net/email-address.js"),
          import("../phone/e164.js"),
          import("./password.js"),
        ]);
        const identifiers: Identifier[] = [];
        if (opts.email !== undefined) {
          if (!isEmailAddress(opts.email)) throw new UsageError(`"${opts.email}" is not an email address`);
          identifiers.push({ type: "email_address", value: opts.email });
        }
        if (opts.phone !== undefined) {
          const parsed = parseE164(opts.phone);
          if (parsed === undefined) throw new UsageError(`"${opts.phone}" is not an E.164 phone number`);
          identifiers.push({ type: "phone_number", value: parsed.e164 });
        }
        if (identifiers.length === 0) throw new UsageError("give --email, --phone or both");
        const problem = opts.password === undefined ? undefined : checkPasswordPolicy(opts.password);
        if (problem !== undefined) throw new UsageError(`password ${problem}`);
        await open(async (r) => {
          if ((await r.apps.get(opts.app)) === undefined) throw new UsageError(`no app ${opts.app}`);
          const hash = opts.password === undefined ? undefined : await hashPassword(opts.password);
          const user = await r.users.create(opts.app, identifiers, hash);
          if (user === undefined)
            throw new UsageError("one of these identifiers already belongs to a user of this app");
          print({ user_id: user.userId });
        });
      }),
    );
}
