import { randomBytes } from "node:crypto";
import type { Keys, RedisClient } from "../redis/client.js";
import { defineScript } from "../redis/script.js";
import { IDENTIFIER_TYPES, type Identifier } from "./identity.js";
import { SessionKeys } from "./keys.js";

export interface User {
  userId: string;
  appId: string;
  identifiers: Identifier[];
  hasPassword: boolean;
}

/** The identifiers' index keys are its `rest`. */
const createUser = defineScript({
  file: new URL("./create-user.lua", import.meta.url),
  keys: [],
  rest: "index",
  argv: ["userId"],
});

/**
 * Users of an app: `user:{<user_id>}` (hash), and the app's identifier index
 * `ident:{<app_id>}:<type>:<value>` → user id, so one identifier belongs to one user per app.
 */
export class UserStore {
  private readonly keys: SessionKeys;

  constructor(
    private readonly redis: RedisClient,
    keys: Keys,
  ) {
    this.keys = new SessionKeys(keys);
  }

  /**
   * The index entry of an identifier: it exists once the identifier is a user's (created by the
   * operator or by a completed login), which the app's login windows read (src/session/delivery.ts).
   */
  indexKey(appId: string, id: Identifier): string {
    return this.keys.identifier(appId, id);
  }

  async byIdentifier(appId: string, id: Identifier): Promise<User | undefined> {
    const userId = await this.redis.get(this.indexKey(appId, id));
    return userId === null ? undefined : this.get(userId);
  }

  async get(userId: string): Promise<User | undefined> {
    return (await this.read(userId))?.user;
  }

  /** The user holding the identifier and its password hash (argon2id), for a password login. */
  async credentials(
    appId: string,
    id: Identifier,
  ): Promise<{ user: User; passwordHash: string | undefined } | undefined> {
    const userId = await this.redis.get(this.indexKey(appId, id));
    const found = userId === null ? undefined : await this.read(userId);
    // The index is the app's; checking the user's app as well costs nothing.
    return found?.user.appId === appId ? found : undefined;
  }

  private async read(userId: string): Promise<{ user: User; passwordHash: string | undefined } | undefined> {
    if (!/^usr_[A-Za-z0-9_-]{22}$/.test(userId)) return undefined;
    const h = await this.redis.hgetall(this.keys.user(userId));
    if (h.app_id === undefined) return undefined;
    const identifiers: Identifier[] = [];
    for (const type of IDENTIFIER_TYPES) {
      const value = h[type];
      if (value !== undefined) identifiers.push({ type, value });
    }
    return {
      user: { userId, appId: h.app_id, identifiers, hasPassword: h.password_hash !== undefined },
      passwordHash: h.password_hash,
    };
  }

  /**
   * Creates a user holding the identifiers; undefined when one is already another user's. The
   * index is written first: a crash before the user hash leaves an index that `findOrCreate`
   * completes.
   */
  async create(appId: string, identifiers: Identifier[], passwordHash?: string): Promise<User | undefined> {
    const userId = `usr_${randomBytes(16).toString("base64url")}`;
    const index = identifiers.map((id) => this.indexKey(appId, id));
    const [status] = (await createUser.run(this.redis, {}, { userId }, index)) as ["created" | "taken"];
    if (status !== "created") return undefined;
    const fields: Record<string, string> = { app_id: appId, created_at: new Date().toISOString() };
    for (const id of identifiers) fields[id.type] = id.value;
    if (passwordHash !== undefined) fields.password_hash = passwordHash;
    await this.redis.hset(this.keys.user(userId), fields);
    return { userId, appId, identifiers, hasPassword: passwordHash !== undefined };
  }

  /** The user holding the identifier, created on first login; `created` says which. */
  async findOrCreate(appId: string, id: Identifier): Promise<{ user: User; created: boolean }> {
    const userId = await this.redis.get(this.indexKey(appId, id));
    if (userId !== null) {
      const user = await this.get(userId);
      if (user !== undefined) return { user, created: false };
      await this.redis.hset(this.keys.user(userId), {
        app_id: appId,
        created_at: new Date().toISOString(),
        [id.type]: id.value,
      });
      return { user: { userId, appId, identifiers: [id], hasPassword: false }, created: true };
    }
    const made = await this.create(appId, [id]);
    if (made !== undefined) return { user: made, created: true };
    // Another login created it meanwhile.
    return this.findOrCreate(appId, id);
  }
}
