/** `ringfence fraud`: the engine's policy and reports, and simulate (docs/fraud.md). */
import { readFileSync } from "node:fs";
import { Command, Option } from "commander";
import { createLogger } from "../log.js";
import { APP_ID } from "../apps/app.js";
import type { AppStore } from "../apps/store.js";
import type { AccountReader } from "../accounts/store.js";
import { customerUuid } from "../accounts/commands.js";
import type { Secrets } from "../crypto/secrets.js";
import type { RedisClient } from "../redis/client.js";
import type { FraudEngine } from "./engine.js";
import type { FraudInsights } from "./insights.js";
import { fraudSettings } from "./settings.js";
import { loadSettings } from "../settings/load.js";
import { documented, print, UsageError, type OpenStores } from "../command/command.js";

/** What the fraud commands use of the shared stores: the engine's keys and rules, and the tenants. */
export interface FraudCommandNeeds {
  redis: RedisClient;
  secrets: Secrets;
  fraud: Pick<FraudEngine, "keys" | "rules">;
  accounts: Pick<AccountReader, "get">;
  apps: Pick<AppStore, "get">;
}

/** A fraud tenant as the commands name it: an account (V1, V2 sends) or an app (session codes). */
interface FraudTenantOptions {
  account?: string;
  app?: string;
}

const FRAUD_TENANT_HELP =
  "\nThe tenant is an account (--account UUID: its V1 and V2 sends) or an app (--app APP_ID: its login and step-up codes).";

function fraudTenantOptions(cmd: Command): Command {
  return documented(
    cmd
      .option("--account <uuid>", "the account (customer uuid) whose V1 and V2 sends are judged")
      .option("--app <app_id>", "the app whose login and step-up codes are judged")
      .addHelpText("after", FRAUD_TENANT_HELP),
    "Give exactly one of `--account` and `--app`.",
  );
}

/** The tenant named by exactly one of --account and --app, checked in form (not yet for existence). */
function fraudTenant(opts: FraudTenantOptions): { kind: "account" | "app"; id: string } {
  if ((opts.account === undefined) === (opts.app === undefined))
    throw new UsageError("give exactly one of --account UUID and --app APP_ID");
  if (opts.account !== undefined) return { kind: "account", id: customerUuid(opts.account) };
  const id = opts.app ?? "";
  if (!APP_ID.safeParse(id).success) throw new UsageError(`"${id}" is not an app id`);
  return { kind: "app", id };
}

/**
 * Runs a fraud command against an existing tenant; refused input becomes a usage error naming the
 * option (`--country: "ZZ" is not ...`), or the argument when `argument` names the field.
 */
async function withFraudTenant(
  open: OpenStores<FraudCommandNeeds>,
  opts: FraudTenantOptions,
  argument: string | undefined,
  fn: (
    r: FraudCommandNeeds,
    tenant: { kind: "account" | "app"; id: string },
    fraud: typeof import("./policy.js") & typeof import("./insights.js"),
  ) => Promise<void>,
): Promise<void> {
  const tenant = fraudTenant(opts);
  const fraud = { ...(await import("./policy.js")), ...(await import("./insights.js")) };
  try {
    await open(async (r) => {
      const exists =
        tenant.kind === "account"
          ? (await r.accounts.get(tenant.id)) !== undefined
          : (await r.apps.get(tenant.id)) !== undefined;
      if (!exists) throw new UsageError(`no ${tenant.kind} ${tenant.id}`);
      await fn(r, tenant, fraud);
    });
  } catch (err) {
    if (err instanceof fraud.FraudInputError) {
      const name = err.field === argument ? err.field : `--${err.field.replace("_", "-")}`;
      throw new UsageError(`${name}: ${err.detail}`);
    }
    throw err;
  }
}

/** Prints one page of a tenant's fraud report, as the V2 API answers it (snake_case). */
async function printReport(
  open: OpenStores<FraudCommandNeeds>,
  opts: FraudTenantOptions,
  read: (insights: FraudInsights, tenant: string) => Promise<object>,
): Promise<void> {
  await withFraudTenant(open, opts, undefined, async (r, tenant, f) => {
    print(
      snakeCase(await read(new f.FraudInsights(r.redis, r.fraud.keys, r.fraud.rules, r.secrets), tenant.id)),
    );
  });
}

export function fraudCommands(program: Command, open: OpenStores<FraudCommandNeeds>): void {
  const fraud = documented(
    program
      .command("fraud")
      .description(
        "steer and read the fraud engine: modes, geo permissions, trusted numbers, decisions, insights, and simulate to try a policy on a traffic file",
      )
      .addHelpText(
        "after",
        "\nEvery message that would carry a code is judged before anything is charged or sent; see docs/fraud.md.",
      ),
    "Every message that would carry a code is judged before anything is charged or sent ([fraud.md](fraud.md)). A tenant is an account (`--account`: its V1 and V2 sends) or an app (`--app`: its login and step-up codes).",
  );

  fraud.addCommand(
    documented(
      fraudTenantOptions(
        new Command("mode")
          .description(
            "set a tenant's mode: enforce (the default: blocks), shadow (sends, and records would_block), off; prints {account|app, mode}",
          )
          .argument("<mode>", "enforce, shadow or off"),
      ),
      "See [fraud.md](fraud.md#modes-geo-permissions-and-trusted-numbers).",
    ).action(async (mode: string, opts: FraudTenantOptions) => {
      await withFraudTenant(open, opts, "mode", async (r, tenant, f) => {
        const set = await new f.FraudPolicy(r.redis, r.fraud.keys).setMode(tenant.id, mode);
        print({ [tenant.kind]: tenant.id, mode: set });
      });
    }),
  );

  fraud.addCommand(
    fraudTenantOptions(
      new Command("geo")
        .description(
          "set a tenant's permission for one country: allow (the default: adaptive rules decide), block (every send refused, rule geo), trust (adaptive rules skipped); prints {account|app, country, mode}",
        )
        .requiredOption("--country <cc>", "ISO 3166-1 alpha-2 country code, such as FR")
        .requiredOption("--mode <permission>", "allow, block or trust"),
    ).action(async (opts: FraudTenantOptions & { country: string; mode: string }) => {
      await withFraudTenant(open, opts, undefined, async (r, tenant, f) => {
        const set = await new f.FraudPolicy(r.redis, r.fraud.keys).setGeo(tenant.id, opts.country, opts.mode);
        print({ [tenant.kind]: tenant.id, ...set });
      });
    }),
  );

  const fraudTrust = new Command("trust").description(
    "trusted numbers and prefixes, which the adaptive rules skip (geo blocks and hard limits still apply)",
  );
  for (const [name, trusted] of [
    ["add", true],
    ["remove", false],
  ] as const) {
    fraudTrust.addCommand(
      documented(
        fraudTenantOptions(
          new Command(name)
            .description(
              `${trusted ? "trust" : "no longer trust"} a number or a prefix; prints {account|app, number|prefix, trusted, changed}`,
            )
            .option("--number <e164>", "an E.164 phone number, such as +33612345678")
            .option("--prefix <prefix>", "a number prefix: '+' then 1 to 15 digits, such as +3361234"),
        ),
        "Give exactly one of `--number` and `--prefix`.",
      ).action(async (opts: FraudTenantOptions & { number?: string; prefix?: string }) => {
        if ((opts.number === undefined) === (opts.prefix === undefined))
          throw new UsageError("give exactly one of --number E164 and --prefix +DIGITS");
        const entry = opts.number !== undefined ? { number: opts.number } : { prefix: opts.prefix ?? "" };
        await withFraudTenant(open, opts, undefined, async (r, tenant, f) => {
          const done = await new f.FraudPolicy(r.redis, r.fraud.keys).setTrusted(tenant.id, entry, trusted);
          print({
            [tenant.kind]: tenant.id,
            [opts.number !== undefined ? "number" : "prefix"]: done.entry,
            trusted,
            changed: done.changed,
          });
        });
      }),
    );
  }
  fraud.addCommand(fraudTrust);

  fraud.addCommand(
    documented(
      fraudTenantOptions(
        new Command("decisions")
          .description(
            "print a tenant's block and would_block decisions, newest first, a page at a time: {decisions: [{id, created_at, api, country, network?, prefix, phone_number, action, rule, detail}], next_page_token?}",
          )
          .option(
            "--since <time>",
            "only decisions at or after this RFC 3339 time, such as 2026-01-02T00:00:00Z",
          )
          .option("--limit <n>", "at most this many, 1 to 1000", "100")
          .option("--page-token <token>", "the next_page_token of the previous page, for the page after it"),
      ),
      "As `GET /v2/fraud/decisions` answers; `next_page_token` gives the next page ([fraud.md](fraud.md#pages)).",
    ).action(async (opts: FraudTenantOptions & { since?: string; limit: string; pageToken?: string }) => {
      await printReport(open, opts, (insights, tenant) =>
        insights.decisions(tenant, { since: opts.since, limit: opts.limit, pageToken: opts.pageToken }),
      );
    }),
  );

  fraud.addCommand(
    documented(
      new Command("insights")
        .description(
          "print an account's sends, conversions and blocks per destination, the most sent first, a page at a time, as GET /v2/insights/verifications: {since, until, group_by, groups: [{key, sent, verified, conversion_rate, blocked}], next_page_token?}",
        )
        .requiredOption("--account <uuid>", "the account (customer uuid)")
        .option("--group-by <kind>", "country, network or prefix (default: country, or the page token's)")
        .option(
          "--since <time>",
          "RFC 3339 start (default: 24 hours before --until); its whole UTC day counts",
        )
        .option("--until <time>", "RFC 3339 end (default: now); its whole UTC day counts")
        .option("--limit <n>", "at most this many groups, 1 to 1000", "100")
        .option("--page-token <token>", "the next_page_token of the previous page, for the page after it"),
      "`next_page_token` gives the next page ([fraud.md](fraud.md#pages)).",
    ).action(
      async (opts: {
        account: string;
        groupBy?: string;
        since?: string;
        until?: string;
        limit: string;
        pageToken?: string;
      }) => {
        await printReport(open, { account: opts.account }, (insights, tenant) =>
          insights.verifications(tenant, {
            since: opts.since,
            until: opts.until,
            groupBy: opts.groupBy,
            limit: opts.limit,
            pageToken: opts.pageToken,
          }),
        );
      },
    ),
  );

  documented(
    fraud
      .command("simulate")
      .description(
        "replay a traffic file through the fraud engine on its own clock, in a Redis namespace of its own deleted afterwards (live data untouched), with the FRAUD_* settings of the environment; prints {sends, blocked, fraud_sends, fraud_blocked, legit_sends, legit_blocked, would_block, ...}",
      )
      .requiredOption(
        "--input <file>",
        "JSON lines {at, api, tenant, phone_number, ip?, device_id?, verified_after_s, label?}; one bad line rejects the file",
      )
      .addOption(
        new Option("--mode <mode>", "every tenant's mode: enforce blocks, shadow only counts would_block")
          .choices(["enforce", "shadow"])
          .default("enforce"),
      ),
    "A rejected file writes nothing. See [fraud.md](fraud.md#try-a-policy-simulate).",
  ).action(async (opts: { input: string; mode: "enforce" | "shadow" }) => {
    const config = loadSettings([fraudSettings]);
    const { parseTraffic, simulate, TrafficError } = await import("./simulate.js");
    const { simulationPrefix } = await import("./keys.js");
    let text: string;
    try {
      text = readFileSync(opts.input, "utf8");
    } catch (err) {
      throw new UsageError(`cannot read ${opts.input}: ${err instanceof Error ? err.message : String(err)}`);
    }
    let traffic;
    try {
      traffic = parseTraffic(text);
    } catch (err) {
      throw err instanceof TrafficError ? new UsageError(`${opts.input}: ${err.message}`) : err;
    }
    const { connectRedis, createRedis, keyPrefix, reportRedisErrors } = await import("../redis/client.js");
    const redis = createRedis(config);
    reportRedisErrors(redis, createLogger("warn"), "main");
    await connectRedis(redis);
    try {
      const prefix = simulationPrefix(keyPrefix(config));
      print(await simulate(traffic, { redis, prefix, config, mode: opts.mode }));
    } finally {
      await redis.quit().catch(() => undefined);
    }
  });
}

/** The answers' fields as the V2 API spells them (`groupBy` → `group_by`), undefined ones left out. */
function snakeCase(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(snakeCase);
  if (value === null || typeof value !== "object") return value;
  return Object.fromEntries(
    Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => [k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`), snakeCase(v)]),
  );
}
