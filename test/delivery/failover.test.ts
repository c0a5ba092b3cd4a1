import { expect } from "chai";
import { startTestApp, type TestApp } from "../support/app.js";
import { SmsReceiver } from "../support/receivers.js";
import { fundedAccount } from "../support/v1.js";
import { rest } from "../support/rest.js";
import { createLogger } from "../../src/log.js";
import { DeliveryKeys } from "../../src/delivery/keys.js";
import { RouteStore } from "../../src/delivery/routes.js";

/** Three HTTP providers on loopback; each test decides how each answers. */
describe("delivery over several providers (V1 sends)", () => {
  let app: TestApp;
  const fakes: Record<"alpha" | "beta" | "gamma", SmsReceiver> = {} as never;
  let customer: { uuid: string; key: string };
  let routes: RouteStore;
  let next = 612_000_000;
  const fresh = () => `+33${(next += 1)}`;

  before(async function () {
    this.timeout(30_000);
    for (const name of ["alpha", "beta", "gamma"] as const) fakes[name] = await SmsReceiver.start();
    app = await startTestApp(
      {
        DELIVERY_PROVIDERS: JSON.stringify(
          (["alpha", "beta", "gamma"] as const).map((name, i) => ({
            name,
            url: fakes[name].url,
            cost: { default: 0.05 - i * 0.01 },
            timeout_ms: 500,
          })),
        ),
        OTP_RETRY_INTERVAL_SECONDS: "0",
      },
      process.env.DEBUG_LOG ? createLogger("debug", (l) => process.stderr.write(l + "\n")) : undefined,
    );
    const { account, apiKey } = await fundedAccount(app.registry.accounts, "Routes");
    customer = { uuid: account.customerUuid, key: apiKey };
    routes = new RouteStore(app.registry.redis, new DeliveryKeys(app.registry.keys));
  });
  after(async () => {
    await app.stop();
    for (const f of Object.values(fakes)) await f.close();
  });
  beforeEach(() => {
    for (const f of Object.values(fakes)) f.receiver.answer = () => 200;
  });

  const send = (phone = fresh()) =>
    rest(app.baseUrl).post(
      "/v1/authentication",
      { customer_uuid: customer.uuid, phone_number: phone },
      { "x-api-key": customer.key },
    );
  const who = (phone: string) =>
    (Object.keys(fakes) as (keyof typeof fakes)[]).filter((n) =>
      fakes[n].messages.some((m) => m.to === phone),
    );

  it("sends through the first provider in declared order without a route", async () => {
    const phone = fresh();
    expect((await send(phone)).status).to.equal(200);
    expect(who(phone)).to.deep.equal(["alpha"]);
  });

  it("fails over within the call when the first provider refuses, charging once", async () => {
    fakes.alpha.receiver.answer = () => 503;
    const before = (await app.registry.accounts.get(customer.uuid))?.balanceMicros ?? 0;
    const phone = fresh();
    const r = await send(phone);
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    expect(who(phone)).to.deep.equal(["beta"]);
    const after = (await app.registry.accounts.get(customer.uuid))?.balanceMicros ?? 0;
    expect(before - after).to.equal(50_000);
  });

  it("follows a country route with the cost strategy", async () => {
    await routes.set({
      channel: "sms",
      destination: "FR",
      providers: ["alpha", "beta", "gamma"],
      strategy: "cost",
    });
    await app.registry.redis.ping();
    const phone = fresh();
    // The route is read again within a second.
    for (let i = 0; i < 50; i++) {
      await new Promise((r) => setTimeout(r, 50));
    }
    expect((await send(phone)).status).to.equal(200);
    expect(who(phone)).to.deep.equal(["gamma"]);
    await routes.remove("sms", "FR");
  });
});
