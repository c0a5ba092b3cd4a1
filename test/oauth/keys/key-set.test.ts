import { expect } from "chai";
import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import { jwtVerify, SignJWT } from "jose";
import { Keys } from "../../../src/redis/client.js";
import { Secrets } from "../../../src/crypto/secrets.js";
import { RedisSigningKeys, signAccessToken } from "../../../src/oauth/keys/signing-keys.js";
import { CachedKeySet } from "../../../src/oauth/keys/key-set.js";
import { testRedisUrl } from "../../support/hooks.js";

describe("cached key set for session tokens", () => {
  let redis: Redis;
  let keys: RedisSigningKeys;
  let other: RedisSigningKeys;
  let reads: number;
  /** When each read of the published keys started (Date.now). */
  let readAt: number[];

  beforeEach(() => {
    redis = new Redis(testRedisUrl());
    const prefix = new Keys(`ks${randomBytes(4).toString("hex")}:`);
    const secrets = new Secrets(randomBytes(32));
    keys = new RedisSigningKeys(redis, prefix, secrets, { tokenLifetimeSeconds: 600 });
    other = new RedisSigningKeys(redis, prefix, secrets, { tokenLifetimeSeconds: 600 });
    reads = 0;
    readAt = [];
    const jwks = keys.jwks.bind(keys);
    keys.jwks = () => {
      reads++;
      readAt.push(Date.now());
      return jwks();
    };
  });
  afterEach(() => {
    redis.disconnect();
  });

  const sign = (k: RedisSigningKeys) => {
    const iat = Math.floor(Date.now() / 1000);
    return signAccessToken(k, { iat, exp: iat + 60, sub: "u" });
  };

  it("verifies many tokens with one read of the published keys", async () => {
    const set = new CachedKeySet(keys);
    for (let i = 0; i < 20; i++) await jwtVerify(await sign(keys), set.getKey, { typ: "at+jwt" });
    expect(reads).to.equal(1);
  });

  it("verifies a token of a key rotated in by another instance, even right after a read", async () => {
    const set = new CachedKeySet(keys, 30_000, 200);
    await jwtVerify(await sign(keys), set.getKey);
    await other.rotate();
    const { protectedHeader } = await jwtVerify(await sign(other), set.getKey);
    expect(protectedHeader.kid).to.equal((await other.current()).kid);
    expect(reads).to.equal(2);
  });

  const forge = async (k: RedisSigningKeys) => {
    const { privateKey } = await k.current();
    return new SignJWT({ sub: "u" })
      .setProtectedHeader({ alg: "ES256", kid: "made-up", typ: "at+jwt" })
      .sign(privateKey);
  };
  /** The time between each read of the keys and the next. */
  const gaps = () => readAt.slice(1).map((at, i) => at - (readAt[i] ?? at));

  it("reads the keys at most once per cooldown for tokens with made-up kids", async () => {
    const set = new CachedKeySet(keys, 30_000, 300);
    await jwtVerify(await sign(keys), set.getKey);
    const forged = await forge(keys);
    const results = await Promise.allSettled(Array.from({ length: 5 }, () => jwtVerify(forged, set.getKey)));
    expect(results.every((r) => r.status === "rejected")).to.equal(true);
    expect(reads).to.be.at.least(2);
    // Measured between the reads themselves: how long signing and verifying took does not count.
    expect(gaps().filter((gap) => gap < 300)).to.deep.equal([]);
  });

  it("reads the keys at most once per cooldown however the calls with made-up kids are spread", async () => {
    const cooldown = 40;
    const set = new CachedKeySet(keys, 30_000, cooldown);
    await jwtVerify(await sign(keys), set.getKey);
    const forged = await forge(keys);
    // Misses a few milliseconds apart: each used to time its own wait, and one whose timer came
    // after another's reload had finished read the keys again at once.
    const verifyAfter = (ms: number) =>
      new Promise((resolve) => setTimeout(resolve, ms)).then(() => jwtVerify(forged, set.getKey));
    for (let round = 0; round < 20; round += 1) {
      const results = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => verifyAfter(i * 3)));
      expect(results.every((r) => r.status === "rejected")).to.equal(true);
    }
    expect(gaps().filter((gap) => gap < cooldown)).to.deep.equal([]);
  });
});
