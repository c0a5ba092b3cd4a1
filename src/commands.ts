import { flushTracing } from "./observability/tracing.js";
import { readFileSync } from "node:fs";
import { Command, CommanderError, InvalidArgumentError, Option } from "commander";
import { z } from "zod";
import { ConfigError, loadConfig, type Config } from "./config.js";
import { createLogger, routeProcessOutput, type Logger } from "./log.js";
import { isRedisUnavailable } from "./errors.js";
// The app (every domain, its data files, gRPC, the queue) loads only for the commands that use it.
import type { Registry, RunningApp } from "./app.js";
import type { LocalRedis } from "./redis/local-server.js";
import {
  formatMoney,
  MONEY,
  NewAccountInput,
  REGION,
  SENDER_ID,
  UUID,
  type StoredAccount,
} from "./accounts/account.js";
import { APP_ID, NewAppInput } from "./apps/app.js";
import type { Identifier } from "./session/identity.js";
import { IMPORT_COLUMNS } from "./lookup/import-format.js";
import type { ImportMessage } from "./lookup/import-worker.js";
import { Worker } from "node:worker_threads";

/** Young generation of the import's worker (V8's default grows to 48 MB under a fast allocator). */
const IMPORT_YOUNG_GENERATION_MB = 4;

/**
 * Runs `lookup-data import` in a worker thread with a small young generation, so a file of any
 * size is imported in bounded memory; its progress goes to stderr (stdout keeps the JSON answer).
 */
async function importInWorker(file: string): Promise<{ imported: number }> {
  const options = {
    workerData: { file },
    resourceLimits: { maxYoungGenerationSizeMb: IMPORT_YOUNG_GENERATION_MB },
  };
  // From the sources (tests, tsx), the worker registers tsx itself: loader hooks stay in their thread.
  const fromSources = import.meta.url.endsWith(".ts");
  const entry = new URL(`./lookup/import-worker.${fromSources ? "ts" : "js"}`, import.meta.url);
  const worker = fromSources
    ? new Worker(
        `import(${JSON.stringify(import.meta.resolve("tsx/esm/api"))}).then((tsx) => { tsx.register(); return import(${JSON.stringify(entry.href)}); });`,
        { ...options, eval: true },
      )
    : new Worker(entry, options);
  const startedMs = Date.now();
  return new Promise((resolve, reject) => {
    worker.on("message", (m: ImportMessage) => {
      if (m.type === "progress") {
        const seconds = ((Date.now() - startedMs) / 1000).toFixed(1);
        const peakMb = Math.round(process.resourceUsage().maxRSS / 1024);
        const count = m.of === undefined ? `${m.rows} rows` : `${m.rows} of ${m.of} rows`;
        process.stderr.write(
          `ringfence: lookup-data import: ${m.pass} ${count} (${seconds} s, peak ${peakMb} MB)\n`,
        );
      } else if (m.type === "done") {
        resolve({ imported: m.imported });
      } else {
        reject(m.usage ? new UsageError(m.message) : new Error(m.message));
      }
    });
    worker.on("error", reject);
    worker.on("exit", (code) => {
      reject(new Error(`the import stopped (exit ${code})`));
    });
  });
}

/** The version in the package's package.json, beside src/ and dist/ alike. */
function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as {
    version?: unknown;
  };
  return typeof pkg.version === "string" ? pkg.version : "unknown";
}

/** Bad input: one line on stderr, exit 2. */
class UsageError extends Error {}

const program = new Command("ringfence")
  .description("Ringfence: phone verification (V1, deprecated) and session authentication service")
  .addHelpText(
    "after",
    "\nEvery setting comes from the environment; see docs/settings.md. Commands print JSON on stdout.",
  )
  .version(packageVersion(), "-V, --version", "print the version of ringfence")
  .exitOverride()
  .configureOutput({ outputError: () => undefined });

program
  .command("serve")
  .description(
    "run the gRPC server and, unless HTTP_PORT=0, the built-in REST gateway; WORKERS > 1 runs that many processes on the same ports",
  )
  .action(async () => {
    const config = loadConfig();
    const { runPrimary, workerSlot } = await import("./workers.js");
    const slot = workerSlot();
    if (slot !== undefined) {
      await serveWorker(config, slot);
      return;
    }
    const primary = config.WORKERS > 1;
    const log = serveLogger(config, primary ? { pid: process.pid } : undefined);
    // No Redis named or running, outside production: one of its own (docs/development.md#run-it-locally).
    const { startLocalRedis } = await import("./redis/local-server.js");
    const localRedis = await startLocalRedis(config, process.env, log);
    if (primary) {
      const code = await runPrimary(config, log);
      await localRedis?.stop();
      await exitAfterLogs(log, code);
    }
    const { startApp } = await import("./app.js");
    const app = await startApp(config, log).catch(async (err: unknown) => {
      await localRedis?.stop();
      throw err;
    });
    // A stray rejection (say a background read while Redis is away) must not take the server down.
    process.on("unhandledRejection", (err) => {
      log[isRedisUnavailable(err) ? "warn" : "error"]("unhandled rejection", {
        error: err instanceof Error ? `${err.name}: ${err.message}` : String(err),
      });
    });
    for (const signal of ["SIGTERM", "SIGINT"] as const) {
      process.once(signal, () => {
        log.info(`${signal} received: draining`);
        stopAndExit(app, config, log, localRedis);
      });
    }
  });

/**
 * Graceful stop, then the local redis-server if `serve` started one, then exit 0; exit 1 when
 * calls were cut or SHUTDOWN_GRACE_MS ran out.
 */
function stopAndExit(app: RunningApp, config: Config, log: Logger, localRedis?: LocalRedis): void {
  // The grace period bounds everything up to the exit; past it, exit 1 says calls were cut.
  setTimeout(() => {
    log.error("shutdown did not finish within SHUTDOWN_GRACE_MS: exiting");
    void exitAfterLogs(log, 1);
  }, config.SHUTDOWN_GRACE_MS).unref();
  void app
    .stop()
    .then(async (clean) => {
      await localRedis?.stop();
      await flushTracing();
      return clean;
    })
    .then((clean) => exitAfterLogs(log, clean ? 0 : 1));
}

/** The log of `serve` in this process, so that a failed start writes its lines before exiting. */
let serveLog: Logger | undefined;

/**
 * The log of `serve`, which is all it writes on stderr: one JSON object a line, what libraries
 * print and process warnings included (routeProcessOutput), and an uncaught exception too, logged
 * before the process exits 1 as Node would.
 */
function serveLogger(config: Config, context?: Record<string, unknown>): Logger {
  const log = (serveLog = createLogger(config.LOG_LEVEL, undefined, context));
  routeProcessOutput(log);
  process.on("uncaughtException", (err) => {
    log.error("uncaught exception: exiting", {
      error: err instanceof Error ? `${err.name}: ${err.message}` : String(err),
      stack: err instanceof Error ? err.stack : undefined,
    });
    void exitAfterLogs(log, 1);
  });
  return log;
}

/** Exits once the log's last lines are written (they go out asynchronously). */
async function exitAfterLogs(log: Logger, code: number): Promise<never> {
  await log.close?.();
  process.exit(code);
}

/**
 * One worker of `serve` with WORKERS > 1: the same app and shutdown as a single process, its log
 * lines marked with its slot and pid. Signals are taken from the start and more than once: Ctrl-C
 * reaches every process of the group and the primary forwards it too.
 */
async function serveWorker(config: Config, slot: number): Promise<void> {
  const log = serveLogger(config, { worker: slot, pid: process.pid });
  process.on("unhandledRejection", (err) => {
    log[isRedisUnavailable(err) ? "warn" : "error"]("unhandled rejection", {
      error: err instanceof Error ? `${err.name}: ${err.message}` : String(err),
    });
  });
  const [{ startApp }, { answerMetricsRequests, hasSingletonDuties, reportStarted, shareMetrics }] =
    await Promise.all([import("./app.js"), import("./workers.js")]);
  answerMetricsRequests();
  const starting = startApp(config, log, { singletonDuties: hasSingletonDuties(slot), admin: false });
  let signalled = false;
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    process.on(signal, () => {
      if (signalled) return;
      signalled = true;
      log.info(`${signal} received: draining`);
      // A signal during the start drains once the start is done; a failed start exits anyway.
      void starting.then(
        (app) => {
          stopAndExit(app, config, log);
        },
        () => undefined,
      );
    });
  }
  shareMetrics((await starting).registry.metrics.registry);
  reportStarted();
}

const accounts = program.command("accounts").description("manage customer accounts of the V1 phone API");

accounts
  .command("create")
  .description(
    "create an account; prints {customer_uuid, api_key, webhook_secret} (the secrets are shown only once)",
  )
  .requiredOption("--name <name>", "account name")
  .addOption(
    new Option("--balance <amount>", "starting balance, in currency units such as 10.00")
      .argParser(money)
      .default(0, "0.00"),
  )
  .addOption(
    new Option("--spending-limit <amount>", "monthly spending limit, in currency units such as 100.00")
      .argParser(money)
      .default(100_000_000, "100.00"),
  )
  .option("--cnam", "enable caller-name (CNAM) lookups", false)
  .option(
    "--regions <codes>",
    "ISO 3166-1 alpha-2 codes the account may reach, comma separated (default: all)",
    regions,
    [],
  )
  .option("--sender-ids <ids>", "sender IDs the account may use in sender_id, comma separated", commaList, [])
  .action(
    async (opts: {
      name: string;
      balance: number;
      spendingLimit: number;
      cnam: boolean;
      regions: string[];
      senderIds: string[];
    }) => {
      const input = parseOrThrow(NewAccountInput, {
        name: opts.name,
        balanceMicros: opts.balance,
        spendingLimitMicros: opts.spendingLimit,
        features: opts.cnam ? ["cnam"] : [],
        regions: opts.regions,
        senderIds: opts.senderIds,
      });
      await withRegistry(async (r) => {
        const { account, apiKey, webhookSecret } = await r.accounts.create(input);
        print({ customer_uuid: account.customerUuid, api_key: apiKey, webhook_secret: webhookSecret });
      });
    },
  );

for (const [name, status] of [
  ["suspend", "suspended"],
  ["resume", "active"],
] as const) {
  accounts
    .command(`${name} <customer_uuid>`)
    .description(`${name} an account`)
    .action(async (uuid: string) => {
      const id = customerUuid(uuid);
      await withRegistry(async (r) => {
        if (!(await r.accounts.setStatus(id, status))) throw new UsageError(`no account ${id}`);
        print({ customer_uuid: id, status });
      });
    });
}

accounts
  .command("credit <customer_uuid> <amount>")
  .description("add money to an account's balance (a negative amount removes it)")
  .action(async (uuid: string, amount: string) => {
    const id = customerUuid(uuid);
    const micros = money(amount);
    await withRegistry(async (r) => {
      const balance = await r.accounts.credit(id, micros);
      if (balance === undefined) throw new UsageError(`no account ${id}`);
      print({ customer_uuid: id, balance: formatMoney(balance) });
    });
  });

accounts
  .command("template <customer_uuid> <template_id> <language> <text>")
  .description(
    "set an account's message variant for template_id in one language; the text must contain {code}",
  )
  .action(async (uuid: string, templateId: string, language: string, text: string) => {
    const id = customerUuid(uuid);
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(templateId)) {
      throw new UsageError(`template_id "${templateId}" must hold 1 to 64 letters, digits, '_' or '-'`);
    }
    const { isBcp47, validateTemplateText } = await import("./messaging/templates.js");
    if (!isBcp47(language))
      throw new UsageError(`language "${language}" is not a language tag such as fr or pt-BR`);
    const problem = validateTemplateText(text);
    if (problem !== undefined) throw new UsageError(`text ${problem}`);
    await withRegistry(async (r) => {
      if (!(await r.accounts.setTemplate(id, templateId, language, text)))
        throw new UsageError(`no account ${id}`);
      print({ customer_uuid: id, template_id: templateId, language });
    });
  });

accounts
  .command("show <customer_uuid>")
  .description("show an account (never its secrets)")
  .action(async (uuid: string) => {
    const id = customerUuid(uuid);
    await withRegistry(async (r) => {
      const account = await r.accounts.get(id);
      if (account === undefined) throw new UsageError(`no account ${id}`);
      print(showAccount(account));
    });
  });

program
  .command("apps")
  .description("manage apps of the session service")
  .addCommand(
    new Command("create")
      .description("create an app; prints {app_id, management_api_key} (the key is shown only once)")
      .requiredOption("--name <name>", "app name")
      .action(async (opts: { name: string }) => {
        const { name } = parseOrThrow(NewAppInput, { name: opts.name });
        await withRegistry(async (r) => {
          const { app, managementApiKey } = await r.apps.create(name);
          print({ app_id: app.appId, management_api_key: managementApiKey });
        });
      }),
  )
  .addCommand(
    new Command("show")
      .description("print an app: {app_id, name, created_at, scopes, messages: {sms_sent, email_sent}}")
      .argument("<app_id>", "the app's id (app_…)")
      .action(async (appId: string) => {
        await withRegistry(async (r) => {
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

program
  .command("users")
  .description("manage users of an app")
  .addCommand(
    new Command("create")
      .description("create a user holding an email address and/or a phone number; prints {user_id}")
      .requiredOption("--app <app_id>", "the app")
      .option("--email <address>", "email address")
      .option("--phone <number>", "phone number, E.164")
      .option("--password <password>", "initial password (8 to 128 characters), stored as argon2id")
      .action(async (opts: { app: string; email?: string; phone?: string; password?: string }) => {
        const [{ isEmailAddress }, { parseE164 }, { checkPasswordPolicy, hashPassword }] = await Promise.all([
          import("./messaging/email.js"),
          import("./lookup/numbers.js"),
          import("./stepup/password.js"),
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
        await withRegistry(async (r) => {
          if ((await r.apps.get(opts.app)) === undefined) throw new UsageError(`no app ${opts.app}`);
          const hash = opts.password === undefined ? undefined : await hashPassword(opts.password);
          const user = await r.users.create(opts.app, identifiers, hash);
          if (user === undefined)
            throw new UsageError("one of these identifiers already belongs to a user of this app");
          print({ user_id: user.userId });
        });
      }),
  );

program
  .command("keys")
  .description("token signing keys")
  .addCommand(
    new Command("rotate")
      .description(
        "add a signing key that new tokens use; the old one stays in the JWKS until its tokens expire",
      )
      .action(async () => {
        await withRegistry(async (r) => {
          print(await r.signingKeys.rotate());
        });
      }),
  );

program
  .command("lookup-data")
  .description("operator data for lookups")
  .addCommand(
    new Command("import")
      .argument("<file>", `CSV file with a header row of: ${IMPORT_COLUMNS.join(", ")}`)
      .description(
        "import ported numbers, caller names, disposable-number and line-type overrides; an empty cell changes nothing, and one bad row rejects the file; prints {imported: rows}, progress on stderr",
      )
      .action(async (file: string) => {
        const { imported } = await importInWorker(file);
        print({ imported });
      }),
  );

// ---- fraud: the engine's policy and reports (docs/fraud.md) ---------------------------------
// `ringfence fraud simulate` (src/fraud/simulate.ts) registers on `fraud` too.

/** A fraud tenant as the commands name it: an account (V1, V2 sends) or an app (session codes). */
interface FraudTenantOptions {
  account?: string;
  app?: string;
}

const FRAUD_TENANT_HELP =
  "\nThe tenant is an account (--account UUID: its V1 and V2 sends) or an app (--app APP_ID: its login and step-up codes).";

function fraudTenantOptions(cmd: Command): Command {
  return cmd
    .option("--account <uuid>", "the account (customer uuid) whose V1 and V2 sends are judged")
    .option("--app <app_id>", "the app whose login and step-up codes are judged")
    .addHelpText("after", FRAUD_TENANT_HELP);
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
/** Prints one page of a tenant's fraud report, as the V2 API answers it (snake_case). */
async function printReport(
  opts: FraudTenantOptions,
  read: (insights: import("./fraud/insights.js").FraudInsights, tenant: string) => Promise<object>,
): Promise<void> {
  await withFraudTenant(opts, undefined, async (r, tenant, f) => {
    print(
      snakeCase(await read(new f.FraudInsights(r.redis, r.fraud.keys, r.fraud.rules, r.secrets), tenant.id)),
    );
  });
}

async function withFraudTenant(
  opts: FraudTenantOptions,
  argument: string | undefined,
  fn: (
    r: Registry,
    tenant: { kind: "account" | "app"; id: string },
    fraud: typeof import("./fraud/policy.js") & typeof import("./fraud/insights.js"),
  ) => Promise<void>,
): Promise<void> {
  const tenant = fraudTenant(opts);
  const fraud = { ...(await import("./fraud/policy.js")), ...(await import("./fraud/insights.js")) };
  try {
    await withRegistry(async (r) => {
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

const fraud = program
  .command("fraud")
  .description(
    "steer and read the fraud engine: modes, geo permissions, trusted numbers, decisions, insights, and simulate to try a policy on a traffic file",
  )
  .addHelpText(
    "after",
    "\nEvery message that would carry a code is judged before anything is charged or sent; see docs/fraud.md.",
  );

fraud.addCommand(
  fraudTenantOptions(
    new Command("mode")
      .description(
        "set a tenant's mode: enforce (the default: blocks), shadow (sends, and records would_block), off; prints {account|app, mode}",
      )
      .argument("<mode>", "enforce, shadow or off"),
  ).action(async (mode: string, opts: FraudTenantOptions) => {
    await withFraudTenant(opts, "mode", async (r, tenant, f) => {
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
    await withFraudTenant(opts, undefined, async (r, tenant, f) => {
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
    fraudTenantOptions(
      new Command(name)
        .description(
          `${trusted ? "trust" : "no longer trust"} a number or a prefix; prints {account|app, number|prefix, trusted, changed}`,
        )
        .option("--number <e164>", "an E.164 phone number, such as +33612345678")
        .option("--prefix <prefix>", "a number prefix: '+' then 1 to 15 digits, such as +3361234"),
    ).action(async (opts: FraudTenantOptions & { number?: string; prefix?: string }) => {
      if ((opts.number === undefined) === (opts.prefix === undefined))
        throw new UsageError("give exactly one of --number E164 and --prefix +DIGITS");
      const entry = opts.number !== undefined ? { number: opts.number } : { prefix: opts.prefix ?? "" };
      await withFraudTenant(opts, undefined, async (r, tenant, f) => {
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
  fraudTenantOptions(
    new Command("decisions")
      .description(
        "print a tenant's block and would_block decisions, newest first, a page at a time: {decisions: [{id, created_at, api, country, network?, prefix, phone_number, action, rule, detail}], next_page_token?}",
      )
      .option("--since <time>", "only decisions at or after this RFC 3339 time, such as 2026-01-02T00:00:00Z")
      .option("--limit <n>", "at most this many, 1 to 1000", "100")
      .option("--page-token <token>", "the next_page_token of the previous page, for the page after it"),
  ).action(async (opts: FraudTenantOptions & { since?: string; limit: string; pageToken?: string }) => {
    await printReport(opts, (insights, tenant) =>
      insights.decisions(tenant, { since: opts.since, limit: opts.limit, pageToken: opts.pageToken }),
    );
  }),
);

fraud.addCommand(
  new Command("insights")
    .description(
      "print an account's sends, conversions and blocks per destination, the most sent first, a page at a time, as GET /v2/insights/verifications: {since, until, group_by, groups: [{key, sent, verified, conversion_rate, blocked}], next_page_token?}",
    )
    .requiredOption("--account <uuid>", "the account (customer uuid)")
    .option("--group-by <kind>", "country, network or prefix (default: country, or the page token's)")
    .option("--since <time>", "RFC 3339 start (default: 24 hours before --until); its whole UTC day counts")
    .option("--until <time>", "RFC 3339 end (default: now); its whole UTC day counts")
    .option("--limit <n>", "at most this many groups, 1 to 1000", "100")
    .option("--page-token <token>", "the next_page_token of the previous page, for the page after it")
    .action(
      async (opts: {
        account: string;
        groupBy?: string;
        since?: string;
        until?: string;
        limit: string;
        pageToken?: string;
      }) => {
        await printReport({ account: opts.account }, (insights, tenant) =>
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

// ---- end of fraud ------------------------------------------------------------------------------

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
  )
  .action(async (opts: { input: string; mode: "enforce" | "shadow" }) => {
    const config = loadConfig();
    const { parseTraffic, simulate, simulationPrefix, TrafficError } = await import("./fraud/simulate.js");
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
    const { connectRedis, createRedis, reportRedisErrors } = await import("./redis/client.js");
    const redis = createRedis(config);
    reportRedisErrors(redis, createLogger("warn"), "main");
    await connectRedis(redis);
    try {
      const prefix = simulationPrefix(config.REDIS_KEY_PREFIX);
      print(await simulate(traffic, { redis, prefix, config, mode: opts.mode }));
    } finally {
      await redis.quit().catch(() => undefined);
    }
  });

function money(v: string): number {
  const r = MONEY.safeParse(v);
  if (!r.success) throw new InvalidArgumentError(`"${v}" is not an amount such as 10.00`);
  return r.data;
}

function regions(v: string): string[] {
  const codes = v.split(",").map((c) => c.trim().toUpperCase());
  for (const c of codes) {
    if (!REGION.safeParse(c).success)
      throw new InvalidArgumentError(`"${c}" is not an ISO 3166-1 alpha-2 code`);
  }
  return codes;
}

function commaList(v: string): string[] {
  const items = v.split(",").map((s) => s.trim());
  for (const s of items) {
    if (!SENDER_ID.safeParse(s).success) throw new InvalidArgumentError(`"${s}" is not a sender ID`);
  }
  return items;
}

function customerUuid(v: string): string {
  if (!UUID.safeParse(v).success) throw new UsageError(`"${v}" is not a customer uuid`);
  return v.toLowerCase();
}

function parseOrThrow<T>(schema: z.ZodType<T>, value: unknown): T {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  throw new UsageError(`${issue?.path.join(".") ?? "input"} ${issue?.message ?? "is invalid"}`);
}

function showAccount(a: StoredAccount) {
  return {
    customer_uuid: a.customerUuid,
    name: a.name,
    status: a.status,
    balance: formatMoney(a.balanceMicros),
    spending_limit: formatMoney(a.spendingLimitMicros),
    features: a.features,
    regions: a.regions,
    sender_ids: a.senderIds,
    templates: a.templates,
    created_at: a.createdAt,
  };
}

async function withRegistry(fn: (r: Registry) => Promise<void>): Promise<void> {
  const config = loadConfig();
  const { openRegistry } = await import("./app.js");
  const registry = await openRegistry(config, createLogger("warn"));
  try {
    await fn(registry);
  } finally {
    await registry.redis.quit().catch(() => undefined);
  }
}

function print(value: unknown): void {
  process.stdout.write(JSON.stringify(value) + "\n");
}

// Subcommands made with `new Command()` do not inherit these: every command exits 2 on bad input.
(function quiet(cmd: Command): void {
  for (const sub of cmd.commands) {
    sub.exitOverride().configureOutput({ outputError: () => undefined });
    quiet(sub);
  }
})(program);

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError) {
    if (err.exitCode === 0) process.exit(0);
    process.stderr.write(`ringfence: ${err.message.replace(/^error: /, "")}\n`);
    process.exit(2);
  }
  const usage = err instanceof UsageError || err instanceof ConfigError;
  // The log's lines first, so that this one comes last, as it happened.
  await serveLog?.close?.();
  process.stderr.write(`ringfence: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(usage ? 2 : 1);
}
