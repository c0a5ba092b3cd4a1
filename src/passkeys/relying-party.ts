import { AppKeys } from "../apps/keys.js";
import { RingfenceError } from "../errors.js";
import type { Keys, RedisClient } from "../redis/client.js";

/** An app's WebAuthn relying party: the RP ID its passkeys are scoped to, and the origins allowed. */
export interface RelyingParty {
  rpId: string;
  origins: string[];
}

/** The most origins one app names (its web app, its apps' associated domains). */
export const MAX_ORIGINS = 20;

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;

/**
 * What is wrong with an RP ID, or undefined: a lowercase host name (WebAuthn's "valid domain"),
 * `localhost` included, without scheme, port or path; not an IP address.
 */
export function rpIdProblem(rpId: string): string | undefined {
  if (rpId.length === 0 || rpId.length > 253) return "must be a domain name of 1 to 253 characters";
  if (rpId !== rpId.toLowerCase()) return "must be lowercase";
  const labels = rpId.split(".");
  if (!labels.every((l) => LABEL.test(l)))
    return "must be a domain name (letters, digits and hyphens, no scheme or port)";
  if (labels.every((l) => /^[0-9]+$/.test(l))) return "must be a domain name, not an IP address";
  return undefined;
}

/**
 * An origin checked against the RP ID, as browsers will: `https://<host>[:port]` where the host
 * is the RP ID or under it; `http:` only for localhost. Returns the origin as browsers write it,
 * or the problem.
 */
export function readOrigin(origin: string, rpId: string): { origin: string } | { problem: string } {
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return { problem: `${origin} is not a URL` };
  }
  if (url.origin !== origin.replace(/\/$/, "") || url.username !== "" || url.password !== "") {
    return { problem: `${origin} must be an origin: scheme, host and port only` };
  }
  const host = url.hostname;
  const local = host === "localhost" || host.endsWith(".localhost");
  if (url.protocol !== "https:" && !(url.protocol === "http:" && local)) {
    return { problem: `${origin} must be https (http only for localhost)` };
  }
  if (host !== rpId && !host.endsWith(`.${rpId}`)) {
    return { problem: `${origin} is not ${rpId} or under it` };
  }
  return { origin: url.origin };
}

/** The answer of every passkey call of an app that has no relying party. */
export function notConfigured(): RingfenceError {
  return new RingfenceError(
    "passkeys_not_configured",
    "this app takes no passkeys: an operator sets its RP ID with `ringfence apps passkeys`",
  );
}

/** Each app's relying party, on the app's hash tag (`app:{<app_id>}:passkeys`). */
export class RelyingParties {
  private readonly keys: AppKeys;

  constructor(
    private readonly redis: RedisClient,
    keys: Keys,
  ) {
    this.keys = new AppKeys(keys);
  }

  async set(appId: string, rp: RelyingParty): Promise<void> {
    await this.redis.hset(this.keys.passkeys(appId), { rp_id: rp.rpId, origins: JSON.stringify(rp.origins) });
  }

  async get(appId: string): Promise<RelyingParty | undefined> {
    const [rpId, origins] = await this.redis.hmget(this.keys.passkeys(appId), "rp_id", "origins");
    if (rpId == null || origins == null) return undefined;
    return { rpId, origins: JSON.parse(origins) as string[] };
  }

  /** The app's relying party; 400 passkeys_not_configured without one. */
  async of(appId: string): Promise<RelyingParty> {
    const rp = await this.get(appId);
    if (rp === undefined) throw notConfigured();
    return rp;
  }
}
