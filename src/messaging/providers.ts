import type { Logger } from "../log.js";
import { parseHttpUrl } from "../net/http-url.js";
import { HttpSmsProvider } from "./http-provider.js";
import { LogSmsProvider } from "./log-provider.js";
import type { SmsProvider } from "./provider.js";
import { SmppSmsProvider } from "./smpp-provider.js";
import { gateSends, type ShutdownGate } from "./shutdown.js";

/** The channels a delivery provider serves (docs/routing.md#providers). */
export const CHANNELS = ["sms", "voice", "whatsapp"] as const;
export type Channel = (typeof CHANNELS)[number];

/** One entry of DELIVERY_PROVIDERS, checked (docs/routing.md#providers). */
export interface ProviderSpec {
  name: string;
  channel: Channel;
  /** `smpp` (an `smpp://` URL), `http` (an http(s) URL) or `log` (development only, the back-compat `SMS_PROVIDER=log`). */
  kind: "smpp" | "http" | "log";
  url: string;
  /** What one message costs the operator, by country, with `default`. */
  cost: Record<string, number>;
  timeoutMs: number;
  /** The token its delivery reports carry (http providers); undefined: it sends none. */
  statusToken?: string | undefined;
  /** Names its message ids were stored under before (the back-compat provider: `smpp`, `http`). */
  formerNames?: readonly string[];
}

const NAME = /^[a-z0-9-]{1,32}$/;
const COUNTRY_OR_DEFAULT = /^(default|[A-Z]{2})$/;
const FIELDS = new Set(["name", "channel", "url", "cost", "timeout_ms", "status_token"]);

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
  return raw.map((entry: unknown, i) => {
    const spec = parseEntry(entry, i);
    if (seen.has(spec.name)) throw new Error(`entry ${i} (${spec.name}): name is used by an earlier entry`);
    seen.add(spec.name);
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
  if (channel !== "sms") {
    throw new Error(`${at("channel", name)} ${channel} is not served by this version (sms only)`);
  }
  const url = e.url;
  const kind = typeof url === "string" ? urlKind(url) : undefined;
  if (typeof url !== "string" || kind === undefined) {
    throw new Error(`${at("url", name)} must be smpp://system_id:password@host:port or an http(s) URL`);
  }
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
  const token = e.status_token;
  if (token !== undefined && (typeof token !== "string" || token.length < 16 || token.length > 256)) {
    throw new Error(`${at("status_token", name)} must be a string of 16 to 256 characters`);
  }
  if (token !== undefined && kind !== "http") {
    throw new Error(`${at("status_token", name)} is for http providers (SMPP reports come on the bind)`);
  }
  // An entry named `default` takes over from SMS_PROVIDER: the message ids that one stored under
  // its protocol's name before providers had names are still found.
  const formerNames = name === "default" ? [kind] : undefined;
  return {
    name,
    channel: "sms",
    kind,
    url,
    cost,
    timeoutMs,
    statusToken: token,
    ...(formerNames && { formerNames }),
  };
}

function urlKind(url: string): "smpp" | "http" | undefined {
  if (parseHttpUrl(url) !== undefined) return "http";
  if (!URL.canParse(url)) return undefined;
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
      return new HttpSmsProvider(spec.url, { timeoutMs: spec.timeoutMs, name: spec.name });
    case "smpp":
      return new SmppSmsProvider(spec.url, {
        log: o.log,
        name: spec.name,
        submitTimeoutMs: spec.timeoutMs,
        ...(o.enquireLinkMs === undefined ? {} : { enquireLinkMs: o.enquireLinkMs }),
      });
  }
}
