import { expect } from "chai";
import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import { decodeProtectedHeader } from "jose";
import { Keys } from "../../../src/redis/client.js";
import { Secrets } from "../../../src/crypto/secrets.js";
import { KID_MAX_AGE_MS, RedisSigningKeys, signAccessToken } from "../../../src/oauth/keys/signing-keys.js";
import { testRedisUrl } from "../../support/hooks.js";
import { commandsDuring } from "../../support/redis.js";

/**
 * Token calls read no key from Redis: the current kid is cached. The guarantee that keeps: a
 * rotation made anywhere (another instance, the CLI) is used by every instance within a second,
 * at once when the rotation's announcement arrives, by the cache's age when it does not.
 */
describe("signing key rotation across instances", () => {
  const conns: Redis[] = [];
  let prefix: Keys;
  const secrets = new Secrets(randomBytes(32));
  const connect = () => {
    const r = new Redis(testRedisUrl());
    conns.push(r);
    return r;
  };
  const instance = () => new RedisSigningKeys(connect(), prefix, secrets, { tokenLifetimeSeconds: 600 });
  const kidOf = async (k: RedisSigningKeys) => {
    const iat = Math.floor(Date.now() / 1000);
    return decodeProtectedHeader(await signAccessToken(k, { iat, exp: iat + 60, sub: "u" })).kid;
  };

  beforeEach(() => {
    prefix = new Keys(`rot${randomBytes(4).toString("hex")}:`);
  });
  afterEach(() => {
    for (const c of conns.splice(0)) c.disconnect();
  });

  it("signs with the kid it read, without reading it again, while nothing rotates", async () => {
    const redis = connect();
    const keys = new RedisSigningKeys(redis, prefix, secrets, { tokenLifetimeSeconds: 600 });
    const first = await kidOf(keys);
    const seen = await commandsDuring(testRedisUrl(), async () => {
      for (let i = 0; i < 20; i += 1) expect(await kidOf(keys)).to.equal(first);
    });
    expect(seen.filter((args) => args[0]?.toLowerCase() === "hget")).to.deep.equal([]);
  });

  it("uses a rotation by another instance at once when it watches for rotations", async () => {
    const serving = instance();
    const unwatch = await serving.watch(connect());
    const readSince = Date.now();
    const before = await kidOf(serving);
    const { kid } = await instance().rotate();
    expect(kid).not.to.equal(before);
    // Until the kid it read is KID_MAX_AGE_MS old, only the announcement can change it: the calls
    // made until then show it, however long a busy machine takes to deliver it.
    let seen = before;
    while (seen !== kid && Date.now() < readSince + KID_MAX_AGE_MS) seen = await kidOf(serving);
    expect(seen, "the announcement reaches the watcher before the kid it read is a second old").to.equal(kid);
    await unwatch();
  });

  it("uses a rotation within a second even when it never hears of it", async () => {
    const deaf = instance();
    const before = await kidOf(deaf);
    const rotatedAt = Date.now();
    const { kid } = await instance().rotate();
    expect(before).not.to.equal(kid);
    // Every call made a second after the rotation uses the new key. Timed from each call's start:
    // how long a busy machine takes to answer it, or to come back to the loop, does not count.
    for (;;) {
      const askedAt = Date.now();
      if ((await kidOf(deaf)) === kid) break;
      expect(askedAt - rotatedAt, "the new key is used within a second").to.be.below(KID_MAX_AGE_MS);
      await new Promise((r) => setTimeout(r, 20));
    }
  });
});
