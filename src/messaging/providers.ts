import { clip } from "../errors.js";
import type { Logger } from "../log.js";
import { parseHttpUrl } from "../net/http-url.js";
import { HttpSmsProvider } from "./http-provider.js";
import { LogSmsProvider } from "./log-provider.js";
import type { SmsProvider } from "./provider.js";
import { SmppSmsProvider } from "./smpp-provider.js";
import { gateSends, type ShutdownGate } from "./shutdown.js";
import { VoiceProvider } from "./voice-provider.js";
import { WhatsAppProvider, type WhatsAppAccount } from "./whatsapp-provider.js";

/** The channels a delivery provider serves (docs/routing.md#providers). */
export const CHANNELS = ["sms", "voice", "whatsapp"] as const;
export type Channel = (typeof CHANNELS)[number];

/** One entry of DELIVERY_PROVIDERS, checked (docs/routing.md#providers). */
export interface ProviderSpec {
  name: string;
  channel: Channel;
  /**
   * `smpp` (an `smpp://` URL), `http` (an http(s) URL: an sms or voice provider), `graph` (the
   * WhatsApp Cloud API) or `log` (development only, the back-compat `SMS_PROVIDER=log`).
   */
  kind: "smpp" | "http" | "graph" | "log";
  url: string;
  /** What one message costs the operator, by country, with `default`. */
  cost: Record<string, number>;
  timeoutMs: number;
  /** The token its delivery reports carry (http providers); undefined: it sends none. */
  statusToken?: string | undefined;
  /** Names its message ids were stored under before (the back-compat provider: `smpp`, `http`). */
  formerNames?: readonly string[];
  /** A WhatsApp entry's account (kind `graph`), whose statuses come on the WhatsApp webhook. */
  whatsapp?: WhatsAppAccount;
}

const NAME = /^[a-z0-9-]{1,32}$/;
const COUNTRY_OR_DEFAULT = /^(default|[A-Z]{2})$/;
const COMMON_FIELDS = ["name", "channel", "url", "cost", "timeout_ms"];
const WHATSAPP_FIELDS = [
  "phone_number_id",
  "token",
  "template",
  "app_secret",
  "verify_token",
  "languages",
  "default_language",
];
/** The fields each channel's entries take. */
const FIELDS_OF: Readonly<Record<Channel, ReadonlySet<string>>> = {
  sms: new Set([...COMMON_FIELDS, "status_token"]),
  voice: new Set([...COMMON_FIELDS, "status_token"]),
  whatsapp: new Set([...COMMON_FIELDS, ...WHATSAPP_FIELDS]),
};
const FIELDS = new Set(Object.values(FIELDS_OF).flatMap((fields) => [...fields]));

/**
 * DELIVERY_PROVIDERS as a list of specs; throws an Error of one line naming the entry and the field
 * that is wrong (never quoting a URL's password or a token).
 */
export function parseDeliveryProviders(json: string): ProviderSpec[] {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    throw new Error("must be a JSON array of providers");
  }
  if (!Array.isArray(raw) || raw.length === 0)
    throw new Error("must be a JSON array of at least one provider");
  const seen = new Set<string>();
  const numbers = new Set<string>();
  return raw.map((entry: unknown, i) => {
    const spec = parseEntry(entry, i);
    if (seen.has(spec.name)) throw new Error(`entry ${i} (${spec.name}): name is used by an earlier entry`);
    seen.add(spec.name);
    // Its status webhooks find their entry by the phone number's id.
    const number = spec.whatsapp?.phoneNumberId;
    if (number !== undefined && numbers.has(number)) {
      throw new Error(`entry ${i} (${spec.name}): phone_number_id is used by an earlier entry`);
    }
    if (number !== undefined) numbers.add(number);
    return spec;
  });
}

function parseEntry(entry: unknown, i: number): ProviderSpec {
  const at = (field: string, name?: string) =>
    `entry ${i}${name === undefined ? "" : ` (${name})`}: ${field}`;
  if (typeof entry !== "object" || entry === null || Array.isArray(entry)) {
    throw new Error(`entry ${i}: must be an object {name, channel, url, cost?, timeout_ms?, status_token?}`);
  }
  const e = entry as Record<string, unknown>;
  const name = e.name;
  if (typeof name !== "string" || !NAME.test(name)) {
    throw new Error(`${at("name")} must be 1 to 32 of a-z, 0-9 and -`);
  }
  const unknown = Object.keys(e).find((k) => !FIELDS.has(k));
  if (unknown !== undefined) throw new Error(`${at(unknown, name)} is not a field of a provider`);
  const channel = e.channel ?? "sms";
  if (typeof channel !== "string" || !(CHANNELS as readonly string[]).includes(channel)) {
    throw new Error(`${at("channel", name)} must be one of ${CHANNELS.join(", ")}`);
  }
  const served = channel as Channel;
  const foreign = Object.keys(e).find((k) => !FIELDS_OF[served].has(k));
  if (foreign === "status_token") {
    throw new Error(`${at(foreign, name)} is not for whatsapp providers: their statuses come on the webhook`);
  }
  if (foreign !== undefined) throw new Error(`${at(foreign, name)} is for whatsapp providers only`);
  const url = e.url;
  const kind = typeof url === "string" ? urlKind(url, served) : undefined;
  if (typeof url !== "string" || kind === undefined)
    throw new Error(`${at("url", name)} ${URL_RULE[served]}`);
  const cost = parseCost(e.cost, at("cost", name));
  const fallback = kind === "smpp" ? 10_000 : 5_000;
  const timeoutMs = e.timeout_ms ?? fallback;
  if (
    typeof timeoutMs !== "number" ||
    !Number.isInteger(timeoutMs) ||
    timeoutMs < 100 ||
    timeoutMs > 60_000
  ) {
    throw new Error(`${at("timeout_ms", name)} must be a whole number of milliseconds from 100 to 60000`);
  }
  if (kind === "graph") {
    const whatsapp = parseWhatsApp(e, (field) => at(field, name));
    return { name, channel: served, kind, url, cost, timeoutMs, whatsapp };
  }
  const token = e.status_token;
  if (token !== undefined && (typeof token !== "string" || token.length < 16 || token.length > 256)) {
    throw new Error(`${at("status_token", name)} must be a string of 16 to 256 characters`);
  }
  if (token !== undefined && kind !== "http") {
    throw new Error(`${at("status_token", name)} is for http providers (SMPP reports come on the bind)`);
  }
  // An entry named `default` takes over from SMS_PROVIDER: the message ids that one stored under
  // its protocol's name before providers had names are still found.
  const formerNames = name === "default" && served === "sms" ? [kind] : undefined;
  return {
    name,
    channel: served,
    kind,
    url,
    cost,
    timeoutMs,
    statusToken: token,
    ...(formerNames && { formerNames }),
  };
}

/** What each channel's `url` must be, as a refusal says it. */
const URL_RULE: Readonly<Record<Channel, string>> = {
  sms: "must be smpp://system_id:password@host:port or an http(s) URL",
  voice: "must be an http(s) URL",
  whatsapp: "must be the Graph API's http(s) base URL, such as https://graph.facebook.com/v21.0",
};

const DIGITS = /^[0-9]{1,32}$/;
const TEMPLATE = /^[a-z0-9_]{1,512}$/;
const LANGUAGE_SUBTAG = /^[a-z]{2,3}$/;
/** Meta's code of a template language: `fr`, `pt_BR`, `zh_HK`. */
const META_LANGUAGE = /^[a-z]{2,3}(_[A-Z]{2})?$/;

/** The WhatsApp fields of an entry; `at` names the field in a refusal, which never quotes a secret. */
function parseWhatsApp(e: Record<string, unknown>, at: (field: string) => string): WhatsAppAccount {
  const phoneNumberId = e.phone_number_id;
  if (typeof phoneNumberId !== "string" || !DIGITS.test(phoneNumberId)) {
    // A JSON number would lose the last digits of a long id.
    throw new Error(`${at("phone_number_id")} must be the phone number's id, its digits as a JSON string`);
  }
  const token = secret(e.token, 4096);
  if (token === undefined || /\s/.test(token)) {
    throw new Error(`${at("token")} must be the access token, 16 to 4096 characters without spaces`);
  }
  const template = e.template;
  if (typeof template !== "string" || !TEMPLATE.test(template)) {
    throw new Error(`${at("template")} must be the template's name, 1 to 512 of a-z, 0-9 and _`);
  }
  const appSecret = secret(e.app_secret, 256);
  if (appSecret === undefined)
    throw new Error(`${at("app_secret")} must be a string of 16 to 256 characters`);
  const verifyToken = secret(e.verify_token, 256);
  if (verifyToken === undefined) {
    throw new Error(`${at("verify_token")} must be a string of 16 to 256 characters`);
  }
  const defaultLanguage = e.default_language ?? "en_US";
  if (typeof defaultLanguage !== "string" || !META_LANGUAGE.test(defaultLanguage)) {
    throw new Error(`${at("default_language")} must be Meta's code of a template language, such as en_US`);
  }
  const languages = parseLanguages(e.languages, at("languages"));
  return { phoneNumberId, token, template, appSecret, verifyToken, languages, defaultLanguage };
}

/** A secret of 16 to `max` characters, or undefined when `value` is not one. */
function secret(value: unknown, max: number): string | undefined {
  return typeof value === "string" && value.length >= 16 && value.length <= max ? value : undefined;
}

function parseLanguages(value: unknown, where: string): Record<string, string> {
  if (value === undefined) return {};
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new Error(`${where} must be an object such as {"fr": "fr", "pt": "pt_BR"}`);
  }
  const languages: Record<string, string> = {};
  for (const [language, code] of Object.entries(value)) {
    if (!LANGUAGE_SUBTAG.test(language)) {
      throw new Error(`${where}: ${clip(language)} is not a language subtag such as fr`);
    }
    if (typeof code !== "string" || !META_LANGUAGE.test(code)) {
      throw new Error(
        `${where}: ${language} must be Meta's code of a template language, such as fr or pt_BR`,
      );
    }
    languages[language] = code;
  }
  return languages;
}

/** The kind of provider `url` reaches on `channel`, or undefined when the channel takes no such URL. */
function urlKind(url: string, channel: Channel): ProviderSpec["kind"] | undefined {
  if (parseHttpUrl(url) !== undefined) return channel === "whatsapp" ? "graph" : "http";
  if (channel !== "sms" || !URL.canParse(url)) return undefined;
  const u = new URL(url);
  return u.protocol === "smpp:" && u.hostname !== "" && u.username !== "" && u.port !== ""
    ? "smpp"
    : undefined;
}

function parseCost(value: unknown, where: string): Record<string, number> {
  if (value === undefined) return {};
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new Error(`${where} must be an object such as {"default": 0.04, "FR": 0.031}`);
  }
  const cost: Record<string, number> = {};
  for (const [key, price] of Object.entries(value)) {
    if (!COUNTRY_OR_DEFAULT.test(key)) throw new Error(`${where}: ${key} is not a country code or default`);
    if (typeof price !== "number" || !Number.isFinite(price) || price < 0 || price > 100) {
      throw new Error(`${where}: ${key} must be a number from 0 to 100`);
    }
    cost[key] = price;
  }
  return cost;
}

/** The cost of one message of `spec` to `country` (the `cost` strategy); unknown: Infinity, tried last. */
export function costOf(spec: Pick<ProviderSpec, "cost">, country: string): number {
  return spec.cost[country] ?? spec.cost.default ?? Number.POSITIVE_INFINITY;
}

/** A provider of the process: its spec and the open connection or client that sends. */
export interface DeliveryProvider extends SmsProvider {
  readonly spec: ProviderSpec;
}

/** Options of the SMPP providers the settings do not carry per provider. */
export interface OpenOptions {
  log: Logger;
  gate?: ShutdownGate | undefined;
  enquireLinkMs?: number | undefined;
}

/** Opens every provider of `specs` (SMPP ones start binding now). */
export function openProviders(specs: readonly ProviderSpec[], o: OpenOptions): DeliveryProvider[] {
  return specs.map((spec) => {
    const provider = openOne(spec, o);
    return Object.assign(gateSends(provider, provider.longestSendMs, o.gate), { spec });
  });
}

function openOne(spec: ProviderSpec, o: OpenOptions): SmsProvider {
  switch (spec.kind) {
    case "log":
      return new LogSmsProvider(o.log, spec.name);
    case "http":
      return spec.channel === "voice"
        ? new VoiceProvider(spec.url, { timeoutMs: spec.timeoutMs, name: spec.name })
        : new HttpSmsProvider(spec.url, { timeoutMs: spec.timeoutMs, name: spec.name });
    case "graph": {
      const { whatsapp } = spec;
      if (whatsapp === undefined) throw new Error(`${spec.name}: a WhatsApp provider without its account`);
      return new WhatsAppProvider({ ...spec, whatsapp });
    }
    case "smpp":
      return new SmppSmsProvider(spec.url, {
        log: o.log,
        name: spec.name,
        submitTimeoutMs: spec.timeoutMs,
        ...(o.enquireLinkMs === undefined ? {} : { enquireLinkMs: o.enquireLinkMs }),
      });
  }
}
