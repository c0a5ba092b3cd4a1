import { randomBytes } from "node:crypto";
import { expect } from "chai";
import { Redis } from "ioredis";
import {
  calculateJwkThumbprint,
  createLocalJWKSet,
  decodeProtectedHeader,
  errors,
  exportJWK,
  jwtVerify,
} from "jose";
import { Secrets } from "../../../src/crypto/secrets.js";
import { Keys, connectRedis, createRedis, type RedisClient } from "../../../src/redis/client.js";
import {
  KID_MAX_AGE_MS,
  RedisSigningKeys,
  signAccessToken,
  type SigningKeys,
  type SigningKeysOptions,
} from "../../../src/oauth/keys/signing-keys.js";
import { startRedisCluster, type RedisCluster } from "../../support/redis.js";
import { testRedisUrl } from "../../support/hooks.js";

const LIFETIME = 3600;
const SKEW = 60;

/** Claims as the token endpoint makes them, valid now by the real clock (jwtVerify reads it). */
function claims(sub = "client-1") {
  const iat = Math.floor(Date.now() / 1000);
  return {
    sub,
    scope: "a b",
    app_id: "app-1",
    aud: "app-1",
    iss: "http://issuer.test",
    iat,
    exp: iat + LIFETIME,
  };
}

/**
 * The kid `keys` signs with once a rotation to `kid` is announced: an instance that watches for
 * rotations drops its cached kid as the announcement arrives. `readSince` is a time before `keys`
 * last read its kid: until that read is KID_MAX_AGE_MS old only the announcement can change the
 * kid, so the calls made until then show it, however long a busy machine takes to deliver it.
 */
async function kidAfterRotation(keys: SigningKeys, kid: string, readSince: number): Promise<string> {
  let seen = "";
  while (Date.now() < readSince + KID_MAX_AGE_MS) {
    seen = (await keys.current()).kid;
    if (seen === kid) break;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return seen;
}

async function verify(token: string, keys: SigningKeys) {
  return jwtVerify(token, createLocalJWKSet(await keys.jwks()), { typ: "at+jwt", algorithms: ["ES256"] });
}

/** A store of its own (fresh key prefix) on one Redis, where several instances can be made. */
class Store {
  readonly keys = new Keys(`t${randomBytes(6).toString("hex")}:`);
  readonly secrets = new Secrets(randomBytes(32));
  private clock = 1_700_000_000_000;

  constructor(readonly redis: RedisClient) {}

  get hashKey(): string {
    return this.keys.key("signing", "keys");
  }

  advance(ms: number): void {
    this.clock += ms;
  }

  instance(options: Partial<SigningKeysOptions> = {}, secrets = this.secrets): RedisSigningKeys {
    return new RedisSigningKeys(this.redis, this.keys, secrets, {
      tokenLifetimeSeconds: LIFETIME,
      clockSkewSeconds: SKEW,
      now: () => this.clock,
      ...options,
    });
  }

  async keyFields(): Promise<string[]> {
    return (await this.redis.hkeys(this.hashKey)).filter((f) => f.startsWith("key:"));
  }
}

describe("signing keys", () => {
  let redis: Redis;
  let store: Store;

  before(() => {
    redis = new Redis(testRedisUrl(), { maxRetriesPerRequest: 2 });
  });
  after(() => {
    redis.disconnect();
  });
  beforeEach(() => {
    store = new Store(redis);
  });

  it("a token signed with current() verifies against jwks(), with typ at+jwt and the kid", async () => {
    const keys = store.instance();
    const key = await keys.current();
    const token = await signAccessToken(keys, claims());

    const { payload, protectedHeader } = await verify(token, keys);
    expect(protectedHeader).to.deep.equal({ alg: "ES256", kid: key.kid, typ: "at+jwt" });
    expect(payload).to.deep.include({ sub: "client-1", scope: "a b", app_id: "app-1", aud: "app-1" });
  });

  it("signs with another typ when told", async () => {
    const keys = store.instance();
    const token = await signAccessToken(keys, claims(), { typ: "JWT" });
    expect(decodeProtectedHeader(token).typ).to.equal("JWT");
  });

  it("the kid is the RFC 7638 thumbprint of the public key", async () => {
    const keys = store.instance();
    const key = await keys.current();
    const { kty, crv, x, y } = key.publicJwk;
    expect(key.kid).to.equal(await calculateJwkThumbprint({ kty, crv, x, y }, "sha256"));
    expect((await keys.jwks()).keys[0]?.kid).to.equal(key.kid);
  });

  it("the private key is never stored in clear, and decrypts only with the right SECRETS_KEY", async () => {
    const keys = store.instance();
    await keys.current();
    await keys.rotate();
    const stored = await redis.hgetall(store.hashKey);
    expect(Object.keys(stored)).to.have.length(3);
    for (const [name, value] of Object.entries(stored)) {
      if (name === "current") continue;
      expect(value).not.to.match(/"d"/);
      const record = JSON.parse(value) as { public_jwk: object; private_sealed: string };
      expect(record.public_jwk).not.to.have.property("d");
      const jwk = JSON.parse(store.secrets.decrypt(record.private_sealed)) as Record<string, unknown>;
      expect(jwk).to.have.property("d").that.is.a("string");
      expect(() => new Secrets(randomBytes(32)).decrypt(record.private_sealed)).to.throw();
    }
    // Nor can the key kept in memory be exported.
    const { privateKey } = await keys.current();
    expect(privateKey.extractable).to.equal(false);
    let exported: unknown;
    try {
      exported = await exportJWK(privateKey);
    } catch (err) {
      exported = err;
    }
    expect(exported).to.be.instanceOf(TypeError);
  });

  it("an instance with another SECRETS_KEY cannot use the stored key and says why", async () => {
    await store.instance().current();
    const other = store.instance({}, new Secrets(randomBytes(32)));
    let failure: unknown;
    try {
      await other.current();
    } catch (err) {
      failure = err;
    }
    expect(failure).to.be.instanceOf(Error);
    expect((failure as Error).message).to.match(/cannot be decrypted: SECRETS_KEY/);
  });

  it("after rotate(), new tokens carry the new kid and old ones verify until the retention passes", async () => {
    const keys = store.instance();
    const old = await keys.current();
    const oldToken = await signAccessToken(keys, claims());

    store.advance(1_000);
    const { kid } = await keys.rotate();
    expect(kid).not.to.equal(old.kid);
    const newToken = await signAccessToken(keys, claims());
    expect(decodeProtectedHeader(newToken).kid).to.equal(kid);
    expect((await keys.jwks()).keys.map((k) => k.kid)).to.deep.equal([kid, old.kid]);
    expect((await verify(oldToken, keys)).protectedHeader.kid).to.equal(old.kid);

    // One second short of lifetime + skew after the rotation: still published.
    store.advance((LIFETIME + SKEW) * 1000 - 1_000);
    expect((await keys.jwks()).keys.map((k) => k.kid)).to.deep.equal([kid, old.kid]);
    await verify(oldToken, keys);

    store.advance(1_000);
    expect((await keys.jwks()).keys.map((k) => k.kid)).to.deep.equal([kid]);
    expect(await store.keyFields()).to.deep.equal([`key:${kid}`]);
    let failure: unknown;
    try {
      await verify(oldToken, keys);
    } catch (err) {
      failure = err;
    }
    expect(failure).to.be.instanceOf(errors.JWKSNoMatchingKey);
    expect((await verify(newToken, keys)).protectedHeader.kid).to.equal(kid);
  });

  it("never removes the current key, however old", async () => {
    const keys = store.instance();
    const { kid } = await keys.rotate();
    store.advance(10 * (LIFETIME + SKEW) * 1000);
    await keys.rotate();
    store.advance(10 * (LIFETIME + SKEW) * 1000);
    const { keys: published } = await keys.jwks();
    expect(published).to.have.length(1);
    expect(published[0]?.kid).not.to.equal(kid);
    expect(published[0]?.kid).to.equal((await keys.current()).kid);
  });

  it("rotation keeps every key whose tokens may be alive, current first", async () => {
    const keys = store.instance();
    const first = (await keys.current()).kid;
    store.advance(1_000);
    const second = (await keys.rotate()).kid;
    store.advance(1_000);
    const third = (await keys.rotate()).kid;
    expect((await keys.jwks()).keys.map((k) => k.kid)).to.deep.equal([third, second, first]);
    // The first retired a second before the second: it goes first.
    store.advance((LIFETIME + SKEW) * 1000 - 1_000);
    expect((await keys.jwks()).keys.map((k) => k.kid)).to.deep.equal([third, second]);
  });

  it("two instances starting together with no key end up with exactly one key", async () => {
    const a = store.instance();
    const b = store.instance();
    const [ka, kb] = await Promise.all([a.current(), b.current()]);
    expect(ka.kid).to.equal(kb.kid);
    expect(await store.keyFields()).to.deep.equal([`key:${ka.kid}`]);
    expect((await a.jwks()).keys.map((k) => k.kid)).to.deep.equal([ka.kid]);
  });

  it("a rotation on instance A is used by instance B, which watches for rotations, as it is announced", async () => {
    const a = store.instance();
    const b = store.instance();
    const subscriber = new Redis(testRedisUrl());
    const unwatch = await b.watch(subscriber);
    const readSince = Date.now();
    const before = await b.current();
    const { kid } = await a.rotate();
    expect(kid).not.to.equal(before.kid);
    expect(await kidAfterRotation(b, kid, readSince)).to.equal(kid);
    await unwatch();
    subscriber.disconnect();
    const token = await signAccessToken(b, claims());
    expect(decodeProtectedHeader(token).kid).to.equal(kid);
    expect((await verify(token, a)).protectedHeader.kid).to.equal(kid);
  });

  it("many concurrent current() calls, on one instance and on many, create one key", async () => {
    const instances = Array.from({ length: 8 }, () => store.instance());
    const answers = await Promise.all(
      instances.flatMap((keys) => Array.from({ length: 10 }, () => Promise.resolve(keys.current()))),
    );
    const kids = new Set(answers.map((k) => k.kid));
    expect(kids.size).to.equal(1);
    expect(await store.keyFields()).to.have.length(1);
  });

  it("a fresh store publishes the key it will sign with", async () => {
    const keys = store.instance();
    const { keys: published } = await keys.jwks();
    expect(published).to.have.length(1);
    expect(published[0]?.kid).to.equal((await keys.current()).kid);
  });

  it("jwks() lists public members only, never d", async () => {
    const keys = store.instance();
    await keys.current();
    store.advance(1_000);
    await keys.rotate();
    const { keys: published } = await keys.jwks();
    expect(published).to.have.length(2);
    for (const jwk of published) {
      expect(Object.keys(jwk).sort()).to.deep.equal(["alg", "crv", "kid", "kty", "use", "x", "y"]);
      expect(jwk).to.include({ kty: "EC", crv: "P-256", use: "sig", alg: "ES256" });
      expect(JSON.stringify(jwk)).not.to.match(/"d"/);
    }
  });

  describe("on a 3-node Redis Cluster", () => {
    let cluster: RedisCluster;
    let client: RedisClient;

    before(async function () {
      this.timeout(60_000);
      cluster = await startRedisCluster();
      client = createRedis({ REDIS_URL: "redis://unused", REDIS_CLUSTER_NODES: cluster.nodes.split(",") });
      await connectRedis(client);
    });
    after(async () => {
      client.disconnect();
      await cluster.stop();
    });

    it("creates, rotates, announces, publishes and prunes keys with scripts that keep to one slot", async () => {
      const onCluster = new Store(client);
      const a = onCluster.instance();
      const b = onCluster.instance();
      const subscriber = createRedis({
        REDIS_URL: "redis://unused",
        REDIS_CLUSTER_NODES: cluster.nodes.split(","),
      });
      await connectRedis(subscriber);
      const unwatch = await b.watch(subscriber);
      const readSince = Date.now();
      const [ka, kb] = await Promise.all([a.current(), b.current()]);
      expect(ka.kid).to.equal(kb.kid);
      const oldToken = await signAccessToken(a, claims());

      onCluster.advance(1_000);
      const { kid } = await a.rotate();
      expect(await kidAfterRotation(b, kid, readSince)).to.equal(kid);
      await unwatch();
      subscriber.disconnect();
      expect((await b.jwks()).keys.map((k) => k.kid)).to.deep.equal([kid, ka.kid]);
      await verify(oldToken, b);

      onCluster.advance((LIFETIME + SKEW) * 1000);
      expect((await b.jwks()).keys.map((k) => k.kid)).to.deep.equal([kid]);
      expect((await verify(await signAccessToken(b, claims()), a)).protectedHeader.kid).to.equal(kid);
    });
  });
});
