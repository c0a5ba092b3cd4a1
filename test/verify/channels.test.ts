import { expect } from "chai";
import { fundedAccount } from "../support/v1.js";
import { rest, type RestAnswer } from "../support/rest.js";
import { waitFor } from "../support/redis.js";
import { SmsReceiver, type SmsMessage } from "../support/receivers.js";
import { SmsFake, startRoutedApp, type RoutedApp } from "../support/routing.js";
import type { AccountChannel } from "../../src/accounts/account.js";
import { FRAUD_DEFAULTS, frNumber } from "../support/fraud.js";

const SMS = 50_000; // SMS_PRICES' default, 0.05
const VOICE = 120_000;
const TALK_TOKEN = "talk-status-token-0123456789abcdef";
const ALPHA_TOKEN = "alpha-status-token-0123456789abcdef";

/** What the voice provider is posted (docs/routing.md#providers): the code spoken digit by digit. */
interface VoiceMessage {
  to: string;
  from: string;
  text: string;
  locale: string;
  reference: string;
}

/** The code a voice message speaks: its digits, each said on its own. */
function spokenCode(m: VoiceMessage): string {
  const said = /: ((?:\d, )*\d)\./.exec(m.text)?.[1];
  if (said === undefined) throw new Error(`no code spoken in "${m.text}"`);
  return said.replaceAll(", ", "");
}

/**
 * docs/v2-api.md#channels and #fallback (9.3, rows "Choosing the channel" and "Fallback"): an SMS
 * provider (alpha) and a voice provider (talk), both http with delivery reports, on loopback; V2
 * verifications of accounts that allow voice, SMS or both.
 */
describe("V2 channels: the channel asked for, the account's order, and fallback with the same code (9.3)", () => {
  let app: RoutedApp;
  let alpha: SmsFake;
  let talk: SmsFake;
  let customer: { uuid: string; key: string };
  let next = 612_700_000;
  const fresh = () => `+33${(next += 1000)}`;

  before(async function () {
    this.timeout(30_000);
    alpha = await SmsFake.start();
    talk = await SmsFake.start();
    app = await startRoutedApp({
      DELIVERY_PROVIDERS: JSON.stringify([
        { name: "alpha", url: alpha.url, status_token: ALPHA_TOKEN },
        { name: "talk", channel: "voice", url: talk.url, status_token: TALK_TOKEN },
      ]),
      VOICE_PRICES: "default:0.12",
      OTP_RETRY_INTERVAL_SECONDS: "0",
    });
    const { account, apiKey } = await fundedAccount(app.registry.accounts, "Channels", 100_000_000);
    customer = { uuid: account.customerUuid, key: apiKey };
  });
  after(async () => {
    await app.stop();
    await Promise.all([alpha.close(), talk.close()]);
  });
  beforeEach(async () => {
    alpha.reset();
    talk.reset();
    await allow("sms", "voice");
  });

  const allow = async (...channels: AccountChannel[]) => {
    expect(await app.registry.accounts.setChannels(customer.uuid, channels)).to.equal(true);
    // The account is cached: wait until the service answers with the new channels.
    await waitFor(async () => {
      const a = await app.registry.accounts.get(customer.uuid);
      return JSON.stringify(a?.channels) === JSON.stringify(channels);
    });
  };
  const balance = async () => (await app.registry.accounts.get(customer.uuid))?.balanceMicros ?? Number.NaN;
  const create = (phone: string, options: Record<string, unknown> = {}): Promise<RestAnswer> =>
    rest(app.baseUrl).call("POST", "/v2/verification", {
      body: { target: { type: "phone_number", value: phone }, options },
      bearer: customer.key,
    });
  const check = (phone: string, code: string) =>
    rest(app.baseUrl).call("POST", "/v2/verification/check", {
      body: { target: { type: "phone_number", value: phone }, code },
      bearer: customer.key,
    });
  const report = async (provider: "alpha" | "talk", reference: string, status: string) => {
    const r = await rest(app.baseUrl).call("POST", `/v1/delivery/status/${provider}`, {
      body: { reference, status },
      bearer: provider === "alpha" ? ALPHA_TOKEN : TALK_TOKEN,
    });
    expect(r.status, r.text).to.equal(204);
  };
  const voiceTo = (phone: string) => talk.to(phone) as unknown as VoiceMessage[];
  const smsTo = (phone: string): SmsMessage[] => alpha.to(phone);

  it("calls first with method voice, speaking the code digit by digit, and answers the channels planned", async () => {
    const before = await balance();
    const phone = fresh();
    const r = await create(phone, { method: "voice", locale: "fr-FR" });
    expect(r.status, r.text).to.equal(200);
    expect(r.body).to.include({ status: "success", method: "voice" });
    expect(r.body.channels).to.deep.equal(["voice", "sms"]);
    const [call] = voiceTo(phone);
    expect(call).to.include({ to: phone, locale: "fr-FR" });
    expect(call?.text).to.match(/^Votre code de vérification est : (\d, ){5}\d\./);
    expect(smsTo(phone)).to.have.length(0);
    expect(before - (await balance()), "the voice price").to.equal(VOICE);
    const right = await check(phone, spokenCode(call as VoiceMessage));
    expect(right.body.status, right.text).to.equal("success");
  });

  it("starts on preferred_channel, else on the account's first channel", async () => {
    const spoken = fresh();
    expect((await create(spoken, { preferred_channel: "voice" })).body.channels).to.deep.equal([
      "voice",
      "sms",
    ]);
    expect(voiceTo(spoken)).to.have.length(1);

    await allow("voice", "sms");
    const first = fresh();
    const r = await create(first);
    expect(r.body).to.include({ method: "voice" });
    expect(r.body.channels).to.deep.equal(["voice", "sms"]);
    expect(voiceTo(first)).to.have.length(1);

    const texted = fresh();
    const s = await create(texted, { preferred_channel: "sms" });
    expect(s.body).to.include({ method: "message" });
    expect(s.body.channels).to.deep.equal(["sms", "voice"]);
    expect([smsTo(texted).length, voiceTo(texted).length]).to.deep.equal([1, 0]);
  });

  for (const [options, field, mentions] of [
    [{ preferred_channel: "voice" }, "options.preferred_channel", "not one of this account's channels"],
    [{ method: "voice" }, "options.method", "not one of this account's channels"],
    [{ preferred_channel: "whatsapp" }, "options.preferred_channel", "served by no provider"],
    [{ preferred_channel: "rcs" }, "options.preferred_channel", "is not available"],
  ] as const) {
    it(`refuses ${JSON.stringify(options)} naming ${field}, and changes nothing`, async () => {
      await allow("sms", ...(mentions.startsWith("not one") ? [] : (["whatsapp"] as const)));
      const before = await balance();
      const phone = fresh();
      const r = await create(phone, options);
      expect(r.status, r.text).to.equal(400);
      expect(r.body.code, r.text).to.equal("channel_not_enabled_in_region");
      expect(String(r.body.message)).to.include(mentions);
      expect(JSON.stringify(r.body)).to.include(field);
      expect(await balance()).to.equal(before);
      expect([smsTo(phone).length, voiceTo(phone).length]).to.deep.equal([0, 0]);
    });
  }

  it("falls back to SMS in the same call when the voice provider refuses, charging the SMS price only", async () => {
    talk.answer = () => 400;
    const before = await balance();
    const phone = fresh();
    const r = await create(phone, { method: "voice" });
    expect(r.status, r.text).to.equal(200);
    expect(r.body).to.include({ status: "success", method: "voice" });
    expect(voiceTo(phone)).to.have.length(1);
    const [sms] = smsTo(phone);
    expect(sms, "the SMS of the fallback").to.not.equal(undefined);
    expect(before - (await balance()), "the SMS price, the refused call refunded").to.equal(SMS);
    const right = await check(phone, SmsReceiver.code(sms as SmsMessage));
    expect(right.body.status, right.text).to.equal("success");
  });

  it("falls back to SMS with the same code when the call is reported undelivered, refunding the call", async () => {
    const before = await balance();
    const phone = fresh();
    expect((await create(phone, { method: "voice" })).status).to.equal(200);
    const [call] = voiceTo(phone);
    const code = spokenCode(call as VoiceMessage);
    expect(before - (await balance())).to.equal(VOICE);

    await report("talk", call?.reference ?? "", "undelivered");
    const sms = await alpha.received(phone);
    expect(SmsReceiver.code(sms), "the same code").to.equal(code);
    await waitFor(async () => before - (await balance()) === SMS);
    // A repeated report changes nothing: no second SMS, no second refund.
    await report("talk", call?.reference ?? "", "undelivered");
    expect(smsTo(phone)).to.have.length(1);
    expect(before - (await balance())).to.equal(SMS);
    const right = await check(phone, code);
    expect(right.body.status, right.text).to.equal("success");
  });

  it("never falls back after a right code: the call reported undelivered later is only refunded", async () => {
    const before = await balance();
    const phone = fresh();
    expect((await create(phone, { method: "voice" })).status).to.equal(200);
    const [call] = voiceTo(phone);
    const right = await check(phone, spokenCode(call as VoiceMessage));
    expect(right.body.status, right.text).to.equal("success");
    await report("talk", call?.reference ?? "", "undelivered");
    await waitFor(async () => (await balance()) === before);
    expect(smsTo(phone)).to.have.length(0);
  });

  it("retries on the channel the verification moved to, and its SMS carries the new code", async () => {
    const before = await balance();
    const phone = fresh();
    expect((await create(phone, { method: "voice" })).status).to.equal(200);
    const [call] = voiceTo(phone);
    await report("talk", call?.reference ?? "", "undelivered");
    await alpha.received(phone);
    // A second creation for the running verification is its retry: by SMS now.
    const again = await create(phone, { method: "voice" });
    expect(again.body, again.text).to.include({ status: "retry" });
    await waitFor(() => Promise.resolve(smsTo(phone).length === 2));
    expect(voiceTo(phone)).to.have.length(1);
    const second = SmsReceiver.code(smsTo(phone)[1] as SmsMessage);
    expect((await check(phone, second)).body.status).to.equal("success");
    await waitFor(async () => before - (await balance()) === 2 * SMS);
  });
});

/**
 * docs/fraud.md and docs/v2-api.md#channels (9.3, row "Fallback": the fraud engine judges each
 * channel that costs): a pumping burst of voice calls to a destination never served is stopped
 * as a burst of SMS is, with the engine's documented defaults.
 */
describe("V2 channels: a pumping burst over voice is stopped by the fraud engine (9.3)", () => {
  let app: RoutedApp;
  let talk: SmsFake;
  let customer: { uuid: string; key: string };

  before(async function () {
    this.timeout(30_000);
    talk = await SmsFake.start();
    const alpha = await SmsFake.start();
    after(() => alpha.close());
    app = await startRoutedApp({
      ...FRAUD_DEFAULTS,
      DELIVERY_PROVIDERS: JSON.stringify([
        { name: "alpha", url: alpha.url },
        { name: "talk", channel: "voice", url: talk.url },
      ]),
      VOICE_PRICES: "default:0.12",
    });
    const { account, apiKey } = await fundedAccount(app.registry.accounts, "Voice pumping", 100_000_000);
    customer = { uuid: account.customerUuid, key: apiKey };
    await app.registry.accounts.setChannels(customer.uuid, ["voice", "sms"]);
  });
  after(async () => {
    await app.stop();
    await talk.close();
  });

  it("calls FRAUD_NEW_DESTINATION_SENDS (10) fresh numbers of a new destination, then answers blocked suspicious, calling and charging nothing more", async function () {
    this.timeout(30_000);
    const balance = async () => (await app.registry.accounts.get(customer.uuid))?.balanceMicros ?? Number.NaN;
    const start = await balance();
    const create = (phone: string) =>
      rest(app.baseUrl).call("POST", "/v2/verification", {
        body: { target: { type: "phone_number", value: phone } },
        bearer: customer.key,
      });
    for (let i = 0; i < 10; i++) {
      const r = await create(frNumber("bouygues", 3000 + i));
      expect(r.body, r.text).to.include({ status: "success", method: "voice" });
    }
    expect(talk.requests).to.have.length(10);
    expect(start - (await balance())).to.equal(10 * VOICE);
    for (let i = 10; i < 15; i++) {
      const r = await create(frNumber("bouygues", 3000 + i));
      expect(r.body, r.text).to.include({ status: "blocked", reason: "suspicious" });
      expect(r.body.channels).to.deep.equal([]);
    }
    expect(talk.requests, "no call past the burst").to.have.length(10);
    expect(start - (await balance())).to.equal(10 * VOICE);
  });
});
