import { expect } from "chai";
import { randomBytes } from "node:crypto";
import { Keys } from "../../src/redis/client.js";
import { Secrets } from "../../src/crypto/secrets.js";
import { ACCOUNT_MAX_AGE_MS, AccountCache } from "../../src/accounts/cache.js";
import { RedisAccountStore } from "../../src/accounts/store.js";
import { announceChange, WatchedCache } from "../../src/redis/watched-cache.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { rest, type RestAnswer } from "../support/rest.js";
import { redisConnections, testRedisUrl } from "../support/hooks.js";
import { commandsDuring } from "../support/redis.js";
import { startElsewhere, type Elsewhere } from "../support/elsewhere.js";

const FR_MOBILE = "+33612345678";

/**
 * V1 calls authenticate against accounts kept in the process, so their one Redis round trip is
 * their own work. The guarantee that keeps: a change made anywhere (the CLI, another instance)
 * is honoured at once when its announcement arrives, and within a second when it does not.
 */
describe("accounts kept in the process", () => {
  const connect = redisConnections();

  describe("in the service", () => {
    let app: TestApp;
    let customer: { uuid: string; key: string };
    /** The CLI's view: another process, with a store of its own. */
    let elsewhere: Elsewhere;

    before(async () => {
      app = await startTestApp();
      const { account, apiKey } = await app.registry.accounts.create({
        name: "Kept",
        balanceMicros: 10_000_000,
        spendingLimitMicros: 100_000_000,
        features: [],
        regions: [],
      });
      customer = { uuid: account.customerUuid, key: apiKey };
      elsewhere = await startElsewhere(app.config);
    });
    after(async () => {
      elsewhere.close();
      await app.stop();
    });

    const lookup = () =>
      rest(app.baseUrl).call("GET", `/v1/lookup/${FR_MOBILE}`, {
        headers: { "customer-uuid": customer.uuid, "x-api-key": customer.key },
      });

    it("makes a lookup one round trip: its number's data, no account read, while nothing changes", async () => {
      const readFrom = await freshRead();
      const seen = await commandsDuring(testRedisUrl(), async () => {
        for (let i = 0; i < 10; i += 1) expect((await lookup()).status).to.equal(200);
      });
      // The kept account is read again once per ACCOUNT_MAX_AGE_MS at most: none while the ten
      // lookups end within that age of the read, as they do unless the machine is very busy.
      const rereads = Math.floor((Date.now() - readFrom) / ACCOUNT_MAX_AGE_MS);
      const keys = new Keys(app.config.REDIS_KEY_PREFIX);
      const numberKey = keys.key("num", FR_MOBILE);
      const accountKey = keys.key("acct", customer.uuid);
      const touching = (key: string) => seen.filter((args) => args.includes(key));
      expect(touching(numberKey).map((args) => args[0]?.toLowerCase())).to.deep.equal(
        Array.from({ length: 10 }, () => "hgetall"),
      );
      expect(touching(accountKey), "the account is not read again").to.have.length.at.most(rereads);
    });

    /** Lookups until one reads the account from Redis: the kept account is fresh from its start. */
    const freshRead = async (): Promise<number> => {
      const accountKey = new Keys(app.config.REDIS_KEY_PREFIX).key("acct", customer.uuid);
      for (;;) {
        const startedAt = Date.now();
        const seen = await commandsDuring(testRedisUrl(), async () => {
          await lookup();
        });
        if (seen.some((args) => args[0]?.toLowerCase() === "hgetall" && args.includes(accountKey))) {
          return startedAt;
        }
        await new Promise((resolve) => setTimeout(resolve, 50)); // polling, as waitFor does
      }
    };

    /**
     * The first answer after the CLI sets `status` that `shows` it. Until the kept account is
     * ACCOUNT_MAX_AGE_MS old only the announcement can change it, so an answer before then proves
     * it came by the announcement. On a busy machine the answer may come later and prove nothing:
     * then the change is undone and made again, until one does (the test's timeout is the limit).
     */
    const announced = async (status: "active" | "suspended", shows: (answer: RestAnswer) => boolean) => {
      for (;;) {
        const readFrom = await freshRead();
        await elsewhere.setStatus(customer.uuid, status);
        let answer = await lookup();
        while (!shows(answer)) answer = await lookup();
        if (Date.now() < readFrom + ACCOUNT_MAX_AGE_MS) return answer;
        await elsewhere.setStatus(customer.uuid, status === "active" ? "suspended" : "active");
        while (shows(await lookup()));
      }
    };

    it("refuses a suspended account as soon as another process announces its suspension, and serves it once resumed", async () => {
      expect((await lookup()).status).to.equal(200);
      const refused = await announced("suspended", (answer) => answer.status !== 200);
      expect(refused.status, "refused before the kept account could expire").to.equal(400);
      expect(refused.body.code).to.equal("suspended_account");
      const served = await announced("active", (answer) => answer.status === 200);
      expect(served.status, "served before the kept account could expire").to.equal(200);
    });
  });

  describe("without announcements", () => {
    it("sees a suspension within a second even when it never hears of it", async () => {
      const keys = new Keys(`acc${randomBytes(4).toString("hex")}:`);
      const secrets = new Secrets(randomBytes(32));
      const store = new RedisAccountStore(connect(), keys, secrets);
      const { account, apiKey } = await store.create({
        name: "Deaf",
        balanceMicros: 0,
        spendingLimitMicros: 0,
        features: [],
        regions: [],
      });
      const deaf = new AccountCache(store, secrets);
      expect((await deaf.findByApiKey(apiKey))?.status).to.equal("active");
      const suspendedAt = Date.now();
      await store.setStatus(account.customerUuid, "suspended");
      // Every call made a second after the change sees it. Timed from each call's start: how long
      // a busy machine takes to answer it, or to come back to the loop, does not count.
      for (;;) {
        const askedAt = Date.now();
        if ((await deaf.findByApiKey(apiKey))?.status === "suspended") break;
        expect(askedAt - suspendedAt, "the change is used within a second").to.be.below(ACCOUNT_MAX_AGE_MS);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(await deaf.findByApiKey(`${apiKey}x`), "another key finds nothing").to.equal(undefined);
    });
  });

  describe("WatchedCache", () => {
    it("does not keep a read that an announcement overtook, and shares one read among concurrent callers", async () => {
      const cache = new WatchedCache<string>("unused", { maxAgeMs: 60_000, maxEntries: 10 });
      let reads = 0;
      let finish: (value: string) => void = () => undefined;
      const slow = () =>
        new Promise<string>((resolve) => {
          reads += 1;
          finish = resolve;
        });
      const first = cache.get("a", slow);
      const second = cache.get("a", slow);
      cache.drop("a");
      finish("before the change");
      expect(await first).to.equal("before the change");
      expect(await second).to.equal("before the change");
      expect(reads, "concurrent callers share one read").to.equal(1);
      expect(await cache.get("a", () => Promise.resolve("after the change"))).to.equal("after the change");
      expect(await cache.get("a", () => Promise.resolve("not read again"))).to.equal("after the change");
    });

    it("drops what this process announced at once, before the pub/sub message comes back", async () => {
      const subscriber = connect();
      const publisher = connect();
      const channel = `local-announce-${Date.now()}`;
      const cache = new WatchedCache<string>(channel, { maxAgeMs: 60_000, maxEntries: 10 });
      const unwatch = await cache.watch(subscriber);
      try {
        await cache.get("a", () => Promise.resolve("before"));
        const announced = announceChange(publisher, channel, "a");
        // Nothing awaited yet: the message is not even written to Redis.
        expect(await cache.get("a", () => Promise.resolve("after"))).to.equal("after");
        await announced;
      } finally {
        await unwatch();
      }
    });

    it("never keeps an absent value, and keeps at most maxEntries", async () => {
      const cache = new WatchedCache<string>("unused", { maxAgeMs: 60_000, maxEntries: 2 });
      expect(await cache.get("x", () => Promise.resolve(undefined))).to.equal(undefined);
      expect(await cache.get("x", () => Promise.resolve("now there"))).to.equal("now there");
      await cache.get("y", () => Promise.resolve("y"));
      await cache.get("z", () => Promise.resolve("z"));
      expect(await cache.get("x", () => Promise.resolve("read again")), "the oldest went first").to.equal(
        "read again",
      );
      expect(await cache.get("z", () => Promise.resolve("not read"))).to.equal("z");
    });
  });
});
