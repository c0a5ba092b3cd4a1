import { expect } from "chai";
import { fundedAccount, postSend } from "../support/v1.js";
import { rest, type RestAnswer } from "../support/rest.js";
import { SmsReceiver } from "../support/receivers.js";
import { waitFor } from "../support/redis.js";
import { SmsFake, startRoutedApp, type RoutedApp } from "../support/routing.js";
import type { Route } from "../../src/delivery/routes.js";

const NAMES = ["alpha", "beta", "gamma", "delta"] as const;
type Name = (typeof NAMES)[number];

/** Numbers whose country and network the lookup knows (libphonenumber's carrier data, mcc-mnc-list). */
function numbers(first: number, prefix = "+") {
  let next = first;
  // A step of 1000: each number in a range of its own, so SPAM_RANGE_BURST never refuses one.
  return () => `${prefix}${(next += 1000)}`;
}

/**
 * docs/routing.md#routes, #strategies and #retries (9.2, rows "Routes", "Strategies" and
 * "Retries"): V1 and V2 sends through four HTTP providers on loopback, with routes written as
 * `ringfence routes set` writes them.
 */
describe("delivery routes: precedence, strategies and retries (9.2)", () => {
  let app: RoutedApp;
  const fakes = {} as Record<Name, SmsFake>;
  let customer: { uuid: string; key: string };
  const sfr = numbers(33_612_100_000); // FR, SFR: 208-09
  const bouygues650 = numbers(33_650_100_000); // FR, Bouygues: 208-20, under +33650
  const bouygues658 = numbers(33_658_100_000); // FR, Bouygues: 208-20, under +3365 only
  const bouygues660 = numbers(33_660_100_000); // FR, Bouygues: 208-20, under no prefix route
  const germany = numbers(4_915_112_340_000); // DE
  const spain = numbers(34_612_345_000); // ES

  before(async function () {
    this.timeout(30_000);
    for (const name of NAMES) fakes[name] = await SmsFake.start();
    const costs: Record<Name, Record<string, number> | undefined> = {
      alpha: { default: 0.05, FR: 0.02 },
      beta: { default: 0.03 },
      gamma: { default: 0.04, DE: 0.01 },
      delta: undefined,
    };
    app = await startRoutedApp({
      DELIVERY_PROVIDERS: JSON.stringify(
        NAMES.map((name) => ({
          name,
          url: fakes[name].url,
          ...(costs[name] === undefined ? {} : { cost: costs[name] }),
        })),
      ),
      OTP_RETRY_INTERVAL_SECONDS: "0",
      // These tests make providers refuse on purpose; circuits are tested in routing-availability.
      PROVIDER_CIRCUIT_FAILURES: "1000",
    });
    const { account, apiKey } = await fundedAccount(app.registry.accounts, "Routes", 100_000_000);
    customer = { uuid: account.customerUuid, key: apiKey };
  });
  after(async () => {
    await app.stop();
    for (const f of Object.values(fakes)) await f.close();
  });
  beforeEach(async () => {
    for (const f of Object.values(fakes)) f.reset();
    await app.clearRoutes();
  });

  /** Sends a V1 code to `phone`; the call must succeed. */
  async function sendV1(phone: string): Promise<RestAnswer> {
    const r = await postSend(app.baseUrl, customer.key, {
      customer_uuid: customer.uuid,
      phone_number: phone,
    });
    expect(r.status, r.text).to.equal(200);
    expect(r.body.status, r.text).to.equal("pending");
    return r;
  }

  /** Creates (or, for a target already running, retries) a V2 verification of `phone`. */
  async function sendV2(phone: string): Promise<RestAnswer> {
    const r = await rest(app.baseUrl).call("POST", "/v2/verification", {
      body: { target: { type: "phone_number", value: phone } },
      bearer: customer.key,
    });
    expect(r.status, r.text).to.equal(200);
    return r;
  }

  /** The providers that accepted a message to `phone`, in declared order. */
  const carriers = (phone: string) => NAMES.filter((n) => fakes[n].accepted.some((m) => m.to === phone));
  /** The providers that got any request for `phone`, accepted or not. */
  const tried = (phone: string) => NAMES.filter((n) => fakes[n].to(phone).length > 0);

  const route = (destination: string, providers: Name[], extra: Partial<Route> = {}): Route => ({
    channel: "sms",
    destination,
    providers,
    strategy: "failover",
    ...extra,
  });

  describe("precedence (row Routes: the most specific destination wins)", () => {
    /** Where one fresh number of each kind goes now, through V1 and through V2. */
    async function whereEachGoes(): Promise<Record<string, Name[]>> {
      const kinds = { bouygues650, bouygues658, bouygues660, sfr, germany };
      const seen: Record<string, Name[]> = {};
      for (const [kind, fresh] of Object.entries(kinds)) {
        const v1 = fresh();
        await sendV1(v1);
        const v2 = fresh();
        await sendV2(v2);
        expect(carriers(v2), `${kind} through V2`).to.deep.equal(carriers(v1));
        seen[kind] = carriers(v1);
      }
      return seen;
    }

    it("takes the longest prefix, then the network (MCC-MNC), then the country, then default, then declared order", async () => {
      // Written from the least specific to the most, then removed from the most specific: neither
      // the order of writing nor the table's order decides, only specificity.
      for (const r of [
        route("+33650", ["gamma"]),
        route("+3365", ["alpha"]),
        route("208-20", ["beta"]),
        route("FR", ["gamma"]),
        route("default", ["delta"]),
      ].reverse()) {
        await app.setRoute(r);
      }
      expect(await whereEachGoes(), "every route").to.deep.equal({
        bouygues650: ["gamma"], // +33650 over +3365, over 208-20, over FR
        bouygues658: ["alpha"], // +3365 over 208-20
        bouygues660: ["beta"], // 208-20 over FR
        sfr: ["gamma"], // FR (its network 208-09 has no route)
        germany: ["delta"], // default
      });

      await app.routes.remove("sms", "+33650");
      await app.refresh();
      expect((await whereEachGoes()).bouygues650, "without +33650: the shorter prefix").to.deep.equal([
        "alpha",
      ]);

      await app.routes.remove("sms", "+3365");
      await app.refresh();
      expect(await whereEachGoes(), "without prefixes: the network").to.deep.include({
        bouygues650: ["beta"],
        bouygues658: ["beta"],
        sfr: ["gamma"],
      });

      await app.routes.remove("sms", "208-20");
      await app.refresh();
      expect(await whereEachGoes(), "without the network: the country").to.deep.include({
        bouygues650: ["gamma"],
        bouygues660: ["gamma"],
        germany: ["delta"],
      });

      await app.routes.remove("sms", "FR");
      await app.refresh();
      expect(new Set(Object.values(await whereEachGoes()).flat()), "default only").to.deep.equal(
        new Set(["delta"]),
      );

      await app.routes.remove("sms", "default");
      await app.refresh();
      expect(new Set(Object.values(await whereEachGoes()).flat()), "no route").to.deep.equal(
        new Set(["alpha"]),
      );
    });

    // Login and step-up codes follow the same routes (src/delivery/module.ts, routedSms).
    it("routes a session login code as a verification code, its network route included", async () => {
      await app.setRoute(route("FR", ["alpha"]));
      await app.setRoute(route("208-20", ["gamma"]));
      const viaV1 = bouygues660();
      await sendV1(viaV1);
      expect(carriers(viaV1), "a V1 code").to.deep.equal(["gamma"]);

      const { app: made } = await app.registry.apps.create("Routed logins");
      const phone = bouygues660();
      const started = await rest(app.baseUrl).call("POST", "/v1/session/login/otp", {
        body: { app_id: made.appId, identifier: { type: "phone_number", value: phone } },
      });
      expect(started.status, started.text).to.equal(200);
      await waitFor(() => Promise.resolve(tried(phone).length > 0));
      expect(carriers(phone), "a login code").to.deep.equal(["gamma"]);
    });

    it("without a route, fails over in declared order, failover strategy", async () => {
      fakes.alpha.answer = () => 503;
      fakes.beta.answer = () => 400;
      const phone = sfr();
      await sendV1(phone);
      expect(tried(phone)).to.deep.equal(["alpha", "beta", "gamma"]);
      expect(carriers(phone)).to.deep.equal(["gamma"]);
    });
  });

  describe("strategies (row Strategies, and Details: the next provider after a failure)", () => {
    it("failover: the first provider in the route's order, then the next in that order", async () => {
      await app.setRoute(route("FR", ["gamma", "beta", "alpha"]));
      const first = sfr();
      await sendV1(first);
      expect(tried(first)).to.deep.equal(["gamma"]);

      fakes.gamma.answer = () => 503;
      const second = sfr();
      await sendV1(second);
      expect([fakes.gamma.to(second).length, carriers(second)]).to.deep.equal([1, ["beta"]]);

      fakes.beta.answer = () => 422;
      const third = sfr();
      await sendV1(third);
      expect(carriers(third)).to.deep.equal(["alpha"]);
      expect(fakes.delta.requests, "delta is not on the route").to.deep.equal([]);
    });

    it("weighted: 70/30 over 400 sends splits within 8 points, and a refusal goes to the other", async () => {
      await app.setRoute(route("FR", ["alpha", "beta"], { strategy: "weighted", weights: [70, 30] }));
      const sent: string[] = [];
      for (let batch = 0; batch < 20; batch++) {
        const phones = Array.from({ length: 20 }, () => sfr());
        await Promise.all(phones.map((p) => sendV1(p)));
        sent.push(...phones);
      }
      const alpha = sent.filter((p) => carriers(p)[0] === "alpha").length;
      const beta = sent.filter((p) => carriers(p)[0] === "beta").length;
      expect(alpha + beta, "each message went to alpha or beta, once").to.equal(400);
      expect(alpha / 400).to.be.within(0.62, 0.78);
      expect(fakes.gamma.requests.length + fakes.delta.requests.length).to.equal(0);

      // The next by weight after a refusal: the only other provider, every time.
      fakes.alpha.answer = () => 503;
      const phones = Array.from({ length: 10 }, () => sfr());
      await Promise.all(phones.map((p) => sendV1(p)));
      expect(phones.map(carriers)).to.deep.equal(phones.map(() => ["beta"]));
    });

    it("cost: the cheapest by the country's cost, else its default cost; a provider without cost last", async () => {
      // alpha FR 0.02 (default 0.05), beta default 0.03, gamma DE 0.01 (default 0.04), delta no cost.
      const all: Name[] = ["delta", "gamma", "beta", "alpha"];
      await app.setRoute(route("default", all, { strategy: "cost" }));
      const fr = sfr();
      const de = germany();
      const es = spain();
      for (const p of [fr, de, es]) await sendV1(p);
      expect([carriers(fr), carriers(de), carriers(es)]).to.deep.equal([["alpha"], ["gamma"], ["beta"]]);

      // After a refusal, the next cheapest: FR alpha, beta, gamma, then delta.
      fakes.alpha.answer = () => 503;
      const second = sfr();
      await sendV1(second);
      expect(carriers(second)).to.deep.equal(["beta"]);
      fakes.beta.answer = () => 503;
      fakes.gamma.answer = () => 503;
      const last = sfr();
      await sendV1(last);
      expect(tried(last)).to.deep.equal(["alpha", "beta", "gamma", "delta"]);
      expect(carriers(last)).to.deep.equal(["delta"]);
    });
  });

  describe("retries (row Retries: another provider of the route first)", () => {
    const retryV1 = (auth: unknown) =>
      rest(app.baseUrl).post(
        "/v1/retry",
        { customer_uuid: customer.uuid, authentication_uuid: auth },
        { "x-api-key": customer.key },
      );

    it("sends a V1 retry through another provider than the attempt before it", async () => {
      const phone = sfr();
      const sent = await sendV1(phone);
      expect(carriers(phone)).to.deep.equal(["alpha"]);

      const first = await retryV1(sent.body.authentication_uuid);
      expect([first.status, first.body.status], first.text).to.deep.equal([200, "approved"]);
      expect(fakes.beta.to(phone), "the retry went to beta").to.have.length(1);
      expect(fakes.alpha.to(phone), "and not to alpha again").to.have.length(1);

      // The attempt before the second retry was beta's: alpha, first in order, takes it.
      const second = await retryV1(sent.body.authentication_uuid);
      expect(second.body.status, second.text).to.equal("approved");
      expect(fakes.alpha.to(phone)).to.have.length(2);
      expect(fakes.beta.to(phone)).to.have.length(1);

      // The code of the last message is the one that checks right.
      const [, last] = fakes.alpha.to(phone);
      if (last === undefined) throw new Error("no second message");
      const checked = await rest(app.baseUrl).post(
        "/v1/check",
        {
          customer_uuid: customer.uuid,
          authentication_uuid: sent.body.authentication_uuid,
          check_code: SmsReceiver.code(last),
        },
        { "x-api-key": customer.key },
      );
      expect(checked.body.status, checked.text).to.equal("valid");
    });

    it("sends a V2 retry (a second creation for the running target) through another provider", async () => {
      const phone = sfr();
      const created = await sendV2(phone);
      expect(created.body.status, created.text).to.equal("success");
      expect(carriers(phone)).to.deep.equal(["alpha"]);
      const again = await sendV2(phone);
      expect([again.body.status, again.body.id], again.text).to.deep.equal(["retry", created.body.id]);
      expect([fakes.alpha.to(phone).length, fakes.beta.to(phone).length]).to.deep.equal([1, 1]);
    });

    it("keeps a retry on the same provider when the route has no other available", async () => {
      await app.setRoute(route("DE", ["gamma"]));
      const phone = germany();
      const sent = await sendV1(phone);
      const retried = await retryV1(sent.body.authentication_uuid);
      expect(retried.body.status, retried.text).to.equal("approved");
      expect(fakes.gamma.to(phone)).to.have.length(2);

      // The other provider tried first refuses: the retry fails over to the one before, in the call.
      await app.setRoute(route("FR", ["alpha", "beta"]));
      fakes.beta.answer = () => 503;
      const fr = sfr();
      const frSent = await sendV1(fr);
      const frRetry = await retryV1(frSent.body.authentication_uuid);
      expect(frRetry.body.status, frRetry.text).to.equal("approved");
      expect([
        fakes.beta.to(fr).length,
        fakes.alpha.accepted.filter((m) => m.to === fr).length,
      ]).to.deep.equal([1, 2]);
    });
  });
});
