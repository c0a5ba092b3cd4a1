import { expect } from "chai";
import Prelude from "@prelude.so/sdk";
import { fundedAccount } from "../support/v1.js";
import { rest, type RestAnswer } from "../support/rest.js";
import { waitFor } from "../support/redis.js";
import { SmsReceiver, type SmsMessage } from "../support/receivers.js";
import { SmsFake, startRoutedApp, type RoutedApp } from "../support/routing.js";
import { GraphFake, whatsappEntry, type GraphMessage, type GraphNumber } from "../support/graph-fake.js";
import { checkPreludeModels } from "../support/prelude-contract.js";
import { sample } from "../support/metrics.js";
import { authUuidOfVerification } from "../../src/verify/events.js";

const SMS = 50_000; // SMS_PRICES' default, 0.05
const WHATSAPP = 30_000; // WHATSAPP_PRICES' default, 0.03
const VOICE = 120_000;
const NUMBER: GraphNumber = {
  phoneNumberId: "106540352242922",
  token: "EAAGraphToken-0123456789abcdef",
  appSecret: "app-secret-0123456789abcdef",
};

/** The code a WhatsApp template message carries, in its body and in its copy-code button. */
function templateCode(m: GraphMessage | undefined): string {
  const [body, button] = m?.body.template.components ?? [];
  const code = body?.parameters[0]?.text ?? "";
  expect(button?.parameters[0]?.text, "the copy-code button's code").to.equal(code);
  return code;
}

/**
 * docs/v2-api.md#channels and #fallback (9.3): WhatsApp through a fake Graph API on loopback built
 * to Meta's documented shapes, SMS and voice through http fakes; fallback from WhatsApp on a
 * refusal, a `failed` status and silence (CHANNEL_FALLBACK_SECONDS 1), never after a right code;
 * and the V2 SDK creating and checking WhatsApp and voice verifications.
 */
describe("V2 channels: WhatsApp, its statuses and its silence (9.3)", () => {
  let app: RoutedApp;
  let graph: GraphFake;
  let alpha: SmsFake;
  let talk: SmsFake;
  let customer: { uuid: string; key: string };
  let sdk: Prelude;
  let next = 612_800_000;
  const fresh = () => `+33${(next += 1000)}`;

  before(async function () {
    this.timeout(30_000);
    graph = await GraphFake.start([NUMBER]);
    alpha = await SmsFake.start();
    talk = await SmsFake.start();
    app = await startRoutedApp({
      DELIVERY_PROVIDERS: JSON.stringify([
        { name: "alpha", url: alpha.url },
        whatsappEntry("wa", graph, NUMBER, "verify-token-0123456789", { languages: { fr: "fr" } }),
        { name: "talk", channel: "voice", url: talk.url },
      ]),
      VOICE_PRICES: "default:0.12",
      CHANNEL_FALLBACK_SECONDS: "1",
      STATUS_TOKEN_FAILURES_IP: "off",
    });
    const { account, apiKey } = await fundedAccount(app.registry.accounts, "WhatsApp", 100_000_000);
    customer = { uuid: account.customerUuid, key: apiKey };
    await app.registry.accounts.setChannels(customer.uuid, ["whatsapp", "sms", "voice"]);
    sdk = new Prelude({ apiToken: customer.key, baseURL: app.baseUrl, maxRetries: 0 });
  });
  after(async () => {
    await app.stop();
    await Promise.all([graph.close(), alpha.close(), talk.close()]);
  });
  beforeEach(() => {
    graph.answer = () => "accept";
    alpha.reset();
  });

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
  const whatsappTo = (phone: string) => graph.messages.filter((m) => m.body.to === phone.slice(1));
  const smsTo = (phone: string): SmsMessage[] => alpha.to(phone);
  /** `ringfence_channel_fallbacks_total` from WhatsApp to SMS for `reason`. */
  const fellBack = async (reason: string) =>
    sample(await app.metrics(), "ringfence_channel_fallbacks_total", { from: "whatsapp", to: "sms", reason });
  /** The fallbacks waiting in Redis (docs/v2-api.md#fallback). */
  const waiting = () => app.registry.redis.zcard(app.registry.verify.keys.fallbacks());

  it("sends the approved template with the code in its body and copy-code button, in the locale's language", async () => {
    const before = await balance();
    const phone = fresh();
    const r = await create(phone, { locale: "fr-FR" });
    expect(r.body, r.text).to.include({ status: "success", method: "message" });
    expect(r.body.channels).to.deep.equal(["whatsapp", "sms", "voice"]);
    const [m] = whatsappTo(phone);
    expect(m?.body.template).to.deep.include({ name: "verification_code", language: { code: "fr" } });
    const code = templateCode(m);
    expect(code).to.match(/^\d{6}$/);
    expect(before - (await balance()), "the WhatsApp price").to.equal(WHATSAPP);
    expect((await check(phone, code)).body.status).to.equal("success");
  });

  it("falls back to SMS in the same call when Graph refuses the message", async () => {
    graph.answer = () => ({
      status: 400,
      error: { message: "(#131026) Message undeliverable", type: "OAuthException", code: 131026 },
    });
    const before = await balance();
    const refused = await fellBack("refused");
    const phone = fresh();
    const r = await create(phone);
    expect(r.body, r.text).to.include({ status: "success" });
    expect(await fellBack("refused")).to.equal(refused + 1);
    const [sms] = smsTo(phone);
    expect(sms, "the SMS of the fallback").to.not.equal(undefined);
    expect(before - (await balance()), "the SMS price only").to.equal(SMS);
    expect((await check(phone, SmsReceiver.code(sms as SmsMessage))).body.status).to.equal("success");
  });

  it("falls back to SMS with the same code on a signed `failed` status, refunding the WhatsApp message", async () => {
    const before = await balance();
    const phone = fresh();
    expect((await create(phone)).status).to.equal(200);
    const [m] = whatsappTo(phone);
    const code = templateCode(m);
    const counted = (await fellBack("undelivered")) + (await fellBack("silence"));
    const res = await graph.deliver(app.baseUrl, m?.id ?? "", "failed");
    expect(res.status).to.equal(200);
    const sms = await alpha.received(phone);
    expect(SmsReceiver.code(sms), "the same code").to.equal(code);
    await waitFor(async () => before - (await balance()) === SMS);
    // One move, by the status (or, on a machine slower than CHANNEL_FALLBACK_SECONDS, the silence).
    expect((await fellBack("undelivered")) + (await fellBack("silence"))).to.equal(counted + 1);
    expect((await check(phone, code)).body.status).to.equal("success");
  });

  it("answers a `failed` status with a bad signature 401, and nothing changes", async () => {
    const before = await balance();
    const phone = fresh();
    expect((await create(phone)).status).to.equal(200);
    const [m] = whatsappTo(phone);
    // A right code first: no fallback can follow, so the refund alone tells a status recorded.
    expect((await check(phone, templateCode(m))).body.status).to.equal("success");
    for (const secret of ["not-the-app-secret", null]) {
      const res = await graph.deliver(app.baseUrl, m?.id ?? "", "failed", secret);
      expect(res.status).to.equal(401);
    }
    expect(before - (await balance()), "not refunded").to.equal(WHATSAPP);
    // The same status signed with the app secret is recorded: the message is refunded.
    expect((await graph.deliver(app.baseUrl, m?.id ?? "", "failed")).status).to.equal(200);
    expect(await balance()).to.equal(before);
    expect(smsTo(phone)).to.have.length(0);
  });

  it("falls back to SMS when WhatsApp reports no delivery within CHANNEL_FALLBACK_SECONDS; the WhatsApp message stays charged", async () => {
    const before = await balance();
    const silent = await fellBack("silence");
    const phone = fresh();
    expect((await create(phone)).status).to.equal(200);
    const code = templateCode(whatsappTo(phone)[0]);
    const sms = await alpha.received(phone);
    expect(await fellBack("silence")).to.equal(silent + 1);
    expect(SmsReceiver.code(sms), "the same code").to.equal(code);
    await waitFor(async () => before - (await balance()) === WHATSAPP + SMS);
    expect((await check(phone, code)).body.status).to.equal("success");
  });

  it("does not fall back once WhatsApp reports the message delivered (or read)", async () => {
    for (const status of ["delivered", "read"] as const) {
      const phone = fresh();
      const r = await create(phone);
      expect(r.status).to.equal(200);
      const member = `${customer.uuid} ${authUuidOfVerification(String(r.body.id))} 1 whatsapp`;
      const fallbacks = app.registry.verify.keys.fallbacks();
      expect(await app.registry.redis.zscore(fallbacks, member), "scheduled").to.not.equal(null);
      const [m] = whatsappTo(phone);
      expect((await graph.deliver(app.baseUrl, m?.id ?? "", status)).status).to.equal(200);
      // Answered once recorded: the scheduled fallback is gone, so no SMS can follow.
      expect(await app.registry.redis.zscore(fallbacks, member), status).to.equal(null);
      expect(smsTo(phone), status).to.have.length(0);
    }
  });

  it("never falls back after a right code, however long WhatsApp stays silent", async () => {
    const phone = fresh();
    expect((await create(phone)).status).to.equal(200);
    expect((await check(phone, templateCode(whatsappTo(phone)[0]))).body.status).to.equal("success");
    // The fallback falls due, is taken, and finds the code checked: nothing is sent.
    await waitFor(async () => (await waiting()) === 0);
    expect(smsTo(phone)).to.have.length(0);
  });

  it("creates and checks WhatsApp and voice verifications through the V2 SDK, whose types accept the answers", async () => {
    const phone = fresh();
    const created = await sdk.verification.create({
      target: { type: "phone_number", value: phone },
      options: { preferred_channel: "whatsapp" },
    });
    expect(created).to.include({ status: "success", method: "message" });
    const checked = await sdk.verification.check({
      target: { type: "phone_number", value: phone },
      code: templateCode(whatsappTo(phone)[0]),
    });
    expect(checked.status).to.equal("success");

    const called = fresh();
    const before = await balance();
    const voice = await sdk.verification.create({
      target: { type: "phone_number", value: called },
      options: { method: "voice" },
    });
    expect(voice).to.include({ status: "success", method: "voice" });
    expect(voice.channels).to.deep.equal(["voice", "whatsapp", "sms"]);
    expect(before - (await balance())).to.equal(VOICE);
    const spoken = (talk.to(called)[0] as unknown as { text: string } | undefined)?.text ?? "";
    const code = (/: ((?:\d, )*\d)\./.exec(spoken)?.[1] ?? "").replaceAll(", ", "");
    expect(
      (await sdk.verification.check({ target: { type: "phone_number", value: called }, code })).status,
    ).to.equal("success");
    const strip = (v: object) => JSON.parse(JSON.stringify(v)) as unknown;
    expect(
      checkPreludeModels([
        { label: "whatsapp create", model: "VerificationCreateResponse", value: strip(created) },
        { label: "voice create", model: "VerificationCreateResponse", value: strip(voice) },
        { label: "check", model: "VerificationCheckResponse", value: strip(checked) },
      ]),
    ).to.deep.equal([]);
  });
});
