import { expect } from "chai";
import { fundedAccount } from "../support/v1.js";
import { rest } from "../support/rest.js";
import { waitFor } from "../support/redis.js";
import { SmsFake, startRoutedApp, type RoutedApp } from "../support/routing.js";
import { GraphFake, whatsappEntry, type GraphNumber } from "../support/graph-fake.js";
import { seeded } from "../support/seeded.js";

const PRICES = { sms: 50_000, whatsapp: 30_000, voice: 120_000 } as const;
const TALK_TOKEN = "talk-status-token-0123456789abcdef";
const ALPHA_TOKEN = "alpha-status-token-0123456789abcdef";
const NUMBER: GraphNumber = {
  phoneNumberId: "106540352242922",
  token: "EAAGraphToken-0123456789abcdef",
  appSecret: "app-secret-0123456789abcdef",
};

/**
 * docs/v2-api.md#fallback (9.3, Done when: the balance equals the sum of each accepted, not
 * undelivered message's channel price): sixty V2 verifications over WhatsApp, voice and SMS, each
 * provider refusing some messages, some reported failed or undelivered, some left silent; the
 * balance moves by exactly what the fakes accepted and were not told was undelivered.
 */
describe("V2 channels: money over refusals, failed reports and silences (9.3)", () => {
  let app: RoutedApp;
  let graph: GraphFake;
  let alpha: SmsFake;
  let talk: SmsFake;
  let customer: { uuid: string; key: string };

  before(async function () {
    this.timeout(30_000);
    graph = await GraphFake.start([NUMBER]);
    alpha = await SmsFake.start();
    talk = await SmsFake.start();
    app = await startRoutedApp({
      DELIVERY_PROVIDERS: JSON.stringify([
        { name: "alpha", url: alpha.url, status_token: ALPHA_TOKEN },
        whatsappEntry("wa", graph, NUMBER, "verify-token-0123456789"),
        { name: "talk", channel: "voice", url: talk.url, status_token: TALK_TOKEN },
      ]),
      SMS_PRICES: "default:0.05",
      WHATSAPP_PRICES: "default:0.03",
      VOICE_PRICES: "default:0.12",
      CHANNEL_FALLBACK_SECONDS: "1",
      STATUS_TOKEN_FAILURES_IP: "off",
      // Providers refuse on purpose here: their circuits stay closed.
      PROVIDER_CIRCUIT_FAILURES: "1000",
    });
    const { account, apiKey } = await fundedAccount(app.registry.accounts, "Money", 100_000_000);
    customer = { uuid: account.customerUuid, key: apiKey };
    await app.registry.accounts.setChannels(customer.uuid, ["whatsapp", "voice", "sms"]);
  });
  after(async () => {
    await app.stop();
    await Promise.all([graph.close(), alpha.close(), talk.close()]);
  });

  it("charges each accepted message at its channel's price, less every one reported undelivered", async function () {
    this.timeout(120_000);
    const random = seeded(35);
    const balance = async () => (await app.registry.accounts.get(customer.uuid))?.balanceMicros ?? Number.NaN;
    const before = await balance();
    // Each provider refuses about one message in five.
    graph.answer = () =>
      random() < 0.2
        ? { status: 400, error: { message: "(#131026) undeliverable", type: "OAuthException", code: 131026 } }
        : "accept";
    talk.answer = () => (random() < 0.2 ? 400 : 200);
    alpha.answer = () => (random() < 0.2 ? 400 : 200);
    const undelivered = new Set<string>();
    const report = async (provider: "alpha" | "talk", reference: string) => {
      const r = await rest(app.baseUrl).call("POST", `/v1/delivery/status/${provider}`, {
        body: { reference, status: "undelivered" },
        bearer: provider === "alpha" ? ALPHA_TOKEN : TALK_TOKEN,
      });
      expect(r.status, r.text).to.equal(204);
      undelivered.add(`${provider} ${reference}`);
    };

    for (let i = 0; i < 60; i++) {
      const phone = `+336129${String(i).padStart(2, "0")}000`;
      const options = random() < 0.3 ? { method: "voice" } : {};
      const r = await rest(app.baseUrl).call("POST", "/v2/verification", {
        body: { target: { type: "phone_number", value: phone }, options },
        bearer: customer.key,
      });
      // Every channel refused it (a few): nothing charged, answered 500.
      expect([200, 500], r.text).to.include(r.status);
      const roll = random();
      const wa = graph.messages.find((m) => m.body.to === phone.slice(1));
      const call = talk.accepted.find((m) => m.to === phone);
      if (roll < 0.3 && wa !== undefined) {
        expect((await graph.deliver(app.baseUrl, wa.id, "failed")).status).to.equal(200);
        undelivered.add(`wa ${wa.id}`);
      } else if (roll < 0.5 && call !== undefined) {
        await report("talk", call.reference);
      } else if (roll < 0.6 && wa !== undefined) {
        expect((await graph.deliver(app.baseUrl, wa.id, "delivered")).status).to.equal(200);
      }
      // Else: silent; a WhatsApp message falls back after CHANNEL_FALLBACK_SECONDS.
    }
    // Every scheduled fallback carried out (or cancelled), then a few SMS reported undelivered too.
    await waitFor(
      async () => (await app.registry.redis.zcard(app.registry.verify.keys.fallbacks())) === 0,
      30_000,
    );
    for (const m of alpha.accepted.filter((_, i) => i % 4 === 0)) await report("alpha", m.reference);

    const charged =
      graph.messages.filter((m) => !undelivered.has(`wa ${m.id}`)).length * PRICES.whatsapp +
      talk.accepted.filter((m) => !undelivered.has(`talk ${m.reference}`)).length * PRICES.voice +
      alpha.accepted.filter((m) => !undelivered.has(`alpha ${m.reference}`)).length * PRICES.sms;
    const mix = JSON.stringify({
      whatsapp: graph.messages.length,
      voice: talk.accepted.length,
      sms: alpha.accepted.length,
      undelivered: undelivered.size,
    });
    // Each channel took part, and some of each kind of outcome happened.
    expect(graph.messages.length, mix).to.be.at.least(10);
    expect(talk.accepted.length, mix).to.be.at.least(5);
    expect(alpha.accepted.length, mix).to.be.at.least(10);
    await waitFor(async () => before - (await balance()) === charged, 10_000).catch(() => undefined);
    expect(before - (await balance()), mix).to.equal(charged);
    // No hold is left behind.
    expect(await app.registry.redis.zcard(app.registry.verify.keys.holds(customer.uuid))).to.equal(0);
  });
});
