import { expect } from "chai";
import { startTestApp, type TestApp } from "../support/app.js";
import { fundedAccount, postSend } from "../support/v1.js";
import { SmsFake } from "../support/routing.js";
import { DeliveryKeys } from "../../src/delivery/keys.js";
import { REFRESH_MS } from "../../src/delivery/router.js";
import { RouteStore, type Route } from "../../src/delivery/routes.js";

/**
 * How late one send through the other instance may start after the change and still count: a
 * poll is one V1 send, which a loaded machine may take this long to answer.
 */
const POLL_SLACK_MS = 500;

/**
 * docs/routing.md#routes (9.2, row "Routes"): routes are kept in Redis and every instance obeys a
 * change within 1 s, without a restart. Two instances of the service share one Redis key prefix;
 * the routes are changed through the first, and the second's sends are watched.
 */
describe("delivery routes across instances (9.2 row Routes: every instance within 1 s)", () => {
  let first: TestApp;
  let second: TestApp;
  let alpha: SmsFake;
  let beta: SmsFake;
  let routes: RouteStore;
  let keys: DeliveryKeys;
  let customer: { uuid: string; key: string };
  let next = 612_900_000;
  const fresh = () => `+33${(next += 1000)}`;

  before(async function () {
    this.timeout(30_000);
    alpha = await SmsFake.start();
    beta = await SmsFake.start();
    const env = {
      DELIVERY_PROVIDERS: JSON.stringify([
        { name: "alpha", url: alpha.url },
        { name: "beta", url: beta.url },
      ]),
    };
    first = await startTestApp(env);
    second = await startTestApp({ ...env, REDIS_KEY_PREFIX: first.config.REDIS_KEY_PREFIX });
    keys = new DeliveryKeys(first.registry.keys);
    routes = new RouteStore(first.registry.redis, keys);
    const { account, apiKey } = await fundedAccount(first.registry.accounts, "Instances", 100_000_000);
    customer = { uuid: account.customerUuid, key: apiKey };
  });
  after(async () => {
    await Promise.all([first.stop(), second.stop()]);
    await Promise.all([alpha.close(), beta.close()]);
  });
  afterEach(async () => {
    for (const r of await routes.list()) await routes.remove(r.channel, r.destination);
  });

  /** The provider the second instance sends a fresh number through now. */
  async function carrierOnSecond(): Promise<string> {
    const phone = fresh();
    const r = await postSend(second.baseUrl, customer.key, {
      customer_uuid: customer.uuid,
      phone_number: phone,
    });
    expect([r.status, r.body.status], r.text).to.deep.equal([200, "pending"]);
    return alpha.to(phone).length > 0 ? "alpha" : beta.to(phone).length > 0 ? "beta" : "none";
  }

  /**
   * Sends through the second instance until it uses `provider`; answers how long after `since`
   * the send that did so started.
   */
  async function obeyedAfter(since: number, provider: string, timeoutMs = 5_000): Promise<number> {
    for (;;) {
      const started = Date.now();
      if ((await carrierOnSecond()) === provider) return started - since;
      if (Date.now() - since > timeoutMs)
        throw new Error(`the second instance never sent through ${provider}`);
    }
  }

  const FR_BETA: Route = {
    channel: "sms",
    destination: "FR",
    providers: ["beta", "alpha"],
    strategy: "failover",
  };

  it("reads the routes again at least every second, besides each change announced", () => {
    expect(REFRESH_MS).to.be.at.most(1_000);
  });

  it("has the other instance obey a route set through one within a second, and its removal", async () => {
    expect(await carrierOnSecond(), "no route: declared order").to.equal("alpha");

    const set = Date.now();
    await routes.set(FR_BETA);
    expect(await obeyedAfter(set, "beta")).to.be.below(1_000 + POLL_SLACK_MS);

    const removed = Date.now();
    expect(await routes.remove("sms", "FR")).to.equal(true);
    expect(await obeyedAfter(removed, "alpha")).to.be.below(1_000 + POLL_SLACK_MS);
  });

  it("has the other instance obey a change within a second even when the announcement is lost", async () => {
    expect(await carrierOnSecond()).to.equal("alpha");
    // Written as RouteStore.set writes it, without announcing it: only the periodic reading finds it.
    const written = Date.now();
    await first.registry.redis.hset(keys.routes(), "sms FR", JSON.stringify(FR_BETA));
    expect(await obeyedAfter(written, "beta")).to.be.below(REFRESH_MS + POLL_SLACK_MS);
  });
});
