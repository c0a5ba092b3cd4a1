import type { Secrets } from "../crypto/secrets.js";
import { sourceNetwork } from "../net/cidr.js";
import type { Window } from "../otp/code.js";
import type { Keys, RedisClient } from "../redis/client.js";
import type { Identifier } from "./identity.js";
import { SessionKeys } from "./keys.js";

/** How long a completed login keeps its network a known source of the identifier. */
export const KNOWN_SOURCE_DAYS = 30;
const KNOWN_SOURCE_MS = KNOWN_SOURCE_DAYS * 86_400_000;
const PURPOSE = "login-source";

/** Where a login call comes from, for one identifier of an app. */
export interface LoginSource {
  /** The client address (the per-address windows count it). */
  address: string;
  /** A keyed hash of the app, the identifier and the address's network: names its own windows. */
  digest: string;
  /** The key that exists while the network is a known source of the identifier (the app's tag). */
  key: string;
}

/**
 * Known sources (docs/session-api.md#known-sources): the networks (IPv4 /24, IPv6 /64) that
 * completed a login for an identifier of an app within the last 30 days, so that strangers
 * cannot lock a user out of its usual network. Each is one key, `known:{<app_id>}:<digest>`,
 * expiring 30 days after the last login from there; the digest is a keyed hash (SECRETS_KEY), so
 * Redis holds no identifier or address of it. The key shares the app's hash tag with the login
 * windows: the window scripts read it as they count, without another round trip.
 */
export class KnownSources {
  private readonly keys: SessionKeys;

  constructor(
    private readonly redis: RedisClient,
    keys: Keys,
    private readonly secrets: Pick<Secrets, "hash">,
  ) {
    this.keys = new SessionKeys(keys);
  }

  /** The source of a call from `address` for this identifier; undefined without an address. */
  of(appId: string, id: Identifier, address: string | undefined): LoginSource | undefined {
    if (address === undefined) return undefined;
    const digest = this.secrets.hash(
      PURPOSE,
      JSON.stringify([appId, id.type, id.value.toLowerCase(), sourceNetwork(address)]),
    );
    return { address, digest, key: this.keys.knownSource(appId, digest) };
  }

  /** Of several sources' keys (all on the app's hash tag), the first that is known now. */
  async firstKnown(keys: readonly string[]): Promise<string | undefined> {
    if (keys.length === 0) return undefined;
    const found = await this.redis.mget(...keys);
    return keys.find((_, i) => found[i] !== null);
  }

  /** A completed login: its network is a known source of the identifier for 30 days more. */
  async remember(source: LoginSource | undefined): Promise<void> {
    if (source !== undefined) await this.redis.set(source.key, "1", "PX", KNOWN_SOURCE_MS);
  }
}

/**
 * One of an identifier's windows as a call from `source` meets it, the script choosing as it
 * counts: the identifier's window for a stranger, the source's own (`ownKey`, same rule) for a
 * known source, so strangers' calls never count against a known source. Without an address, the
 * identifier's window alone.
 */
export function identifierWindows(
  window: Window,
  source: LoginSource | undefined,
  ownKey: (digest: string) => string,
): Window[] {
  if (source === undefined) return [window];
  return [
    { ...window, when: { key: source.key, exists: false } },
    { ...window, key: ownKey(source.digest), when: { key: source.key, exists: true } },
  ];
}
