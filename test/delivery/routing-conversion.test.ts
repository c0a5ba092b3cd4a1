import { expect } from "chai";
import { fundedAccount, postSend } from "../support/v1.js";
import { rest } from "../support/rest.js";
import { waitFor } from "../support/redis.js";
import { SmsReceiver } from "../support/receivers.js";
import { SmsFake, startRoutedApp, totals, type RoutedApp } from "../support/routing.js";

const NAMES = ["lossy", "good1", "good2"] as const;
type Name = (typeof NAMES)[number];

const BATCHES = 20;
const BATCH = 20;

/**
 * docs/routing.md#strategies (9.2, rows "Strategies", `conversion`, and Details: figures per route
 * destination and provider; fewer than ROUTE_MIN_SENDS counts as best; the explore share is a
 * floor): the FR route's three providers all accept every message, but lossy's users get only one
 * message in five. Simulated users check the code of every message they get, read from the
 * provider's body.
 */
describe("delivery: the conversion strategy end to end (9.2 row Strategies, conversion)", () => {
  let app: RoutedApp;
  const fakes = {} as Record<Name, SmsFake>;
  let customer: { uuid: string; key: string };
  let next = 612_800_000;
  const fresh = () => `+33${(next += 1000)}`;

  before(async function () {
    this.timeout(30_000);
    for (const name of NAMES) fakes[name] = await SmsFake.start();
    app = await startRoutedApp({
      DELIVERY_PROVIDERS: JSON.stringify(NAMES.map((name) => ({ name, url: fakes[name].url }))),
      ROUTE_MIN_SENDS: "10",
      ROUTE_EXPLORE_SHARE: "0.1",
    });
    const { account, apiKey } = await fundedAccount(app.registry.accounts, "Conversion", 100_000_000);
    customer = { uuid: account.customerUuid, key: apiKey };
    // lossy first in declared order: it is chosen while nothing is measured.
    await app.setRoute({ channel: "sms", destination: "FR", providers: [...NAMES], strategy: "conversion" });
  });
  after(async () => {
    await app.stop();
    for (const f of Object.values(fakes)) await f.close();
  });

  /** Whether the user of a message lossy took ever gets it: one in five, by arrival. */
  const reachesUser = (provider: Name, index: number) => provider !== "lossy" || index % 5 === 0;

  it("sends most traffic to the providers whose codes are entered, and keeps exploring the other", async function () {
    this.timeout(120_000);
    const carrier: Name[] = [];
    let checked = 0;
    for (let batch = 0; batch < BATCHES; batch++) {
      const sends = await Promise.all(
        Array.from({ length: BATCH }, async () => {
          const phone = fresh();
          const r = await postSend(app.baseUrl, customer.key, {
            customer_uuid: customer.uuid,
            phone_number: phone,
          });
          expect([r.status, r.body.status], r.text).to.deep.equal([200, "pending"]);
          return { phone, auth: String(r.body.authentication_uuid) };
        }),
      );
      // The users who got their message enter its code.
      await Promise.all(
        sends.map(async ({ phone, auth }) => {
          const name = NAMES.find((n) => fakes[n].to(phone).length > 0);
          if (name === undefined) throw new Error(`no provider got ${phone}`);
          carrier.push(name);
          const m = await fakes[name].received(phone);
          if (!reachesUser(name, fakes[name].requests.indexOf(m))) return;
          const r = await rest(app.baseUrl).post(
            "/v1/check",
            { customer_uuid: customer.uuid, authentication_uuid: auth, check_code: SmsReceiver.code(m) },
            { "x-api-key": customer.key },
          );
          expect(r.body.status, r.text).to.equal("valid");
          checked += 1;
        }),
      );
      // The figures are counted in the process and written by the router's next read (every
      // second, or now): once all are in Redis, the router reads them.
      const sent = (batch + 1) * BATCH;
      await waitFor(async () => {
        await app.refresh();
        const t = totals(await app.stats.figures("sms", "FR"));
        return t.sent === sent && t.accepted === sent && t.verified === checked;
      });
      await app.refresh();
    }

    const share = (names: readonly Name[], last: number) =>
      carrier.slice(-last).filter((n) => names.includes(n)).length;
    const figures = await app.stats.figures("sms", "FR");
    const report = JSON.stringify({ carrier: carrier.join(","), figures: [...figures] });
    // Measured: lossy converts about 0.2, the two others 1.
    expect(figures.get("lossy")?.sent ?? 0, report).to.be.at.least(10);
    expect(share(["good1", "good2"], 100), report).to.be.at.least(70);
    // Exploring: one send in ten goes first to one of the two others, so lossy gets ~5% (15 of 300).
    expect(share(["lossy"], 300), report).to.be.at.least(3);
    // And the others than the best together get their share (~30 of 300).
    const best = NAMES.reduce((a, b) => (share([a], 300) >= share([b], 300) ? a : b));
    expect(300 - share([best], 300), report).to.be.at.least(10);
  });
});
