import { expect } from "chai";
import { Keys } from "../../src/redis/client.js";
import { OVERRIDE_PREFIXES_MAX_AGE_MS } from "../../src/lookup/lookup-data.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { SmsReceiver } from "../support/receivers.js";
import { rest } from "../support/rest.js";
import { testRedisUrl } from "../support/hooks.js";
import { commandsDuring, waitFor } from "../support/redis.js";
import { startElsewhere } from "../support/elsewhere.js";

/**
 * A V1 send spends two Redis round trips besides the provider call: the script that decides
 * (with the hold index listed in the same write) and the writes after the provider answered.
 * What used to cost more is proven here: the number's operator data is read only when its
 * prefix has overrides, and a hold the recovery could not find is never sent.
 */
describe("V1 send in two round trips", () => {
  let app: TestApp;
  let sms: SmsReceiver;
  let customer: { uuid: string; key: string };
  let keys: Keys;
  let next = 100_000;
  /**
   * A French mobile number, new each time, in the override prefix `+33<range>` (each test a
   * range of its own, 650 to 653 and 660 on, since an override in a prefix makes its neighbours
   * read too).
   */
  const fresh = (range: string) => `+33${range}${(next += 1_003)}`;

  before(async function () {
    this.timeout(30_000);
    sms = await SmsReceiver.start();
    app = await startTestApp({ SMS_PROVIDER: "http", SMS_HTTP_URL: sms.url });
    keys = new Keys(app.config.REDIS_KEY_PREFIX);
    const { account, apiKey } = await app.registry.accounts.create({
      name: "Round trips",
      balanceMicros: 100_000_000,
      spendingLimitMicros: 1_000_000_000,
      features: [],
      regions: [],
    });
    customer = { uuid: account.customerUuid, key: apiKey };
    // The start completes the override prefixes in the background.
    await waitFor(
      async () => (await app.registry.redis.get(keys.key("numovr", "prefixes", "complete"))) === "1",
    );
  });
  after(async () => {
    await app.stop();
    await sms.close();
  });

  const send = (phone: string) =>
    rest(app.baseUrl).call("POST", "/v1/authentication", {
      body: { customer_uuid: customer.uuid, phone_number: phone },
      headers: { "x-api-key": customer.key },
    });

  const balance = async () => (await app.registry.accounts.get(customer.uuid))?.balanceMicros;

  /** The commands run on `key` while `during` runs, by name. */
  const commandsOn = async (key: string, during: () => Promise<void>) =>
    (await commandsDuring(testRedisUrl(), during))
      .filter((args) => args.includes(key))
      .map((args) => (args[0] ?? "").toLowerCase());

  it("reads no number data when the number's prefix has no override", async () => {
    const phone = fresh("650");
    const seen = await commandsOn(keys.key("num", phone), async () => {
      const sent = await send(phone);
      expect(sent.body.status).to.equal("pending");
    });
    expect(seen).to.deep.equal([]);
  });

  it("honours an override imported by another process as soon as the import is announced", async () => {
    const elsewhere = await startElsewhere(app.config);
    const versionKey = keys.key("numovr", "prefixes", "version");
    try {
      // Until the prefixes a send read are OVERRIDE_PREFIXES_MAX_AGE_MS old only the announcement
      // makes the app read them again. On a busy machine the first send to show the import may
      // come later and prove nothing: then an import in a prefix of its own is tried, until one
      // does (the test's timeout is the limit; a prefix with an override is read every time).
      for (let range = 660; ; range += 1) {
        let readFrom = 0;
        while (readFrom === 0) {
          const startedAt = Date.now();
          const seen = await commandsDuring(testRedisUrl(), async () => {
            await send(fresh("650"));
          });
          const read = seen.some((args) => args[0]?.toLowerCase() === "mget" && args.includes(versionKey));
          if (read) readFrom = startedAt;
          else await new Promise((resolve) => setTimeout(resolve, 50)); // polling, as waitFor does
        }
        const phone = fresh(String(range));
        await elsewhere.putNumbers([[phone, { lineType: "PremiumRate" }]]);
        let answer = await send(phone);
        while (answer.body.status !== "spam_detected") answer = await send(phone);
        if (Date.now() >= readFrom + OVERRIDE_PREFIXES_MAX_AGE_MS) continue;
        // Its neighbours in the prefix are read now, and decided by their own data.
        const neighbour = fresh(String(range));
        const seen = await commandsOn(keys.key("num", neighbour), async () => {
          expect((await send(neighbour)).body.status).to.equal("pending");
        });
        expect(seen).to.deep.equal(["hgetall"]);
        return;
      }
    } finally {
      elsewhere.close();
    }
  });

  it("reads every number's data until a start has completed the prefixes of records stored before them", async () => {
    const phone = fresh("652");
    const seenBefore = await commandsOn(keys.key("num", phone), async () => {
      expect((await send(phone)).body.status).to.equal("pending");
    });
    expect(seenBefore, "no override in its prefix yet").to.deep.equal([]);
    // A record written before the prefixes existed, as an older version stored it.
    await app.registry.redis.hset(keys.key("num", phone), { temporary_phone_number: "1" });
    await app.registry.redis.del(keys.key("numovr", "prefixes"), keys.key("numovr", "prefixes", "complete"));
    // Processes that kept the old prefixes stop using them within a second at most.
    await new Promise((resolve) => setTimeout(resolve, 1_050));
    expect((await send(phone)).body.status, "read while not complete").to.equal("spam_detected");

    const next = await startTestApp({ REDIS_KEY_PREFIX: app.config.REDIS_KEY_PREFIX });
    try {
      await waitFor(
        async () => (await app.registry.redis.get(keys.key("numovr", "prefixes", "complete"))) === "1",
      );
    } finally {
      await next.stop();
    }
    expect(await app.registry.redis.sismember(keys.key("numovr", "prefixes"), phone.slice(0, 6))).to.equal(1);
    expect((await send(phone)).body.status, "read through its prefix").to.equal("spam_detected");
  });

  it("sends and charges nothing when the hold index cannot list the customer", async () => {
    const index = app.registry.verify.holdIndexKey();
    const listed = await app.registry.redis.zrange(index, "0", "-1", "WITHSCORES");
    // A fault Redis answers: the index holds a value of another type.
    await app.registry.redis.del(index);
    await app.registry.redis.set(index, "not a set");
    const before = { balance: await balance(), messages: sms.messages.length };
    try {
      const refused = await send(fresh("653"));
      expect(refused.status).to.be.oneOf([500, 503]);
      expect(refused.body.code).to.be.a("string");
      expect(await balance(), "the hold was given back").to.equal(before.balance);
      expect(await app.registry.redis.zcard(keys.key("holds", customer.uuid))).to.equal(0);
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(sms.messages.length, "nothing was sent").to.equal(before.messages);
    } finally {
      await app.registry.redis.del(index);
      // WITHSCORES lists member, score; ZADD takes score, member.
      const pairs = listed.flatMap((v, i) => (i % 2 === 0 ? [listed[i + 1] ?? "0", v] : []));
      if (pairs.length > 0) await app.registry.redis.zadd(index, ...pairs);
    }
    expect((await send(fresh("653"))).body.status).to.equal("pending");
  });
});
