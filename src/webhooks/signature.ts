import { createHmac, timingSafeEqual } from "node:crypto";

/** The header that carries the signature of a webhook delivery. */
export const SIGNATURE_HEADER = "X-Webhook-Signature";

/** How far a receiver accepts the signature's time from its own clock, by default. */
export const DEFAULT_TOLERANCE_SECONDS = 300;

/**
 * The `X-Webhook-Signature` value for one delivery: `t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>">`,
 * keyed by the receiver's webhook secret. `body` is the exact bytes sent.
 */
export function signWebhook(secret: string, body: string | Uint8Array, unixSeconds: number): string {
  if (!Number.isSafeInteger(unixSeconds) || unixSeconds < 0) {
    throw new RangeError("unixSeconds must be a non-negative integer");
  }
  return `t=${unixSeconds},v1=${mac(secret, unixSeconds, body).toString("hex")}`;
}

/**
 * The receiver's check: true when `header` holds a `v1` signature of `body` by `secret`, made within
 * `toleranceSeconds` of `now` (unix seconds). Several `v1` entries are allowed (one may match).
 * The comparison takes the same time wherever the signatures differ.
 */
export function verifyWebhook(
  secret: string,
  body: string | Uint8Array,
  header: string | null | undefined,
  toleranceSeconds: number = DEFAULT_TOLERANCE_SECONDS,
  now: number = Math.floor(Date.now() / 1000),
): boolean {
  if (header === null || header === undefined) return false;
  let t: number | undefined;
  const candidates: Buffer[] = [];
  for (const part of header.split(",")) {
    const eq = part.indexOf("=");
    if (eq < 0) return false;
    const name = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (name === "t") {
      if (t !== undefined || !/^\d{1,15}$/.test(value)) return false;
      t = Number(value);
    } else if (name === "v1" && /^[0-9a-f]{64}$/.test(value)) {
      candidates.push(Buffer.from(value, "hex"));
    }
  }
  if (t === undefined || candidates.length === 0 || Math.abs(now - t) > toleranceSeconds) return false;
  const expected = mac(secret, t, body);
  let ok = false;
  for (const candidate of candidates) ok = timingSafeEqual(candidate, expected) || ok;
  return ok;
}

function mac(secret: string, unixSeconds: number, body: string | Uint8Array): Buffer {
  return createHmac("sha256", secret).update(`${unixSeconds}.`).update(body).digest();
}
