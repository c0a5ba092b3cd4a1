import { expect } from "chai";
import Prelude from "@prelude.so/sdk";
import { fundedAccount } from "../support/v1.js";
import { rest, type RestAnswer } from "../support/rest.js";
import { Receiver } from "../support/receivers.js";
import { SmsFake, startRoutedApp, type RoutedApp } from "../support/routing.js";
import { checkPreludeModels } from "../support/prelude-contract.js";

/** An email as the http email provider is posted it. */
interface Mail {
  to: string;
  from: string;
  subject: string;
  body: string;
  reference: string;
}

/**
 * docs/v2-api.md#email (9.3, row "Email through V2"): a V2 verification of an email address sends
 * its code by the email provider the session service uses (an http provider on loopback), is
 * checked by the same target, answers `channels: ["email"]`, and needs the account to allow email.
 */
describe("V2 channels: email verifications (9.3)", () => {
  let app: RoutedApp;
  let mail: Receiver;
  let alpha: SmsFake;
  let customer: { uuid: string; key: string };
  let n = 0;
  const fresh = () => `user${(n += 1)}.${Date.now()}@Example.COM`;

  before(async function () {
    this.timeout(30_000);
    mail = await Receiver.start();
    alpha = await SmsFake.start();
    app = await startRoutedApp({
      DELIVERY_PROVIDERS: JSON.stringify([{ name: "alpha", url: alpha.url }]),
      EMAIL_PROVIDER: "http",
      EMAIL_HTTP_URL: mail.url,
      EMAIL_FROM: "Ringfence <codes@ringfence.example>",
      OTP_RETRY_INTERVAL_SECONDS: "0",
    });
    const { account, apiKey } = await fundedAccount(app.registry.accounts, "Email", 10_000_000);
    customer = { uuid: account.customerUuid, key: apiKey };
    await app.registry.accounts.setChannels(customer.uuid, ["sms", "email"]);
  });
  after(async () => {
    await app.stop();
    await Promise.all([mail.close(), alpha.close()]);
  });

  const balance = async () => (await app.registry.accounts.get(customer.uuid))?.balanceMicros ?? Number.NaN;
  const create = (email: string, options: Record<string, unknown> = {}): Promise<RestAnswer> =>
    rest(app.baseUrl).call("POST", "/v2/verification", {
      body: { target: { type: "email_address", value: email }, options },
      bearer: customer.key,
    });
  const check = (email: string, code: string) =>
    rest(app.baseUrl).call("POST", "/v2/verification/check", {
      body: { target: { type: "email_address", value: email }, code },
      bearer: customer.key,
    });
  const mailsTo = (email: string): Mail[] =>
    mail.received.map((r) => JSON.parse(r.body) as Mail).filter((m) => m.to === email.toLowerCase());
  const codeOf = (m: Mail | undefined) => /^(\d{6})$/m.exec(m?.body ?? "")?.[1] ?? "";

  it("emails the code, charges nothing, answers method and channels email, and checks it by the address", async () => {
    const before = await balance();
    const email = fresh();
    const r = await create(email, { locale: "fr" });
    expect(r.status, r.text).to.equal(200);
    expect(r.body).to.include({ status: "success", method: "email" });
    expect(r.body.channels).to.deep.equal(["email"]);
    const [m] = mailsTo(email);
    expect(m).to.include({
      from: "Ringfence <codes@ringfence.example>",
      subject: "Votre code de vérification",
    });
    expect(m?.subject).to.not.include(codeOf(m));
    expect(await balance()).to.equal(before);
    expect(alpha.requests, "no SMS").to.have.length(0);
    expect((await check(email, "000000")).body.status).to.equal("failure");
    // The address is found whatever its case.
    expect((await check(email.toUpperCase(), codeOf(m))).body.status).to.equal("success");
    expect((await check(email, codeOf(m))).body.status).to.equal("expired_or_not_found");
  });

  it("retries a running email verification with a new code by email", async () => {
    const email = fresh();
    expect((await create(email)).body.status).to.equal("success");
    const again = await create(email);
    expect(again.body, again.text).to.include({ status: "retry", method: "email" });
    const [first, second] = mailsTo(email);
    expect(codeOf(second)).to.match(/^\d{6}$/);
    expect((await check(email, codeOf(first))).body.status).to.equal("failure");
    expect((await check(email, codeOf(second))).body.status).to.equal("success");
  });

  it("creates and checks an email verification through the V2 SDK", async () => {
    const sdk = new Prelude({ apiToken: customer.key, baseURL: app.baseUrl, maxRetries: 0 });
    const email = fresh();
    const created = await sdk.verification.create({ target: { type: "email_address", value: email } });
    expect(created).to.include({ status: "success", method: "email" });
    const checked = await sdk.verification.check({
      target: { type: "email_address", value: email },
      code: codeOf(mailsTo(email)[0]),
    });
    expect(checked.status).to.equal("success");
    // The SDK's declared types know `method: "email"`, and list no `email` among `channels`
    // (docs/v2-api.md#email): that one field is the only difference.
    expect(
      checkPreludeModels([
        {
          label: "email create",
          model: "VerificationCreateResponse",
          value: JSON.parse(JSON.stringify(created)) as unknown,
        },
        {
          label: "email check",
          model: "VerificationCheckResponse",
          value: JSON.parse(JSON.stringify(checked)) as unknown,
        },
      ]).map((v) => v.split(": ")[1]),
    ).to.deep.equal(["$.channels[0]"]);
  });

  for (const [label, email, options, status, code, mentions] of [
    ["a malformed address", "not-an-address", {}, 400, "invalid_request", "target.value"],
    [
      "a phone channel asked for",
      "a@example.com",
      { preferred_channel: "sms" },
      400,
      "channel_not_enabled_in_region",
      "options.preferred_channel",
    ],
    [
      "a call asked for",
      "a@example.com",
      { method: "voice" },
      400,
      "channel_not_enabled_in_region",
      "options.method",
    ],
  ] as const) {
    it(`refuses ${label}, naming it, sending nothing`, async () => {
      const before = mail.received.length;
      const r = await create(email, options);
      expect(r.status, r.text).to.equal(status);
      expect(r.body.code, r.text).to.equal(code);
      expect(JSON.stringify(r.body)).to.include(mentions);
      expect(mail.received).to.have.length(before);
    });
  }

  it("refuses an email target with 403 email_verification_not_allowed when the account does not allow email", async () => {
    await app.registry.accounts.setChannels(customer.uuid, ["sms"]);
    try {
      const before = mail.received.length;
      const r = await create(fresh());
      expect(r.status, r.text).to.equal(403);
      expect(r.body.code).to.equal("email_verification_not_allowed");
      expect(String(r.body.message)).to.include("email is not one of this account's channels (sms)");
      expect(mail.received).to.have.length(before);
    } finally {
      await app.registry.accounts.setChannels(customer.uuid, ["sms", "email"]);
    }
  });
});
