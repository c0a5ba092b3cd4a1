import { isSupportedCountry } from "libphonenumber-js/max";
import { quote } from "../errors.js";
import { parseE164 } from "../phone/e164.js";
import type { RedisClient } from "../redis/client.js";
import { FRAUD_MODES, GEO_PERMISSIONS, type FraudMode, type GeoPermission } from "./engine.js";
import type { FraudKeys } from "./keys.js";

/**
 * Input the fraud policy or its reports refuse (an unknown country, a malformed prefix, a bad
 * `since`, ...): `field` names what was wrong as the caller spelled it, `detail` quotes the value
 * and says why. Nothing was written.
 */
export class FraudInputError extends Error {
  override readonly name = "FraudInputError";
  constructor(
    readonly field: string,
    readonly detail: string,
  ) {
    super(`${field}: ${detail}`);
  }
}

/** A tenant's policy as engine.lua reads it (docs/fraud.md#modes-geo-permissions-and-trusted-numbers). */
export interface FraudPolicyView {
  mode: FraudMode;
  /** The countries with a permission other than the default `allow`. */
  geo: Record<string, GeoPermission>;
  /** Trusted numbers and prefixes (`+` and digits), sorted. */
  trusted: string[];
}

/** `+` then 1 to 15 digits: a prefix of E.164 numbers. */
const PREFIX = /^\+\d{1,15}$/;

export function parseMode(value: string): FraudMode {
  if ((FRAUD_MODES as readonly string[]).includes(value)) return value as FraudMode;
  throw new FraudInputError("mode", `${quote(value)} is not one of ${FRAUD_MODES.join(", ")}`);
}

export function parseGeoPermission(value: string): GeoPermission {
  if ((GEO_PERMISSIONS as readonly string[]).includes(value)) return value as GeoPermission;
  throw new FraudInputError("mode", `${quote(value)} is not one of ${GEO_PERMISSIONS.join(", ")}`);
}

/** An ISO 3166-1 alpha-2 country that libphonenumber knows, upper-cased (`fr` → `FR`). */
export function parseCountry(value: string): string {
  const cc = value.toUpperCase();
  if (/^[A-Z]{2}$/.test(cc) && isSupportedCountry(cc)) return cc;
  throw new FraudInputError("country", `${quote(value)} is not an ISO 3166-1 alpha-2 country code`);
}

/** A trusted number: a valid E.164 number, as the engine sees it. */
export function parseTrustedNumber(value: string): string {
  const parsed = parseE164(value);
  if (parsed === undefined)
    throw new FraudInputError("number", `${quote(value)} is not a valid E.164 number`);
  return parsed.e164;
}

/** A trusted prefix: `+` then 1 to 15 digits. */
export function parseTrustedPrefix(value: string): string {
  if (PREFIX.test(value)) return value;
  throw new FraudInputError("prefix", `${quote(value)} is not '+' followed by 1 to 15 digits`);
}

/**
 * A tenant's fraud policy: its mode, its geo permissions and its trusted numbers and prefixes, in
 * the `fraud:{T}:policy` hash the engine reads on every send (`mode`, `g:<CC>`, `t:<+digits>`).
 * Values are checked before anything is written: bad input changes nothing. A default (mode
 * `enforce`, permission `allow`) is written as the field's absence, as the engine reads it.
 */
export class FraudPolicy {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: FraudKeys,
  ) {}

  async get(tenant: string): Promise<FraudPolicyView> {
    const raw = await this.redis.hgetall(this.keys.policy(tenant));
    const geo: Record<string, GeoPermission> = {};
    const trusted: string[] = [];
    for (const [field, value] of Object.entries(raw)) {
      if (field.startsWith("g:")) geo[field.slice(2)] = value as GeoPermission;
      else if (field.startsWith("t:")) trusted.push(field.slice(2));
    }
    return { mode: (raw.mode as FraudMode | undefined) ?? "enforce", geo, trusted: trusted.sort() };
  }

  async setMode(tenant: string, mode: string): Promise<FraudMode> {
    const m = parseMode(mode);
    const key = this.keys.policy(tenant);
    if (m === "enforce") await this.redis.hdel(key, "mode");
    else await this.redis.hset(key, "mode", m);
    return m;
  }

  async setGeo(
    tenant: string,
    country: string,
    permission: string,
  ): Promise<{ country: string; mode: GeoPermission }> {
    const cc = parseCountry(country);
    const p = parseGeoPermission(permission);
    const key = this.keys.policy(tenant);
    if (p === "allow") await this.redis.hdel(key, `g:${cc}`);
    else await this.redis.hset(key, `g:${cc}`, p);
    return { country: cc, mode: p };
  }

  /** Trusts (or no longer trusts) a number or a prefix; `changed` says whether the policy changed. */
  async setTrusted(
    tenant: string,
    entry: { number: string } | { prefix: string },
    trusted: boolean,
  ): Promise<{ entry: string; changed: boolean }> {
    const value = "number" in entry ? parseTrustedNumber(entry.number) : parseTrustedPrefix(entry.prefix);
    const key = this.keys.policy(tenant);
    const changed = trusted
      ? await this.redis.hset(key, `t:${value}`, "1")
      : await this.redis.hdel(key, `t:${value}`);
    return { entry: value, changed: changed === 1 };
  }
}
