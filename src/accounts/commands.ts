/** `ringfence accounts`: the customer accounts of the V1 phone API (docs/cli.md). */
import { Option, type Command } from "commander";
import {
  ACCOUNT_CHANNELS,
  formatMoney,
  MONEY,
  NewAccountInput,
  REGION,
  SENDER_ID,
  UUID,
  type AccountChannel,
  type StoredAccount,
} from "./account.js";
import type { AccountStore } from "./store.js";
import {
  argParser,
  commaSeparated,
  documented,
  parseOrThrow,
  print,
  UsageError,
  type OpenStores,
} from "../command/command.js";

/** What the account commands use of the shared stores. */
export interface AccountCommandNeeds {
  accounts: AccountStore;
}

const money = argParser(MONEY, "an amount such as 10.00");
const region = argParser(REGION, "an ISO 3166-1 alpha-2 code");
const regions = commaSeparated((code) => region(code.toUpperCase()));
const senderIds = commaSeparated(argParser(SENDER_ID, "a sender ID"));

/** A customer uuid as an argument or option names it, lower-cased as the account is stored. */
export function customerUuid(v: string): string {
  if (!UUID.safeParse(v).success) throw new UsageError(`"${v}" is not a customer uuid`);
  return v.toLowerCase();
}

export function accountsCommands(program: Command, open: OpenStores<AccountCommandNeeds>): void {
  const accounts = program.command("accounts").description("manage customer accounts of the V1 phone API");

  documented(
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
      .option(
        "--sender-ids <ids>",
        "sender IDs the account may use in sender_id, comma separated",
        senderIds,
        [],
      ),
    "For example `ringfence accounts create --name Acme --balance 10.00 --regions FR,US --sender-ids Acme`.",
  ).action(
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
      await open(async (r) => {
        const { account, apiKey, webhookSecret } = await r.accounts.create(input);
        print({ customer_uuid: account.customerUuid, api_key: apiKey, webhook_secret: webhookSecret });
      });
    },
  );

  for (const [name, status, note] of [
    [
      "suspend",
      "suspended",
      "Prints {customer_uuid, status}. A suspended account gets `suspended_account`, 400 under V1 and 403 under V2 (within a second on every instance).",
    ],
    ["resume", "active", "Prints {customer_uuid, status}, the account `active` again."],
  ] as const) {
    documented(accounts.command(`${name} <customer_uuid>`).description(`${name} an account`), note).action(
      async (uuid: string) => {
        const id = customerUuid(uuid);
        await open(async (r) => {
          if (!(await r.accounts.setStatus(id, status))) throw new UsageError(`no account ${id}`);
          print({ customer_uuid: id, status });
        });
      },
    );
  }

  documented(
    accounts
      .command("credit <customer_uuid> <amount>")
      .description("add money to an account's balance (a negative amount removes it)"),
    "The amount is in currency units such as 10.00; prints {customer_uuid, balance}, the new balance.",
  ).action(async (uuid: string, amount: string) => {
    const id = customerUuid(uuid);
    const micros = money(amount);
    await open(async (r) => {
      const balance = await r.accounts.credit(id, micros);
      if (balance === undefined) throw new UsageError(`no account ${id}`);
      print({ customer_uuid: id, balance: formatMoney(balance) });
    });
  });

  documented(
    accounts
      .command("template <customer_uuid> <template_id> <language> <text>")
      .description(
        "set an account's message variant for template_id in one language; the text must contain {code}",
      ),
    "The text may hold {minutes} too; prints {customer_uuid, template_id, language}.",
  ).action(async (uuid: string, templateId: string, language: string, text: string) => {
    const id = customerUuid(uuid);
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(templateId)) {
      throw new UsageError(`template_id "${templateId}" must hold 1 to 64 letters, digits, '_' or '-'`);
    }
    const { isBcp47, validateTemplateText } = await import("../messaging/templates.js");
    if (!isBcp47(language))
      throw new UsageError(`language "${language}" is not a language tag such as fr or pt-BR`);
    const problem = validateTemplateText(text);
    if (problem !== undefined) throw new UsageError(`text ${problem}`);
    await open(async (r) => {
      if (!(await r.accounts.setTemplate(id, templateId, language, text)))
        throw new UsageError(`no account ${id}`);
      print({ customer_uuid: id, template_id: templateId, language });
    });
  });

  documented(
    accounts
      .command("channels <customer_uuid> <channels>")
      .description(
        `set the channels V2 may send an account's codes through, in fallback order: ${ACCOUNT_CHANNELS.join(", ")}, comma separated`,
      ),
    "For example `ringfence accounts channels <uuid> whatsapp,sms,voice`: a V2 verification starts on its `preferred_channel` when it is one of them (else on the first), then falls back to the others in this order. `email` serves email targets. Prints {customer_uuid, channels}. An account that never set them has `sms`.",
  ).action(async (uuid: string, list: string) => {
    const id = customerUuid(uuid);
    const channels = accountChannels(list);
    await open(async (r) => {
      if (!(await r.accounts.setChannels(id, channels))) throw new UsageError(`no account ${id}`);
      print({ customer_uuid: id, channels });
    });
  });

  documented(
    accounts.command("show <customer_uuid>").description("show an account (never its secrets)"),
    "Prints {customer_uuid, name, status, balance, spending_limit, features, regions, sender_ids, templates, channels, created_at}.",
  ).action(async (uuid: string) => {
    const id = customerUuid(uuid);
    await open(async (r) => {
      const account = await r.accounts.get(id);
      if (account === undefined) throw new UsageError(`no account ${id}`);
      print(showAccount(account));
    });
  });
}

/** A comma list of channels: each known, none twice, at least one. */
function accountChannels(list: string): AccountChannel[] {
  const names = list.split(",").map((c) => c.trim().toLowerCase());
  const out: AccountChannel[] = [];
  for (const name of names) {
    if (!(ACCOUNT_CHANNELS as readonly string[]).includes(name)) {
      throw new UsageError(`channel "${name}" is not one of ${ACCOUNT_CHANNELS.join(", ")}`);
    }
    if (out.includes(name as AccountChannel)) throw new UsageError(`channel "${name}" is named twice`);
    out.push(name as AccountChannel);
  }
  return out;
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
    channels: a.channels,
    created_at: a.createdAt,
  };
}
