/**
 * The calls the bench makes, built the same way by the load drivers and by the sequential run
 * that counts Redis commands and round trips.
 */

import { getExampleNumber, parsePhoneNumberFromString } from "libphonenumber-js/max";
import examples from "libphonenumber-js/mobile/examples";

/** Everything the set-up made through the service, as a real operator and customer would. */
export interface Fixture {
  customerUuid: string;
  apiKey: string;
  clientId: string;
  clientSecret: string;
  scope: string;
  /** A server token of the client, for introspections (valid for the whole bench). */
  accessToken: string;
  /** Numbers for lookups, half of them with operator data imported. */
  lookupNumbers: string[];
  /** Numbers with a running V2 verification, for V2 checks. */
  v2Numbers: string[];
}

export type Call =
  "token" | "lookup" | "send" | "intlsend" | "check" | "readback" | "v2lookup" | "v2check" | "introspect";

/** The calls that send a code. */
export const isSend = (call: Call): boolean => call === "send" || call === "intlsend";

/** One REST request, as autocannon takes it. */
export interface RestRequest {
  method: "GET" | "POST";
  path: string;
  headers: Record<string, string>;
  body?: string;
}

/** The wrong code every check sends: a user who mistyped (its 1-in-a-million match would be `valid`). */
export const WRONG_CODE = "000000";

export function basicAuth(id: string, secret: string): string {
  return `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString("base64")}`;
}

export const TOKEN_FORM = (scope: string) =>
  `grant_type=client_credentials&scope=${encodeURIComponent(scope)}`;

/**
 * The send of number `k`: a distinct French mobile number, client address and device per send,
 * a number range taken again only every 10,000 sends (SPAM_RANGE_BURST allows 10 in 10 minutes),
 * so that no per-number, per-address, per-device or range-burst rule answers `rate_limited` or
 * `spam_detected` instead of sending (the account's own rule, RATE_LIMIT_ACCOUNT, and the fraud engine's
 * bounds, FRAUD_NEW_DESTINATION_SENDS and the others of bench/service.ts, are raised by the bench).
 */
export function sendBody(f: Fixture, k: number): Record<string, string> {
  // 061… is mobile throughout (not every 06x… is): 10,000 ranges of 1,000 numbers, taken in turn.
  const range = String(k % 10_000).padStart(4, "0");
  const last = String(Math.floor(k / 10_000) % 1000).padStart(3, "0");
  return {
    customer_uuid: f.customerUuid,
    phone_number: `+3361${range}${last}`,
    ip: `81.${(k >> 16) & 255}.${(k >> 8) & 255}.${k & 255}`,
    device_id: `bench-device-${k}`,
  };
}

/**
 * The countries of the international send cell: twelve, Brazil and India among them (their carrier
 * tables are the biggest), each send to the next.
 */
export const INTL_COUNTRIES = [
  "BR",
  "IN",
  "FR",
  "DE",
  "GB",
  "ES",
  "IT",
  "US",
  "MX",
  "NG",
  "ID",
  "TR",
] as const;

/** Per country, its example mobile number less its last 7 digits, and the 4 digits after that which keep it a mobile. */
let intlNumbering: { head: string; ranges: string[] }[] | undefined;

function numbering(): { head: string; ranges: string[] }[] {
  intlNumbering ??= INTL_COUNTRIES.map((country) => {
    const example = getExampleNumber(country, examples);
    if (example === undefined) throw new Error(`no example mobile number for ${country}`);
    const head = example.number.slice(0, -7);
    const ranges: string[] = [];
    for (let r = 0; r < 10_000; r++) {
      const range = String(r).padStart(4, "0");
      const type = parsePhoneNumberFromString(`${head}${range}000`)?.getType();
      if (type === "MOBILE" || type === "FIXED_LINE_OR_MOBILE") ranges.push(range);
    }
    if (ranges.length < 100) throw new Error(`${country}: only ${ranges.length} mobile ranges`);
    return { head, ranges };
  });
  return intlNumbering;
}

/**
 * The international send of number `k`: the next of INTL_COUNTRIES, a mobile number of its own
 * range, taken again only after every other range of its country (as sendBody), its own client
 * address and device.
 */
export function intlSendBody(f: Fixture, k: number): Record<string, string> {
  const countries = numbering();
  const { head, ranges } = countries[k % countries.length] ?? { head: "", ranges: [] };
  const j = Math.floor(k / countries.length);
  const last = String(Math.floor(j / ranges.length) % 1000).padStart(3, "0");
  return {
    customer_uuid: f.customerUuid,
    phone_number: `${head}${ranges[j % ranges.length] ?? ""}${last}`,
    ip: `82.${(k >> 16) & 255}.${(k >> 8) & 255}.${k & 255}`,
    device_id: `bench-intl-device-${k}`,
  };
}

export interface RestPlan {
  call: Call;
  fixture: Fixture;
  /** The token endpoint's path: ours, or a reference's. */
  tokenPath: string;
  /** The first send's number `k` (each send takes the next). */
  sendFrom: number;
  /** Authentications to check or read back, taken in turn. */
  authUuids: string[];
}

/** The `i`-th request of a plan. */
export function restRequest(p: RestPlan, i: number): RestRequest {
  const f = p.fixture;
  const json = { "content-type": "application/json", "x-api-key": f.apiKey };
  const auth = () => p.authUuids[i % p.authUuids.length] ?? "";
  switch (p.call) {
    case "token":
      return {
        method: "POST",
        path: p.tokenPath,
        headers: {
          authorization: basicAuth(f.clientId, f.clientSecret),
          "content-type": "application/x-www-form-urlencoded",
        },
        body: TOKEN_FORM(f.scope),
      };
    case "introspect":
      return {
        method: "POST",
        path: "/v1/session/oauth/introspect",
        headers: {
          authorization: basicAuth(f.clientId, f.clientSecret),
          "content-type": "application/x-www-form-urlencoded",
        },
        body: `token=${encodeURIComponent(f.accessToken)}`,
      };
    case "lookup":
      return {
        method: "GET",
        path: `/v1/lookup/${encodeURIComponent(f.lookupNumbers[i % f.lookupNumbers.length] ?? "")}`,
        headers: { "customer-uuid": f.customerUuid, "x-api-key": f.apiKey },
      };
    case "send":
    case "intlsend":
      return {
        method: "POST",
        path: "/v1/authentication",
        headers: json,
        body: JSON.stringify((p.call === "send" ? sendBody : intlSendBody)(f, p.sendFrom + i)),
      };
    case "check":
      return {
        method: "POST",
        path: "/v1/check",
        headers: json,
        body: JSON.stringify({
          customer_uuid: f.customerUuid,
          authentication_uuid: auth(),
          check_code: WRONG_CODE,
        }),
      };
    case "readback":
      return { method: "GET", path: `/v1/authentication/${auth()}`, headers: { "x-api-key": f.apiKey } };
    case "v2lookup":
      return {
        method: "GET",
        path: `/v2/lookup/${encodeURIComponent(f.lookupNumbers[i % f.lookupNumbers.length] ?? "")}`,
        headers: { authorization: `Bearer ${f.apiKey}` },
      };
    case "v2check":
      return {
        method: "POST",
        path: "/v2/verification/check",
        headers: { "content-type": "application/json", authorization: `Bearer ${f.apiKey}` },
        body: JSON.stringify({
          target: { type: "phone_number", value: f.v2Numbers[i % f.v2Numbers.length] ?? "" },
          code: WRONG_CODE,
        }),
      };
  }
}

/**
 * The numbers of the V2 verifications the set-up makes: ranges of sendBody's numbers, but a last
 * part (999) that sendBody reaches only after ten million sends.
 */
export function v2Number(i: number): string {
  return `+3361${String(i % 10_000).padStart(4, "0")}999`;
}

/**
 * The `status` field of a V1 JSON answer, `active` or `inactive` for an introspection, or the
 * HTTP status when it has neither.
 */
export function answerStatus(httpStatus: number, body: string): string {
  try {
    const parsed = JSON.parse(body) as { status?: unknown; active?: unknown };
    if (typeof parsed.active === "boolean") return parsed.active ? "active" : "inactive";
    return typeof parsed.status === "string" ? parsed.status : String(httpStatus);
  } catch {
    return String(httpStatus);
  }
}

/** The authentication uuid of a send's answer, if it has one. */
export function authUuidOf(body: string): string | undefined {
  try {
    const parsed = JSON.parse(body) as { authentication_uuid?: unknown };
    return typeof parsed.authentication_uuid === "string" ? parsed.authentication_uuid : undefined;
  } catch {
    return undefined;
  }
}
