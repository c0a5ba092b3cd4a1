import { expect } from "chai";
import { startApp, type RunningApp } from "../../src/app.js";
import { silentLogger } from "../../src/log.js";
import { LookupKeys } from "../../src/lookup/keys.js";
import { createRedis, Keys, type RedisClient } from "../../src/redis/client.js";
import { testConfig } from "../support/app.js";

describe("a start's background scans", () => {
  let redis: RedisClient;
  let app: RunningApp | undefined;

  before(() => {
    redis = createRedis(testConfig());
  });
  after(async () => {
    await app?.stop();
    redis.disconnect();
  });

  it("settle once the override prefixes of numbers imported before they existed are complete", async function () {
    this.timeout(60_000);
    const config = testConfig({ GRPC_PORT: "0", HTTP_PORT: "0" });
    const keys = new LookupKeys(new Keys(config.REDIS_KEY_PREFIX));
    // Enough records that the scan outlives the start: each costs a read of its own.
    const numbers = Array.from({ length: 3_000 }, (_, i) => `+3361${String(i).padStart(7, "0")}`);
    await Promise.all(numbers.map((n) => redis.hset(keys.number(n), "temporary_phone_number", "1")));

    app = await startApp(config, silentLogger);
    await app.settled();

    expect(await redis.get(keys.overridePrefixesComplete())).to.equal("1");
    // Complete: a send to a prefix without overrides skips the number's data, one with them reads it.
    expect(await app.registry.lookupData.mayOverrideSpam("+33610000000")).to.equal(true);
    expect(await app.registry.lookupData.mayOverrideSpam("+4915112345678")).to.equal(false);
  });
});
