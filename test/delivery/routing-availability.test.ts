import { expect } from "chai";
import { fundedAccount, postSend } from "../support/v1.js";
import { FakeSmsc } from "../support/fake-smsc.js";
import { testPort } from "../support/ports.js";
import { waitFor } from "../support/redis.js";
import { rest } from "../support/rest.js";
import { availableGauge, sentTotal, SmsFake, startRoutedApp, type RoutedApp } from "../support/routing.js";

const PRICE = 50_000; // SMS_PRICES' default, 0.05

/** A French mobile number in a range of its own (SPAM_RANGE_BURST counts per range). */
function frenchNumbers(first: number) {
  let next = first;
  return () => `+33${(next += 1000)}`;
}

/** What one send did: the answer, the change of balance, and the submits each provider counted. */
interface Outcome {
  status: number;
  body: Record<string, unknown>;
  charged: number;
  sent: Record<string, number>;
}

/** Runs `send` and measures what it cost and the submits it added to ringfence_delivery_sent_total. */
async function measured(
  app: RoutedApp,
  customer: string,
  providers: readonly string[],
  send: () => Promise<{ status: number; body: Record<string, unknown> }>,
): Promise<Outcome> {
  const balance = async () => (await app.registry.accounts.get(customer))?.balanceMicros ?? Number.NaN;
  const counts = async () => {
    const text = await app.metrics();
    return Object.fromEntries(providers.map((p) => [p, sentTotal(text, p)]));
  };
  const [before, countsBefore] = [await balance(), await counts()];
  const { status, body } = await send();
  const [after, countsAfter] = [await balance(), await counts()];
  return {
    status,
    body,
    charged: before - after,
    sent: Object.fromEntries(providers.map((p) => [p, (countsAfter[p] ?? 0) - (countsBefore[p] ?? 0)])),
  };
}

/**
 * docs/routing.md#availability (9.2, row "Availability", and Details: a timed-out submit is given
 * up and the message goes on): a submit refused, failed, timed out or impossible (SMPP bind down)
 * goes at once to the next provider within the call, and the account pays once, for the message
 * accepted.
 */
describe("delivery availability: failover inside the call (9.2 row Availability)", () => {
  let app: RoutedApp;
  let alpha: SmsFake;
  let beta: SmsFake;
  let smsc: FakeSmsc;
  let refusing: FakeSmsc;
  let customer: { uuid: string; key: string };
  const fresh = frenchNumbers(612_300_000);
  const PROVIDERS = ["alpha", "beta", "sigma", "omega"] as const;

  before(async function () {
    this.timeout(30_000);
    alpha = await SmsFake.start();
    beta = await SmsFake.start();
    smsc = await FakeSmsc.start();
    refusing = await FakeSmsc.start();
    app = await startRoutedApp({
      DELIVERY_PROVIDERS: JSON.stringify([
        { name: "alpha", url: alpha.url, timeout_ms: 300 },
        { name: "beta", url: beta.url },
        { name: "sigma", url: smsc.url() },
        // Its SMSC refuses the bind (wrong password): never available.
        { name: "omega", url: refusing.url("wrong-password") },
      ]),
      // These tests fail one provider many times; the circuit has its own tests below.
      PROVIDER_CIRCUIT_FAILURES: "1000",
      ADMIN_PORT: String(await testPort()),
    });
    const { account, apiKey } = await fundedAccount(app.registry.accounts, "Failover", 100_000_000);
    customer = { uuid: account.customerUuid, key: apiKey };
  });
  after(async () => {
    await app.stop();
    await Promise.all([alpha.close(), beta.close(), smsc.close(), refusing.close()]);
  });
  beforeEach(async () => {
    alpha.reset();
    beta.reset();
    await app.clearRoutes();
  });

  const send = (phone: string) =>
    measured(app, customer.uuid, PROVIDERS, () =>
      postSend(app.baseUrl, customer.key, { customer_uuid: customer.uuid, phone_number: phone }),
    );

  const cases: [string, () => void][] = [
    ["refuses the message (400)", () => (alpha.answer = () => 400)],
    ["fails (500)", () => (alpha.answer = () => 500)],
    ["does not answer within its timeout_ms (300 ms)", () => (alpha.answer = () => "hang")],
  ];
  for (const [what, make] of cases) {
    it(`goes on to the next provider when the first ${what}, charging once`, async () => {
      make();
      const phone = fresh();
      const r = await send(phone);
      expect([r.status, r.body.status], JSON.stringify(r.body)).to.deep.equal([200, "pending"]);
      expect(alpha.to(phone), "alpha was tried once").to.have.length(1);
      expect(
        beta.accepted.filter((m) => m.to === phone),
        "beta took it",
      ).to.have.length(1);
      expect(beta.to(phone)[0]?.reference, "the same message").to.equal(alpha.to(phone)[0]?.reference);
      expect(r.charged, "charged once").to.equal(PRICE);
      expect(r.sent, "both submits counted").to.deep.equal({ alpha: 1, beta: 1, sigma: 0, omega: 0 });
    });
  }

  it("skips an SMPP provider whose bind is down, at once, and charges once", async () => {
    await app.setRoute({
      channel: "sms",
      destination: "FR",
      providers: ["sigma", "beta"],
      strategy: "failover",
    });
    // Bound: sigma carries the message.
    const first = fresh();
    const up = await send(first);
    expect([up.status, up.charged, up.sent], JSON.stringify(up.body)).to.deep.equal([
      200,
      PRICE,
      { alpha: 0, beta: 0, sigma: 1, omega: 0 },
    ]);
    expect(smsc.submits.map((s) => s.destination_addr)).to.deep.equal([first.slice(1)]);

    // The SMSC goes away: the bind is down, the provider reported unavailable, and skipped.
    await smsc.close();
    await waitFor(async () => availableGauge(await app.metrics(), "sigma") === 0);
    const phone = fresh();
    const r = await send(phone);
    expect([r.status, r.body.status], JSON.stringify(r.body)).to.deep.equal([200, "pending"]);
    expect(beta.accepted.map((m) => m.to)).to.deep.equal([phone]);
    expect(r.charged).to.equal(PRICE);
    expect(r.sent, "no submit tried through sigma").to.deep.equal({ alpha: 0, beta: 1, sigma: 0, omega: 0 });
  });

  it("skips an SMPP provider whose SMSC refuses the bind", async () => {
    await app.setRoute({
      channel: "sms",
      destination: "FR",
      providers: ["omega", "beta"],
      strategy: "failover",
    });
    await waitFor(
      async () => refusing.binds.length > 0 && availableGauge(await app.metrics(), "omega") === 0,
    );
    expect(refusing.binds.every((b) => !b.accepted)).to.equal(true);
    const phone = fresh();
    const r = await send(phone);
    expect([r.status, r.body.status], JSON.stringify(r.body)).to.deep.equal([200, "pending"]);
    expect(beta.accepted.map((m) => m.to)).to.deep.equal([phone]);
    expect(r.charged).to.equal(PRICE);
    expect(r.sent).to.deep.equal({ alpha: 0, beta: 1, sigma: 0, omega: 0 });
    expect(refusing.submits).to.deep.equal([]);
  });

  // 9.2 Details: "A submit that times out is given up (its hold released, never re-sent through
  // it) ...; hold recovery is for a service that died mid-call": the last provider tried too.
  it("gives up a timed-out submit even when it was the last provider: nothing charged", async () => {
    await app.setRoute({
      channel: "sms",
      destination: "FR",
      providers: ["beta", "alpha"],
      strategy: "failover",
    });
    beta.answer = () => 400;
    alpha.answer = () => "hang";
    const phone = fresh();
    const r = await send(phone);
    expect([beta.to(phone).length, alpha.to(phone).length]).to.deep.equal([1, 1]);
    expect([r.status, r.body.code], JSON.stringify(r.body)).to.deep.equal([500, "internal_server_error"]);
    expect(r.charged, "nothing charged").to.equal(0);
  });

  it("fails the call and charges nothing when every provider of the route refuses", async () => {
    await app.setRoute({
      channel: "sms",
      destination: "FR",
      providers: ["alpha", "beta"],
      strategy: "failover",
    });
    alpha.answer = () => 503;
    beta.answer = () => 400;
    const phone = fresh();
    const r = await send(phone);
    expect(r.status, JSON.stringify(r.body)).to.equal(500);
    expect(r.body.code).to.equal("internal_server_error");
    expect([alpha.to(phone).length, beta.to(phone).length]).to.deep.equal([1, 1]);
    expect(r.charged, "nothing charged").to.equal(0);
    expect(r.sent).to.deep.equal({ alpha: 1, beta: 1, sigma: 0, omega: 0 });
  });
});

/**
 * docs/routing.md#availability (9.2, rows "Availability" and Details: the circuit's probe is half-
 * open): PROVIDER_CIRCUIT_FAILURES=3 refused submits in a row open alpha's circuit for
 * PROVIDER_CIRCUIT_OPEN_SECONDS=1; then one message probes it.
 */
describe("delivery availability: a provider's circuit (9.2 rows Availability and Details)", () => {
  let app: RoutedApp;
  let alpha: SmsFake;
  let beta: SmsFake;
  let customer: { uuid: string; key: string };
  const fresh = frenchNumbers(612_500_000);

  before(async function () {
    this.timeout(30_000);
    alpha = await SmsFake.start();
    beta = await SmsFake.start();
    app = await startRoutedApp({
      DELIVERY_PROVIDERS: JSON.stringify([
        { name: "alpha", url: alpha.url },
        { name: "beta", url: beta.url, timeout_ms: 300 },
      ]),
      PROVIDER_CIRCUIT_FAILURES: "3",
      PROVIDER_CIRCUIT_OPEN_SECONDS: "1",
      ADMIN_PORT: String(await testPort()),
    });
    const { account, apiKey } = await fundedAccount(app.registry.accounts, "Circuit", 100_000_000);
    customer = { uuid: account.customerUuid, key: apiKey };
  });
  after(async () => {
    await app.stop();
    await Promise.all([alpha.close(), beta.close()]);
  });

  /** Sends one code; the call must succeed (alpha or beta takes it). */
  async function send(): Promise<string> {
    const phone = fresh();
    const r = await postSend(app.baseUrl, customer.key, {
      customer_uuid: customer.uuid,
      phone_number: phone,
    });
    expect([r.status, r.body.status], r.text).to.deep.equal([200, "pending"]);
    return phone;
  }
  const gauge = async () => availableGauge(await app.metrics(), "alpha");

  /** Sends `concurrent` codes at a time until alpha gets a request; answers when it did and what each batch did. */
  async function untilProbed(concurrent: number): Promise<{ at: number; phones: string[] }> {
    const seen = alpha.requests.length;
    let last = { at: 0, phones: [] as string[] };
    await waitFor(async () => {
      const at = Date.now();
      const phones = await Promise.all(Array.from({ length: concurrent }, () => send()));
      last = { at, phones };
      return alpha.requests.length > seen;
    });
    return last;
  }

  it("keeps the circuit closed for refusals of single messages: a caller sending numbers a provider refuses cannot open it for everyone", async () => {
    alpha.answer = () => 400;
    const phones: string[] = [];
    for (let i = 0; i < 6; i++) phones.push(await send());
    // Each refusal went on to beta within its call, and alpha was asked every time.
    expect(alpha.requests, "alpha asked each time").to.have.length(6);
    expect(beta.accepted.filter((m) => phones.includes(m.to))).to.have.length(6);
    expect(await gauge(), "still available").to.equal(1);
    alpha.reset();
    beta.reset();
  });

  it("skips a provider after 3 failures in a row, probes it once after 1 s, reopens on a failed probe, closes on a good one", async () => {
    expect(await gauge()).to.equal(1);
    alpha.answer = () => 503;
    let openedAfter = 0;
    for (let i = 0; i < 3; i++) {
      openedAfter = Date.now();
      await send();
    }
    expect(alpha.requests, "three failed submits").to.have.length(3);
    expect(beta.accepted, "each went on to beta").to.have.length(3);
    expect(await gauge(), "open: unavailable").to.equal(0);

    // Open: skipped, no request at all, for PROVIDER_CIRCUIT_OPEN_SECONDS.
    const skipped = await Promise.all([send(), send(), send()]);
    const within = Date.now() - openedAfter < 1_000;
    // (A machine so slow that the second passed may have probed alpha with one of them.)
    if (within) expect(alpha.requests, "no request while open").to.have.length(3);
    expect(alpha.requests.length, "one probe at most").to.be.at.most(4);
    expect(beta.accepted.filter((m) => skipped.includes(m.to)).length).to.be.at.least(within ? 3 : 2);

    // Half-open after 1 s: one message probes alpha; it fails, the message goes on to beta.
    const probe = await untilProbed(1);
    expect(alpha.requests, "one probe").to.have.length(4);
    expect(Date.now() - openedAfter, "not before the circuit's second").to.be.at.least(1_000);
    expect(beta.accepted.map((m) => m.to)).to.include(probe.phones[0]);
    expect(await gauge(), "still unavailable").to.equal(0);

    // Open again: skipped again.
    const reopenedAfter = probe.at;
    await send();
    if (Date.now() - reopenedAfter < 1_000)
      expect(alpha.requests, "skipped after a failed probe").to.have.length(4);

    // A good probe closes it. While the probe is out, the others skip alpha: one probe only.
    alpha.answer = () =>
      new Promise((resolve) => {
        setTimeout(() => {
          resolve(200);
        }, 500);
      });
    const seen = alpha.requests.length;
    const good = await untilProbed(5);
    expect(alpha.requests.length - seen, "one probe among concurrent sends").to.equal(1);
    expect(good.phones.filter((p) => beta.accepted.some((m) => m.to === p))).to.have.length(4);
    await waitFor(async () => (await gauge()) === 1);

    // Closed: alpha takes the traffic again.
    alpha.answer = () => 200;
    const after = [await send(), await send()];
    expect(alpha.accepted.filter((m) => after.includes(m.to))).to.have.length(2);
  });

  // A probe's place taken for a message that never went out (its caller's deadline passed before
  // alpha's turn) is given back: alpha is probed again, not skipped for good.
  it("tries the provider again after a probe whose call was cut before it went out", async function () {
    this.timeout(20_000);
    alpha.reset();
    beta.reset();
    alpha.answer = () => 503;
    for (let i = 0; i < 3; i++) await send();
    expect(await gauge()).to.equal(0);
    await waitFor(() => Promise.resolve(app.router.isAvailable("alpha")));

    // Half-open: the probe is the next message to reach alpha. beta is first on the route and does
    // not answer in its 300 ms; the caller gave the call 150 ms, so when alpha's turn comes the
    // message is not sent at all (nothing went out: the hold is released, nothing charged).
    await app.setRoute({
      channel: "sms",
      destination: "FR",
      providers: ["beta", "alpha"],
      strategy: "failover",
    });
    beta.answer = () => "hang";
    const phone = fresh();
    await rest(app.baseUrl).call("POST", "/v1/authentication", {
      body: { customer_uuid: customer.uuid, phone_number: phone },
      headers: { "x-api-key": customer.key, "grpc-timeout": "150m" },
    });
    await waitFor(() => Promise.resolve(beta.to(phone).length === 1));
    expect(alpha.requests, "the cut call sent nothing to alpha").to.have.length(3);

    // alpha answers again; it must be probed again, at the latest after another open period.
    alpha.answer = () => 200;
    beta.answer = () => 200;
    await app.clearRoutes();
    await waitFor(async () => {
      await send();
      return alpha.accepted.length > 0;
    }, 5_000);
  });
});
