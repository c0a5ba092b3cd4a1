import { createHash } from "node:crypto";
import type { Keys, RedisClient } from "../redis/client.js";
import { defineScript } from "../redis/script.js";
import { PasskeyKeys } from "./keys.js";

const addPasskey = defineScript({
  file: new URL("./add-passkey.lua", import.meta.url),
  keys: ["credentials"],
  argv: ["id", "passkey", "most"],
});
const usePasskey = defineScript({
  file: new URL("./use-passkey.lua", import.meta.url),
  keys: ["credentials"],
  argv: ["id", "counter", "now"],
});

/** A challenge lives 5 minutes (docs/session-api.md#passkeys). */
export const CHALLENGE_TTL_MS = 300_000;

/** The most passkeys one user holds: a session cannot fill Redis with credentials. */
export const MAX_PASSKEYS = 20;

/** A registered credential: its public key (COSE, base64url) and signature counter. */
export interface Passkey {
  /** The credential id, base64url. */
  id: string;
  publicKey: string;
  counter: number;
  transports: string[];
  createdAt: string;
  lastUsedAt?: string;
}

/** As stored: transports joined, so that Lua's cjson never turns an empty list into an object. */
interface StoredPasskey {
  publicKey: string;
  counter: number;
  transports: string;
  createdAt: string;
  lastUsedAt?: string;
}

const digest = (s: string) => createHash("sha256").update(s).digest("hex");

/**
 * Users' passkeys: `pk:{<user_id>}` (hash: credential id → JSON), the owner of each credential id
 * `pkown:{<digest>}` (a credential belongs to one user, and a login finds its user by it), the
 * challenge of a session's registration `pkreg:{<user_id>}:<session_id>`, and the login challenges
 * used `pkused:{<digest>}` until they expire.
 */
export class PasskeyStore {
  private readonly keys: PasskeyKeys;

  constructor(
    private readonly redis: RedisClient,
    keys: Keys,
  ) {
    this.keys = new PasskeyKeys(keys);
  }

  /** The user's passkeys, oldest first. */
  async list(userId: string): Promise<Passkey[]> {
    const all = await this.redis.hgetall(this.keys.credentials(userId));
    return Object.entries(all)
      .map(([id, raw]) => toPasskey(id, JSON.parse(raw) as StoredPasskey))
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id));
  }

  /** Whether the user holds a passkey (a `verify_passkey` step-up entry matches it only then). */
  async holdsAny(userId: string): Promise<boolean> {
    return (await this.redis.hlen(this.keys.credentials(userId))) > 0;
  }

  async get(userId: string, id: string): Promise<Passkey | undefined> {
    const raw = await this.redis.hget(this.keys.credentials(userId), id);
    return raw === null ? undefined : toPasskey(id, JSON.parse(raw) as StoredPasskey);
  }

  /** The user a credential id was registered by. */
  async ownerOf(id: string): Promise<string | undefined> {
    return (await this.redis.get(this.keys.owner(digest(id)))) ?? undefined;
  }

  /**
   * Keeps a new passkey: `taken` when the credential id is registered already (WebAuthn: a
   * credential is registered once), `full` at MAX_PASSKEYS. The user's hash first, counted in its
   * script; then the owner entry, on the credential's slot: of two users registering one id, the
   * second takes its entry back. A crash between the two leaves a passkey that cannot log in and
   * that its user can remove, never an id nobody can register.
   */
  async add(userId: string, p: Passkey): Promise<"added" | "taken" | "full"> {
    const credentials = this.keys.credentials(userId);
    const stored: StoredPasskey = {
      publicKey: p.publicKey,
      counter: p.counter,
      transports: p.transports.join(","),
      createdAt: p.createdAt,
    };
    const [added] = (await addPasskey.run(
      this.redis,
      { credentials },
      { id: p.id, passkey: JSON.stringify(stored), most: MAX_PASSKEYS },
    )) as [string];
    if (added === "full") return "full";
    if (added === "exists") return "taken";
    if ((await this.redis.set(this.keys.owner(digest(p.id)), userId, "NX")) === null) {
      await this.redis.hdel(credentials, p.id);
      return "taken";
    }
    return "added";
  }

  /** Removes one of the user's passkeys; false when the user holds no such id. */
  async remove(userId: string, id: string): Promise<boolean> {
    if ((await this.redis.hdel(this.keys.credentials(userId), id)) === 0) return false;
    const owner = this.keys.owner(digest(id));
    if ((await this.redis.get(owner)) === userId) await this.redis.del(owner);
    return true;
  }

  /** A verified use: the counter moves forward (see use-passkey.lua). */
  async use(userId: string, id: string, counter: number): Promise<"ok" | "backwards" | "gone"> {
    const [outcome] = (await usePasskey.run(
      this.redis,
      { credentials: this.keys.credentials(userId) },
      { id, counter, now: new Date().toISOString() },
    )) as [string];
    return outcome === "ok" || outcome === "backwards" ? outcome : "gone";
  }

  /** The challenge of the session's registration; replaces an earlier one. */
  async startRegistration(userId: string, sessionId: string, challenge: string): Promise<void> {
    await this.redis.set(this.keys.registration(userId, sessionId), challenge, "PX", CHALLENGE_TTL_MS);
  }

  /** Takes the session's registration challenge: it answers one attempt, right or wrong. */
  async takeRegistration(userId: string, sessionId: string): Promise<string | undefined> {
    return (await this.redis.getdel(this.keys.registration(userId, sessionId))) ?? undefined;
  }

  /** Marks a login challenge used until it expires; false when it was used already. */
  async useLoginChallenge(challenge: string, expiresAtMs: number): Promise<boolean> {
    const ttl = Math.max(1, expiresAtMs - Date.now());
    return (await this.redis.set(this.keys.usedLogin(digest(challenge)), "1", "PX", ttl, "NX")) !== null;
  }
}

function toPasskey(id: string, s: StoredPasskey): Passkey {
  return {
    id,
    publicKey: s.publicKey,
    counter: s.counter,
    transports: s.transports === "" ? [] : s.transports.split(","),
    createdAt: s.createdAt,
    ...(s.lastUsedAt === undefined ? {} : { lastUsedAt: s.lastUsedAt }),
  };
}
